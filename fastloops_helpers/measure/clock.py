"""The one clock: CUDA-synchronised timers, warm-up then repeats, and interleaved comparisons.

Every figure in the project is timed here (the timeline recorder only stamps events). Every duration returned
here passes through one hook, `set_scaling`, which only a test harness sets (the book's warp, in `make test`):
unset, durations are as measured. `now()` stays real. Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import FrameType
from typing import Any, TypeVar

import torch

from .. import config
from .display import progress

K = TypeVar("K", bound=Hashable)  # a contender's name: usually a str, any hashable works
Scaling = Callable[[Sequence[Any], FrameType], Sequence[float]]
_scaling: Scaling | None = None  # a test harness's hook; None in a reader's process: durations as measured
_running: list[float] = []  # the factors of the contenders being timed now: a timing inside one takes its factor

now = time.perf_counter  # the one clock every measurement reads (the timeline stamps events with it too); never scaled


def sync(device: torch.device | str | None = None) -> None:
    """Wait for queued CUDA work so that a clock read after it is honest."""
    dev = torch.device(device) if device is not None else None
    if (dev is None or dev.type == "cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize(dev if dev is not None and dev.type == "cuda" else None)


def set_scaling(hook: Scaling | None) -> None:
    """Let a test harness scale every duration returned here; None turns it off.

    `hook(contenders, frame)` returns a factor per contender for the names of one interleaved call, and one
    factor for a timing alone (`[]`, or `[fn]` for `measure(fn)`) made at `frame`. A timing inside a contender
    being timed takes that contender's factor.
    """
    global _scaling
    _scaling = hook


def factors(contenders: Iterable[K]) -> dict[K, float]:
    """Return the factor of each of `contenders` timed together: all 1.0 unless a harness scales durations."""
    keys = list(contenders)
    return dict.fromkeys(keys, 1.0) if _scaling is None else dict(zip(keys, _scaling(keys, sys._getframe(1))))


def _alone(fn: Callable[[], Any] | None = None) -> float:
    """Return the factor of a timing alone, made by the caller of this function's caller (of `fn`, if given)."""
    if _scaling is None:
        return 1.0
    if _running:
        return _running[-1]
    return _scaling([fn] if fn is not None else [], sys._getframe(2))[0]


def elapsed(start: float) -> float:
    """Return the seconds since `start`, a `now()` reading: for a span that a `with Timer()` cannot wrap."""
    return (now() - start) * _alone()


def _time(fn: Callable[[], Any], device: torch.device | str | None) -> float:
    """Return the real seconds of one call of `fn`, CUDA synchronised before both clock reads."""
    sync(device)
    start = now()
    fn()
    sync(device)
    return now() - start


class Timer:
    """Time a block, synchronising CUDA before both clock reads.

    >>> with Timer() as t:
    ...     _ = sum(range(1000))
    >>> t.seconds > 0
    True
    """

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device, self.seconds = device, float("nan")
        self._factor = _alone()

    def __enter__(self) -> Timer:
        sync(self.device)
        self._start = now()
        return self

    def __exit__(self, *exc: object) -> None:
        sync(self.device)
        self.seconds = (now() - self._start) * self._factor


def _counts(repeat: int | None, warmup: int | None) -> tuple[int, int]:
    repeat = config.size("repeat") if repeat is None else repeat
    warmup = config.size("warmup") if warmup is None else warmup
    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    return repeat, warmup


def measure(
    fn: Callable[[], Any],
    repeat: int | None = None,
    warmup: int | None = None,
    device: torch.device | str | None = None,
) -> list[float]:
    """Call `fn` `warmup` times untimed, then `repeat` times timed; return the seconds of each call."""
    return _rounds({"fn": fn}, {"fn": _alone(fn)}, _counts(repeat, warmup), device)["fn"]


def interleaved(
    fns: Mapping[K, Callable[[], Any]],
    repeat: int | None = None,
    warmup: int | None = None,
    device: torch.device | str | None = None,
    desc: str | None = None,
    shuffle: bool = False,
) -> dict[K, list[float]]:
    """Warm each function up, then time them in turn (A B C, A B C, ...); return {name: seconds per call}.

    Interleaving makes a slow spell of the machine hit every contender alike, so ratios taken per round
    (`stats.ratio`) stay honest on a busy machine. `shuffle` runs each round in a new (seeded) random order, so
    that no contender always runs right after the same neighbour, whose spinning threads or evicted caches it
    would inherit. `desc` shows a progress bar over the rounds.
    """
    return _rounds(fns, factors(fns), _counts(repeat, warmup), device, desc, shuffle)


def _rounds(
    fns: Mapping[K, Callable[[], Any]], factors: Mapping[K, float], counts: tuple[int, int], *how: Any
) -> dict[K, list[float]]:
    """`interleaved` with `counts` = (repeat, warmup) checked, each contender's seconds times its factor.

    `how`: device, then optionally desc and shuffle, as in `interleaved`.
    """
    (repeat, warmup), (device, desc, shuffle) = counts, (*how, None, False)[:3]
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    seconds: dict[K, list[float]] = {name: [] for name in fns}
    rounds = progress(range(repeat), desc=desc) if desc else range(repeat)
    order = random.Random(0)
    for _ in rounds:
        names = order.sample(list(fns), len(fns)) if shuffle else list(fns)
        for name in names:
            seconds[name].append(_timed(fns[name], device, factors[name]))
    return seconds


def _timed(fn: Callable[[], Any], device: torch.device | str | None, factor: float) -> float:
    """Return one call of `fn`'s seconds times `factor`, the factor of any timing inside it too."""
    _running.append(factor)
    try:
        return _time(fn, device) * factor
    finally:
        _running.pop()


def interleaved_until_steady(
    fns: Mapping[K, Callable[[], Any]],
    numerator: K,
    denominator: K,
    rounds: int = 6,
    halfwidth: float = 0.05,
    budget: float = 2.0,
    warmup: int = 1,
    device: torch.device | str | None = None,
) -> dict[K, list[float]]:
    """Time `fns` interleaved for `rounds`, then add rounds while the ratio's 95 % interval is wider than
    +-`halfwidth` of its median and the time spent is under `budget` x that of the first rounds.

    It stops on the interval's width, never on where the interval lies against a threshold: stopping when a
    verdict turns favourable would bias the verdict. Explained in notebooks/00_setup.ipynb.
    """
    from .stats import median, median_interval

    start = now()
    scaled = factors(fns)
    seconds = _rounds(fns, scaled, _counts(rounds, warmup), device, None, True)
    deadline = now() + (budget - 1) * (now() - start)
    order = random.Random(1)
    while now() < deadline:
        ratios = [a / b for a, b in zip(seconds[numerator], seconds[denominator])]
        low, high = median_interval(ratios)
        if (high - low) / 2 <= halfwidth * median(ratios):
            break
        for name in order.sample(list(fns), len(fns)):
            seconds[name].append(_timed(fns[name], device, scaled[name]))
    return seconds


def drain(iterable: Any) -> Callable[[], int]:
    """Return a function that runs one pass over `iterable` (one epoch of a loader) and returns the item count.

    The items are dropped as they come, so only the loop is timed. Explained in notebooks/01_the_question.ipynb.
    """

    def epoch() -> int:
        count = 0
        for _ in iterable:
            count += 1
        return count

    return epoch


def per_call(
    fns: Mapping[str, Callable[[], Any]],
    number: int | Mapping[str, int] | None = None,
    repeat: int | None = None,
    warmup: int | None = None,
    device: torch.device | str | None = None,
    desc: str | None = None,
    block_s: float = 0.005,
    shuffle: bool = True,
) -> dict[str, list[float]]:
    """Time `number` calls of each function per round, interleaved; return {name: seconds per call, per round}.

    For calls too short for one clock read. `number` is one count for all, a count per name, or None: then
    each function's count is chosen from one timed call so that a round lasts about `block_s` seconds.
    Each round runs in a new random order by default (see `interleaved`).
    Explained in notebooks/02_getitem_cost.ipynb.
    """
    counts = {name: _count(fn, number, name, block_s, device) for name, fn in fns.items()}
    blocks = {name: _repeated(fn, counts[name]) for name, fn in fns.items()}
    seconds = interleaved(blocks, repeat, warmup, device, desc, shuffle)
    return {name: [s / counts[name] for s in values] for name, values in seconds.items()}


def _count(
    fn: Callable[[], Any],
    number: int | Mapping[str, int] | None,
    name: str,
    block_s: float,
    device: torch.device | str | None,
) -> int:
    if isinstance(number, Mapping):
        number = number[name]
    if number is not None:
        if number < 1:
            raise ValueError(f"number must be >= 1 calls per round, got {number!r} for {name!r}")
        return int(number)
    seconds = _time(fn, device)  # one call to size the block (real time: not a figure); also a first warm-up
    return max(1, int(block_s / max(seconds, 1e-7)))


def _repeated(fn: Callable[[], Any], number: int) -> Callable[[], None]:
    def block() -> None:
        for _ in range(number):
            fn()

    return block
