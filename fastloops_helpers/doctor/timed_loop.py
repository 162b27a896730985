"""The loop `diagnose` times: four clock reads a batch, epochs restarted as training does, the step replayed alone.

For a torch DataLoader the loop runs a copy rebuilt around the same dataset, sampler, collate function and knobs,
wrapped by `timeline.instrument`, so workers report when they fetched and collated each batch (the user's dataset
code is not touched). Explained in notebooks/15_is_my_loop_input_bound.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from ..measure import factors, median, now, processes, steps, sync, timeline
from ..tree import batch_len

MAIN = "main: loop"


class LoopError(RuntimeError):
    """The loader or the step raised while `diagnose` ran the loop; the message names the batch."""


@dataclass
class Run:
    """How `diagnose` runs the loop (its arguments, checked) and what the run recorded."""

    step: Callable[[Any], Any]
    total: int  # batches run: warm-up and measured
    warmup: int
    replay: int  # batches kept after warm-up and replayed through the step alone
    repeat: int = 1  # replay passes at least (median)
    copy: Callable[[Any], Any] | None = None
    device: Any = None
    rows: list[dict[str, float]] = field(default_factory=list)  # one per batch: wait, copy, step, end, samples
    cached: list[Any] = field(default_factory=list)
    tl: timeline.Timeline = field(default_factory=lambda: timeline.Timeline(origin=now()))
    pss_mb: dict[str, float] = field(default_factory=dict)
    replays: list[float] = field(default_factory=list)  # seconds of the replay passes, between live batches first
    pauses: list[int] = field(default_factory=list)  # the batches after which a pass ran
    cpu: processes.CpuReading = field(default_factory=processes.reading)  # the CPU times when the run started
    neighbours: processes.Neighbours | None = None  # what the others ran from then to the end of the replay

    def __post_init__(self) -> None:
        if self.total - self.warmup < 1 or self.warmup < 0 or self.replay < 1 or self.repeat < 1:
            raise ValueError(
                f"need batches >= 1, warmup >= 0, replay >= 1, repeat >= 1; got batches={self.total - self.warmup}, "
                f"warmup={self.warmup}, replay={self.replay}, repeat={self.repeat}"
            )


def run_loop(source: Iterable[Any], run: Run) -> Run:
    """Run `run.total` batches, epoch after epoch as training does (iter() again when the loader runs out)."""
    last = now()  # the end of the previous batch: an epoch's restart counts in its first batch's wait
    while len(run.rows) < run.total:
        before, start = len(run.rows), now()
        it = iter(source)
        run.tl.events.append(timeline.Event(MAIN, "start", -1, start, now()))
        try:
            last = _epoch(run, it, last)
        finally:
            if len(run.rows) >= run.total:
                run.pss_mb = processes.pss_mb()  # after the last batch, workers alive: what the running loop holds
            if it is not source:  # the caller's own iterator stays as it is; ours stops its workers or thread now
                steps.close(it)
        if it is source or len(run.rows) == before:
            break  # a one-shot iterator is spent, or an epoch gave no batch
    if len(run.rows) <= run.warmup:
        raise ValueError(
            f"the loader yielded {len(run.rows)} batches, not more than warmup={run.warmup}: "
            f"lower warmup or give it more data"
        )
    run.pss_mb = run.pss_mb or processes.pss_mb()
    return run


def _epoch(run: Run, it: Iterator[Any], begin: float) -> float:
    """Run batches from `it` until it ends or `run.total` are done; return the end time of the last one."""
    first = True
    while len(run.rows) < run.total:
        n, t0 = len(run.rows), now()
        try:
            item = next(it)  # the wait: the loader's time and nothing else
        except StopIteration:
            return begin
        except Exception as exc:
            raise LoopError(
                f"the loader raised {type(exc).__name__} on batch {n} (counting from 0 since diagnose "
                f"started): {exc}. Fix the loader, or pass warmup + batches <= {n} to diagnose the batches before it"
            ) from exc
        t1 = now()
        batch, t2, t3 = _copy_and_step(run, timeline.unwrap(item, n, run.tl), n, t1)
        _record(run, n, begin, (t0, t1, t2, t3), batch, first)
        if run.warmup <= n < run.warmup + run.replay:
            run.cached.append(batch)  # kept for the replay
        begin, first = _pause(run, n) or t3, False
    return begin


def _copy_and_step(run: Run, batch: Any, n: int, t1: float) -> tuple[Any, float, float]:
    """Copy batch `n` to the device (if `run.copy`), then step it; return it, and the clock after each."""
    t2 = t1
    if run.copy is not None:
        batch = run.copy(batch)
        sync(run.device)
        t2 = now()
    try:
        run.step(batch)
    except Exception as exc:
        raise LoopError(f"the step raised {type(exc).__name__} on batch {n}: {exc}") from exc
    sync(run.device)  # the step's CUDA work is finished before the clock is read
    return batch, t2, now()


def _pause(run: Run, n: int) -> float | None:
    """After every `replay` live batches (once the cache is full), replay the step alone once; return when done."""
    done = n + 1 - run.warmup - run.replay  # live batches since the cache filled
    if len(run.cached) < run.replay or done < 0 or done % run.replay or n + 1 >= run.total:
        return None
    run.replays.append(_replay_once(run))
    run.pauses.append(n)
    return now()  # the next batch's time starts after the pass: the pause is not the loop's


def replay(run: Run) -> float:
    """Return the median seconds of a pass of the step over the cached batches alone: the loop with loading free.

    The passes run between live batches count; passes are added until there are `run.repeat`.
    """
    while len(run.replays) < run.repeat:
        run.replays.append(_replay_once(run))
    return median(run.replays)


def _replay_once(run: Run) -> float:
    """Return the seconds of one pass of the step over the cached batches, CUDA synchronised."""
    sync(run.device)
    start = now()
    for b in run.cached:
        run.step(b)
    sync(run.device)
    return (now() - start) * _factors()["step"]  # the live steps' factor: the step alone and in the loop alike


def _record(run: Run, n: int, begin: float, stamps: tuple[float, float, float, float], batch: Any, first: bool) -> None:
    """Append batch `n`'s row (wait, copy, step, its whole time, samples) and its timeline events.

    The durations pass through the clock's scaling (`_factors`); `begin` and `end` stay clock readings.
    """
    t0, t1, t2, t3 = stamps
    run.tl.events += [timeline.Event(MAIN, "wait", n, t0, t1), timeline.Event(MAIN, "step", n, t2, t3)]
    if run.copy is not None:
        run.tl.events.append(timeline.Event(MAIN, "copy", n, t1, t2))
    wait_from = begin if first else t0  # an epoch's first wait runs from the last batch's end: iter() included
    f = _factors()
    wait, copy, step = (t1 - wait_from) * f["wait"], (t2 - t1) * f["copy"], (t3 - t2) * f["step"]
    run.rows.append(
        {
            "begin": begin,
            "end": t3,
            "wait": wait,
            "copy": copy,
            "step": step,
            "batch": wait_from - begin + wait + copy + step,  # end - begin, with the loop's own overhead unscaled
            "samples": batch_size(batch),
            "first": first,
        }
    )


def _factors() -> dict[str, float]:
    """Return the factors of the live wait, copy and step, timed together: all 1.0 unless a test harness scales
    durations (`measure.clock.set_scaling`).

    The replays take the step's factor, so the step's time in the loop over its time alone stays as measured; the
    wait and the copy get factors of their own, so the wait share and the headspace move as any ratio does.
    """
    return factors(("wait", "copy", "step"))


def batch_size(batch: Any) -> int:
    """Return the number of samples in `batch`: the leading size of its first tensor or array (else 1)."""
    return batch_len(batch) or 1


def stop_workers(source: Iterable[Any], loader: Iterable[Any]) -> None:
    """Shut down the persistent workers of the instrumented copy (the caller's own loader keeps its own)."""
    if source is loader:
        return
    it = getattr(source, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    source._iterator = None  # type: ignore[attr-defined]


def instrumented(loader: Iterable[Any]) -> DataLoader | None:
    """Return a DataLoader like `loader` whose dataset and collate record the timeline, or None if not possible."""
    if (
        not isinstance(loader, DataLoader)
        or loader.batch_sampler is None
        or isinstance(loader.dataset, IterableDataset)
    ):
        return None
    data, collate = timeline.instrument(loader.dataset, loader.collate_fn)
    kw: dict[str, Any] = dict(
        batch_sampler=loader.batch_sampler,
        num_workers=loader.num_workers,
        collate_fn=collate,
        pin_memory=loader.pin_memory,
        timeout=loader.timeout,
        generator=loader.generator,
        worker_init_fn=loader.worker_init_fn,
        persistent_workers=loader.persistent_workers,
        multiprocessing_context=loader.multiprocessing_context,
        pin_memory_device=loader.pin_memory_device,
    )
    if loader.num_workers > 0:
        kw["prefetch_factor"] = loader.prefetch_factor
    if hasattr(loader, "in_order"):
        kw["in_order"] = loader.in_order
    return DataLoader(data, **kw)
