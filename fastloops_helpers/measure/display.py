"""How measurements are shown: `[timing]` lines that nbval masks, and progress bars stable in stored notebooks.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence, Sized
from typing import Any, TypeVar

from tqdm import tqdm

from . import stats

T = TypeVar("T")
TIMING_PREFIX = "[timing]"  # nbval masks exactly this: tests/sanitize.cfg
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt}"  # no rate or ETA, so stored outputs stay stable
MIN_STEPS = 3  # loops this short show no bar: fewer stored lines, and a lecturer sees the cell run anyway


def show(label: str, seconds: float) -> None:
    """Print one timing with the fixed prefix that tests/sanitize.cfg masks."""
    print(f"{TIMING_PREFIX} {label}: {seconds:.4g} s")


def progress(iterable: Iterable[T], desc: str = "", total: int | None = None, **kw: Any) -> Iterable[T]:
    """Wrap `iterable` in a text progress bar whose final line is the same on every run.

    Loops of at most MIN_STEPS known steps get no bar: it would say little and cost a stored output line.
    """
    steps = total if total is not None else (len(iterable) if isinstance(iterable, Sized) else None)
    kw.setdefault("disable", steps is not None and steps <= MIN_STEPS)
    return tqdm(
        iterable, desc=desc, total=total, bar_format=BAR_FORMAT, file=sys.stderr, mininterval=0.5, ascii=True, **kw
    )


def predicted(
    what: str, low: float, high: float, measured: float | Sequence[float], unit: str = "", fmt: str = ".3g"
) -> bool:
    """Print `WHAT: predicted LOW-HIGH UNIT, measured M UNIT (...): VERDICT`; return whether it is within.

    Use `low=float("-inf")` for "at most HIGH" and `high=float("inf")` for "at least LOW"; any other span is
    printed whole, its lower end included. Per-round values as `measured` are
    judged by the 95 % interval of their median (`stats.verdict`): "within" only when the interval lies within
    the span, "missed" when it lies outside, else a tie on this machine; the line shows the interval. One value is
    a single run, judged by itself and labelled "(single run)". Explained in notebooks/00_setup.ipynb.
    """
    unit = f" {unit}" if unit and unit != "x" else unit  # 1.2x, but 12.5 GB/s
    if low == float("-inf"):
        span = f"<= {high:{fmt}}"
    elif high == float("inf"):
        span = f">= {low:{fmt}}"
    else:
        span = f"{low:{fmt}}{' to ' if low < 0 else '-'}{high:{fmt}}"  # -0.1 to 0.3, but 5-20
    rounds = _rounds(measured)
    if rounds is None:
        value, how = float(measured), "single run"  # type: ignore[arg-type]  # one number: _rounds said so
        word = stats.decide(value, value, low, high)
    else:
        v = stats.verdict(rounds, (low, high))
        value, word = v.median, v.word
        how = f"95 % interval {v.low:{fmt}} to {v.high:{fmt}}, {v.rounds} rounds"
        how = how if word != stats.TOO_FEW else f"{v.rounds} rounds: {stats.MIN_ROUNDS} or more bound an interval"
    word = "within" if word == "met" else word
    print(f"{what}: predicted {span}{unit}, measured {value:{fmt}}{unit} ({how}): {word}")
    return word == "within"


def _rounds(measured: Any) -> list[float] | None:
    """Return per-round values as a list, or None for one number (a float, a numpy or torch scalar)."""
    one = isinstance(measured, (int, float)) or getattr(measured, "ndim", None) == 0
    return None if one else [float(v) for v in measured]
