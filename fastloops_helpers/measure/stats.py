"""One statistics policy: the median and p95 of repeats, ratios as the median of per-round ratios.

`best_of` exists for the one place that names it so (a decoder's peak speed). Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import TypeVar

import numpy as np
import pandas as pd

TIE = "a tie on this machine"
TOO_FEW = "too few rounds to decide"  # fewer than MIN_ROUNDS: no 95 % interval of a median is bounded
MIN_ROUNDS = 6
K = TypeVar("K", bound=Hashable)  # a contender's name in `clock.interleaved` samples


def median(values: Sequence[float]) -> float:
    """Return the median of `values` (the figure the project quotes)."""
    return float(np.median(_checked(values)))


def p95(values: Sequence[float]) -> float:
    """Return the 95th percentile of `values` (the spread the project quotes)."""
    return float(np.quantile(_checked(values), 0.95))


def best_of(values: Sequence[float]) -> float:
    """Return the smallest of `values`: only for figures named as a best-of."""
    return float(np.min(_checked(values)))


def ratios(samples: Mapping[K, Sequence[float]], numerator: K, denominator: K) -> list[float]:
    """Return numerator/denominator per round, from `clock.interleaved` samples (for `verdict`'s interval)."""
    num, den = np.asarray(samples[numerator], float), np.asarray(samples[denominator], float)
    if len(num) != len(den):
        raise ValueError(
            f"{numerator!r} has {len(num)} samples and {denominator!r} {len(den)}: "
            "time them together with clock.interleaved"
        )
    return (num / den).tolist()


LOW, HIGH = "_ci_low", "_ci_high"  # suffixes of a saved ratio's 95 % interval


def interval_figures(key: str, ratios: Sequence[float]) -> dict[str, float]:
    """Return {key: median, key_ci_low, key_ci_high} of per-round ratios, to save beside the other figures.

    The claims registry and the report judge a ratio saved this way by its interval (`verdict`).
    """
    low, high = median_interval(ratios)
    return {key: median(ratios), key + LOW: low, key + HIGH: high}


def ratio(samples: Mapping[K, Sequence[float]], numerator: K, denominator: K) -> float:
    """Return the median over rounds of numerator/denominator, from `clock.interleaved` samples."""
    return float(np.median(ratios(samples, numerator, denominator)))


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Return the distribution-free (order statistics) interval of the median of `values`.

    [v_(k), v_(n-1-k)] of the sorted values holds the true median with probability 1 - 2 P(Binomial(n, 1/2) <= k);
    k is the largest index that keeps this at least `confidence`. Deterministic: the same samples always give
    the same interval. Fewer than 6 values cannot reach 95 %: the interval is then unbounded.
    """
    v = np.sort(_checked(values))
    n = len(v)
    coverage = [1 - 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n for k in range((n + 1) // 2)]
    enough = [k for k, c in enumerate(coverage) if c >= confidence]
    if not enough:
        return float("-inf"), float("inf")
    k = max(enough)
    return float(v[k]), float(v[n - 1 - k])


@dataclass(frozen=True)
class Verdict:
    """A ratio's verdict against a threshold (or a span), with the interval that decided it."""

    word: str  # "met", "missed", TIE, or TOO_FEW (fewer than MIN_ROUNDS rounds)
    median: float
    low: float
    high: float
    rounds: int
    threshold: float | tuple[float, float]  # one bound, or the span (low, high) the value must lie within
    higher_is_better: bool

    def __str__(self) -> str:
        if isinstance(self.threshold, tuple):
            target = f"{self.threshold[0]:g} to {self.threshold[1]:g}"
        else:
            target = f"{'>=' if self.higher_is_better else '<='} {self.threshold:g}"
        interval, note = (
            ("", f"{MIN_ROUNDS} or more bound its 95 % interval; ")
            if self.word == TOO_FEW
            else (f", 95 % interval {self.low:.3g} to {self.high:.3g}", "")
        )
        return f"{self.word}: median {self.median:.3g}{interval} over {self.rounds} rounds ({note}target {target})"


def verdict(ratios: Sequence[float], threshold: float | tuple[float, float], higher_is_better: bool = True) -> Verdict:
    """Return "met"/"missed" only when the median's 95 % interval lies on one side of `threshold`, else a tie;
    TOO_FEW under MIN_ROUNDS rounds, whose interval is unbounded (more rounds can decide, fewer never do).

    A `threshold` given as a span (low, high) is met when the interval lies within it, missed when it lies
    wholly outside. Explained in notebooks/00_setup.ipynb.
    """
    low, high = median_interval(ratios)
    if isinstance(threshold, tuple):
        bounds = threshold
    else:
        bounds = (threshold, float("inf")) if higher_is_better else (float("-inf"), threshold)
    return Verdict(
        decide(low, high, *bounds) if len(ratios) >= MIN_ROUNDS else TOO_FEW,
        median(ratios),
        low,
        high,
        len(ratios),
        threshold,
        higher_is_better,
    )


def decide(low: float, high: float, at_least: float = float("-inf"), at_most: float = float("inf")) -> str:
    """Return "met" when [low, high] lies within [at_least, at_most], "missed" when wholly outside, else a tie.

    The one rule behind every verdict: `verdict` passes a median's 95 % interval, the claims registry a saved
    one, and a single run passes its value as both ends (then never a tie).
    """
    if at_least <= low and high <= at_most:
        return "met"
    if high < at_least or low > at_most:
        return "missed"
    return TIE


def summarize(samples: Mapping[str, Sequence[float]], baseline: str | None = None) -> pd.DataFrame:
    """Tabulate mean, median, p95 and min per name, and uplift % of the median against `baseline`.

    Uplift follows seed 003: (x - baseline) / baseline * 100, so -90 means 90 % less time.
    """
    rows = {}
    for name, values in samples.items():
        v = _checked(values, name)
        rows[name] = {"mean": v.mean(), "median": np.median(v), "p95": np.quantile(v, 0.95), "min": v.min()}
    table = pd.DataFrame.from_dict(rows, orient="index")
    if baseline is not None:
        if baseline not in table.index:
            raise KeyError(f"baseline {baseline!r} is not among {list(table.index)}")
        base = table.loc[baseline, "median"]
        table["uplift_%"] = (table["median"] - base) / base * 100
    return table


def _checked(values: Sequence[float], name: str = "values") -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError(f"no samples for {name!r}: measure at least one repeat")
    return v
