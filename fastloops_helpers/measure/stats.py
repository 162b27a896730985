"""One statistics policy: the median and p95 of repeats, ratios as the median of per-round ratios.

`best_of` exists for the one place that names it so (a decoder's peak speed). Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd


def median(values: Sequence[float]) -> float:
    """Return the median of `values` (the figure the project quotes)."""
    return float(np.median(_checked(values)))


def p95(values: Sequence[float]) -> float:
    """Return the 95th percentile of `values` (the spread the project quotes)."""
    return float(np.quantile(_checked(values), 0.95))


def best_of(values: Sequence[float]) -> float:
    """Return the smallest of `values`: only for figures named as a best-of."""
    return float(np.min(_checked(values)))


def ratio(samples: Mapping[str, Sequence[float]], numerator: str, denominator: str) -> float:
    """Return the median over rounds of numerator/denominator, from `clock.interleaved` samples."""
    num, den = np.asarray(samples[numerator], float), np.asarray(samples[denominator], float)
    if len(num) != len(den):
        raise ValueError(f"{numerator!r} has {len(num)} samples and {denominator!r} {len(den)}: "
                         "time them together with clock.interleaved")
    return float(np.median(num / den))


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
