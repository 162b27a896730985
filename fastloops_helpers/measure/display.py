"""How measurements are shown: `[timing]` lines that nbval masks, and progress bars stable in stored notebooks.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sized
from typing import Any, TypeVar

from tqdm import tqdm

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


def predicted(what: str, low: float, high: float, measured: float, unit: str = "", fmt: str = ".3g") -> bool:
    """Print `predicted LOW-HIGH UNIT, measured M UNIT: within|missed` for `what`; return whether it is within.

    Use `low=0` for "at most HIGH" and `high=float("inf")` for "at least LOW". Explained in notebooks/00_setup.ipynb.
    """
    unit = f" {unit}" if unit and unit != "x" else unit  # 1.2x, but 12.5 GB/s
    if low <= 0:
        span = f"<= {high:{fmt}}"
    elif high == float("inf"):
        span = f">= {low:{fmt}}"
    else:
        span = f"{low:{fmt}}-{high:{fmt}}"
    within = low <= measured <= high
    print(f"{what}: predicted {span}{unit}, measured {measured:{fmt}}{unit}: {'within' if within else 'missed'}")
    return within
