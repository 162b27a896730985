"""One full-step comparison of several loaders, in which each loader waits for its batches as it would alone.

A loader with background workers (a DataLoader's processes, FFCV's thread) prepares batches while the training
step runs. Alone, in the middle of an epoch, it settles into a steady state: a worker slower than the step is
always busy and the loop waits `load - step` per batch; one faster than the step keeps its queue full and the
loop does not wait. Taking turns batch by batch between loaders breaks that: while the other loaders step, the
idle loader's workers fill their queue, so its next batch is ready at once and its wait reads near 0 however
slow it is (on an H200 a DataLoader needing 19.6 ms a batch read 0.24 ms beside a 9.9 ms step).

So every loader runs in blocks of consecutive steps, and a block starts from a fresh iterator and ends by
closing it: nothing is prepared for a loader while the others run (its workers are shut down), and nothing of
it runs beside their blocks. A fresh iterator holds no prepared batch, exactly as at the start of an epoch
alone; its first `settle` steps (worker start-up, the pipeline filling) are run but not timed. The blocks still
take turns, in a new order every round, so a slow spell of a shared machine hits every loader alike, and two
loaders are compared by the ratio of their per-round figures (`stats.ratios`, `stats.verdict`).

A DataLoader with N workers starts them together, so its batches come in bursts of N (one per worker) and its
wait repeats every N batches: the settle and timed steps are rounded up to whole multiples of N, so that the
timed steps average whole periods, as a long run alone does. Explained in notebooks/11_ffcv_cifar.ipynb.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .clock import now
from .display import progress

Step = Callable[..., Any]  # a training step: step(*batch)


@dataclass(frozen=True)
class Blocks:
    """How many steps each loader runs per turn: `settle` untimed, then `timed` (None: to the end of its epoch)."""

    settle: int = 1  # a fresh iterator's first batches pay start-up (processes, threads); 0 times it too
    timed: int | None = 1  # more steps per turn cost time; whole epochs (None) as seed 003 times them

    def __post_init__(self) -> None:
        if self.settle < 0 or (self.timed is not None and self.timed < 1):
            raise ValueError(f"need settle >= 0 and timed >= 1 (or None), got settle={self.settle}, timed={self.timed}")


@dataclass(frozen=True)
class StepTimes:
    """Per loader, per round: the seconds waited for each timed batch and the seconds of each timed step."""

    waits: dict[str, list[list[float]]]  # the wait is part of the step
    steps: dict[str, list[list[float]]]
    ahead: dict[str, list[float]]  # per block: how far the host was ahead of the marks when it queued the last

    def shares(self) -> dict[str, list[float]]:
        """Return {loader: the share of each round's timed steps spent waiting}: sum of waits over sum of steps."""
        return {name: [sum(w) / sum(s) for w, s in zip(self.waits[name], self.steps[name])] for name in self.waits}

    def flat(self, which: str = "steps") -> dict[str, list[float]]:
        """Return {loader: every timed step's (or wait's) seconds, round after round}, for `stats.summarize`."""
        return {name: [s for block in rounds for s in block] for name, rounds in self._of(which).items()}

    def per_round(
        self, which: str = "steps", stat: Callable[[list[float]], float] = statistics.fmean
    ) -> dict[str, list[float]]:
        """Return {loader: `stat` of each round's block} (default the mean), for `stats.ratios` and `stats.verdict`."""
        return {name: [float(stat(block)) for block in rounds] for name, rounds in self._of(which).items()}

    def _of(self, which: str) -> dict[str, list[list[float]]]:
        if which not in ("steps", "waits"):
            raise ValueError(f"which must be 'steps' or 'waits', got {which!r}")
        return self.steps if which == "steps" else self.waits


def producers(loader: Iterable[Any]) -> int:
    """Return how many batches `loader` prepares at once: a DataLoader's `num_workers`, else 1."""
    return max(1, loader.num_workers) if isinstance(loader, torch.utils.data.DataLoader) else 1


def compare_steps(
    loaders: Mapping[str, Iterable[Any]],
    factory: Callable[[], Step],
    rounds: int,
    blocks: Blocks = Blocks(),
    device: torch.device | str | None = None,
    desc: str | None = None,
) -> StepTimes:
    """Train `rounds` blocks of steps behind each loader, the blocks taking turns in a new order every round.

    Each loader gets its own fresh step from `factory()`. A block runs `blocks.settle` untimed steps on a fresh
    iterator, then `blocks.timed` timed ones (both rounded up to whole multiples of `producers(loader)`), then
    closes the iterator; a step's time includes the wait for its batch, also kept apart. `desc` shows a
    progress bar over the rounds. Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    for name, loader in loaders.items():
        if isinstance(loader, Iterator):
            raise ValueError(f"{name!r} is an iterator, not a loader: each block needs a fresh iterator from it")
    train = {name: factory() for name in loaders}
    times = StepTimes({name: [] for name in loaders}, {name: [] for name in loaders}, {name: [] for name in loaders})
    order = random.Random(0)
    for _ in progress(range(rounds), desc=desc) if desc else range(rounds):
        for name in order.sample(list(loaders), len(loaders)):
            waits, steps, ahead = block(name, loaders[name], train[name], blocks, device)
            times.waits[name].append(waits)
            times.steps[name].append(steps)
            times.ahead[name].append(ahead)
    return times


def block(
    name: str, loader: Iterable[Any], step: Step, blocks: Blocks, device: torch.device | str | None = None
) -> tuple[list[float], list[float], float]:
    """Run one block behind a fresh iterator of `loader`; return the timed (waits, steps) and the host's lead, in s.

    Marks go down before the iterator is made, when each batch is in hand and when its step is queued, with no
    synchronisation between: a wait runs from the previous step's end mark to this one's start, a step from the
    previous end to its own. On CUDA the marks are events on the stream, and a wait is the GPU's idle time; on the
    host's clock, the time in `next()`. The lead is how long before the last mark happened the host had queued it
    (0 on the host's clock). Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    per = producers(loader)
    settle = math.ceil(blocks.settle / per) * per
    timed = None if blocks.timed is None else math.ceil(blocks.timed / per) * per
    clock = marks(device)
    clock.sync()  # what another block queued is not this one's time
    batches: Iterator[Any] | None = None
    stamps, queued = [clock.mark()], [clock.now()]  # then a (start, end) pair per step; the host's start and end
    try:
        while timed is None or len(stamps) // 2 < settle + timed:
            batches = iter(loader) if batches is None else batches
            batch = next(batches, None)
            if batch is None:
                break
            stamps.append(clock.mark())  # the batch is in hand
            step(*batch)
            stamps.append(clock.mark())  # the step is queued (on the host: done)
        queued.append(clock.now())
    finally:
        if batches is not None:
            close(batches)
    clock.sync()  # the one synchronisation: every mark has happened
    t = [clock.seconds(stamps[0], mark) for mark in stamps]
    ends, starts, timed_steps = t[0::2], t[1::2], range(settle, len(t) // 2)  # ends[k]: step k's previous end
    waits, steps = [starts[k] - ends[k] for k in timed_steps], [ends[k + 1] - ends[k] for k in timed_steps]
    if not steps or (timed is not None and len(steps) < timed):
        need = f"a block needs {settle} to settle and {timed or 1} to time: use fewer steps per block or more data"
        raise ValueError(f"{name!r} ran out after {len(starts)} batches; {need}")
    return waits, steps, max(0.0, t[-1] - (queued[-1] - queued[0]))


class HostClock:
    """The host's clock as marks: `mark` reads it, `seconds` subtracts two readings, `sync` has nothing to wait for."""

    def mark(self) -> float:
        """Return the host's time now."""
        return now()

    def now(self) -> float:
        """Return the host's time now (a mark of this clock is one)."""
        return now()

    def seconds(self, first: float, second: float) -> float:
        """Return the seconds from mark `first` to mark `second`."""
        return second - first

    def sync(self) -> None:
        """Wait for nothing: a host mark has happened when it returns."""


@dataclass(frozen=True)
class StreamClock(HostClock):
    """CUDA events on the device's current stream as marks: each completes when the work queued before it has run."""

    device: torch.device

    def mark(self) -> Any:  # an event, not a float
        """Record and return an event on the device's current stream (the host does not wait)."""
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def seconds(self, first: Any, second: Any) -> float:
        """Return the GPU's seconds from event `first` to event `second` (both must have completed)."""
        return float(first.elapsed_time(second)) / 1e3

    def sync(self) -> None:
        """Wait until the device has run everything queued."""
        torch.cuda.synchronize(self.device)


def marks(device: torch.device | str | None) -> HostClock:
    """Return the clock a block's marks use on `device`: CUDA events on a CUDA device, else the host's clock."""
    return StreamClock(torch.device(device or "cpu")) if torch.device(device or "cpu").type == "cuda" else HostClock()


def close(batches: Iterator[Any]) -> None:
    """Stop an iterator's background work now: a generator's or FFCV's `close`, a DataLoader's worker processes.

    A DataLoader with `persistent_workers=True` keeps its workers: its next epoch reuses this iterator.
    """
    if getattr(batches, "_persistent_workers", False):
        return
    stop = getattr(batches, "close", None) or getattr(batches, "_shutdown_workers", None)
    if stop is not None:
        stop()
