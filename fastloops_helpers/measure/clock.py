"""The one clock: CUDA-synchronised timers, warm-up then repeats, and interleaved comparisons.

Every figure in the project is timed here (the timeline recorder only stamps events). Explained in
notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from .. import config
from .display import progress

now = time.perf_counter  # the one clock every measurement reads (the timeline stamps events with it too)


def sync(device: torch.device | str | None = None) -> None:
    """Wait for queued CUDA work so that a clock read after it is honest."""
    dev = torch.device(device) if device is not None else None
    if (dev is None or dev.type == "cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize(dev if dev is not None and dev.type == "cuda" else None)


class Timer:
    """Time a block, synchronising CUDA before both clock reads.

    >>> with Timer() as t:
    ...     _ = sum(range(1000))
    >>> t.seconds > 0
    True
    """

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = device
        self.seconds = float("nan")

    def __enter__(self) -> Timer:
        sync(self.device)
        self._start = now()
        return self

    def __exit__(self, *exc: object) -> None:
        sync(self.device)
        self.seconds = now() - self._start


def _counts(repeat: int | None, warmup: int | None) -> tuple[int, int]:
    repeat = config.size("repeat") if repeat is None else repeat
    warmup = config.size("warmup") if warmup is None else warmup
    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    return repeat, warmup


def measure(fn: Callable[[], Any], repeat: int | None = None, warmup: int | None = None,
            device: torch.device | str | None = None) -> list[float]:
    """Call `fn` `warmup` times untimed, then `repeat` times timed; return the seconds of each call."""
    return interleaved({"fn": fn}, repeat, warmup, device)["fn"]


def interleaved(fns: Mapping[str, Callable[[], Any]], repeat: int | None = None, warmup: int | None = None,
                device: torch.device | str | None = None, desc: str | None = None) -> dict[str, list[float]]:
    """Warm each function up, then time them in turn (A B C, A B C, ...); return {name: seconds per call}.

    Interleaving makes a slow spell of the machine hit every contender alike, so ratios taken per round
    (`stats.ratio`) stay honest on a busy machine. `desc` shows a progress bar over the rounds.
    """
    repeat, warmup = _counts(repeat, warmup)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    rounds = progress(range(repeat), desc=desc) if desc else range(repeat)
    for _ in rounds:
        for name, fn in fns.items():
            with Timer(device) as t:
                fn()
            seconds[name].append(t.seconds)
    return seconds
