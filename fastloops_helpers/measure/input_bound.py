"""Is my loop input-bound? Run it, time every wait and step, replay the step on cached batches, name the knob.

`diagnose(loader, step)` runs `warmup + batches` iterations of the loop as training would (epochs restart when
the loader runs out), stamping with `measure.now` and synchronising CUDA before each stamp. For a torch
DataLoader it runs a copy rebuilt around the same dataset, sampler, collate function and knobs, wrapped by
`timeline.instrument`, so workers report when they fetched and collated each batch (the user's dataset code is
not touched). The step alone is replayed over the first cached batches, the throughput the loop would have if
loading were free, in passes interleaved with the live batches, so that a busy spell of the machine hits both.
The step may still run slower in the loop than alone for a reason of the loop's own (loading in the same thread
takes its caches), so the verdict is "inconclusive: the machine was busy" only when other processes took CPU time
during the live and replay passes (`processes.neighbours`) and either made the two disagree or left the loop no
spare core; it names the busiest of them.
Explained in notebooks/15_is_my_loop_input_bound.ipynb.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch.utils.data import DataLoader, IterableDataset

from ..tree import batch_len, tensors
from . import advice, processes, timeline, warp
from .clock import Timer, measure, now, sync
from .processes import pss_mb
from .stats import median, p95

MAIN = "main: loop"
BUSY = "inconclusive: the machine was busy"
NEIGHBOUR_CORES = 0.5  # the other processes took at least half a core during the loop: a neighbour, busy ...
BUSY_RATIO = 1.5  # ... if the step's time per batch in the loop and alone are further apart than this ...
SPARE_CORES = 0.5  # ... or the neighbour left the loop less than half a core spare


class LoopError(RuntimeError):
    """The loader or the step raised while `diagnose` ran the loop; the message names the batch."""


@dataclass
class Diagnosis:
    """What `diagnose` measured on one loop, its verdict, and the knobs to turn, ranked.

    Explained in notebooks/15_is_my_loop_input_bound.ipynb.
    """

    samples_per_s: float  # live loop, over the measured batches (after warm-up)
    wait_share: float  # share of wall time spent in next(loader) (and iter(loader) at epoch starts)
    step_share: float  # share of wall time in the step
    copy_share: float  # share of wall time in `copy` (the host-to-device transfer, if given)
    first_batch_s: float  # from iter(loader) to the first batch in hand (worker start-up included)
    epoch_start_s: float  # median over epochs of the first batch's wait (the end of the last epoch included)
    batch_p50_s: float  # per-batch time (end of one step to the end of the next), median ...
    batch_p95_s: float  # ... and 95th percentile
    replay_samples_per_s: float  # the step alone over cached batches: loading free
    headspace: float  # replay_samples_per_s / samples_per_s
    live_over_replay_step: float  # the step's median time per batch in the loop over its time alone (~1: quiet)
    others_cores: float  # CPU the other processes took during the live and replay passes, in cores (0: quiet)
    pss_mb: dict[str, float]  # proportional set size of the main process and of its children (workers)
    stages_ms: dict[str, float]  # median milliseconds per batch of each timeline stage
    batches: int  # measured batches (after warm-up)
    samples: int  # measured samples (the shares leave out the batches a loader had ready after
    # each replay pass: they came without a wait)
    verdict: str
    recommendations: list[advice.Recommendation]
    figures: advice.Figures
    timeline: timeline.Timeline = field(repr=False)
    window_start: float = 0.0  # timeline time at which the measured batches start
    neighbours: str = ""  # the busiest other processes, by name, pid and share of a core

    def __repr__(self) -> str:
        top = (
            f"; try {self.recommendations[0].knob} (~{self.recommendations[0].gain:.2g}x)"
            if self.recommendations
            else ""
        )
        return (
            f"Diagnosis({self.verdict}: waits {self.wait_share:.0%}, headspace {self.headspace:.2f}x, "
            f"{self.samples_per_s:.4g} samples/s{top})"
        )

    def table(self) -> pd.DataFrame:
        """Return the measured figures as a two-column table (figure, value)."""
        rows = {
            "samples/s": self.samples_per_s,
            "wait share": self.wait_share,
            "step share": self.step_share,
            "copy share": self.copy_share,
            "first batch (s)": self.first_batch_s,
            "epoch start (s)": self.epoch_start_s,
            "batch p50 (ms)": self.batch_p50_s * 1e3,
            "batch p95 (ms)": self.batch_p95_s * 1e3,
            "step alone, samples/s": self.replay_samples_per_s,
            "headspace (x)": self.headspace,
            "step in loop / alone (x)": self.live_over_replay_step,
            "other processes (cores)": self.others_cores,
            **{f"PSS {k} (MB)": v for k, v in self.pss_mb.items()},
            **{f"{k} per batch (ms)": v for k, v in self.stages_ms.items()},
        }
        return pd.DataFrame({"figure": list(rows), "value": list(rows.values())}).set_index("figure")

    def advice(self) -> pd.DataFrame:
        """Return the recommendations, ranked, as a table (knob, expected gain, because, notebook)."""
        return pd.DataFrame(
            [
                {"knob": r.knob, "expected gain (x)": r.gain, "because": r.because, "notebook": r.notebook}
                for r in self.recommendations
            ],
            columns=["knob", "expected gain (x)", "because", "notebook"],
        )

    def plot(self, title: str = "", until: float | None = None) -> Figure:
        """Draw the recorded timeline (one lane per worker and stage) above the per-batch time bars."""
        from .input_bound_plot import draw  # matplotlib layout kept apart from the measurement

        return draw(self, title, until)


def diagnose(
    loader: Iterable[Any],
    step: Callable[[Any], Any],
    *,
    batches: int = 50,
    warmup: int = 3,
    replay: int = 16,
    repeat: int = 3,
    copy: Callable[[Any], Any] | None = None,
    device: torch.device | str | None = None,
    instrument: bool = True,
) -> Diagnosis:
    """Run `loader` -> (`copy`) -> `step` for `warmup + batches` batches; return the Diagnosis.

    Parameters
    ----------
    loader : any iterable of batches (a DataLoader gets a per-stage timeline of its workers).
    step : called on each batch (after `copy`); its CUDA work is synchronised before each clock read.
    batches : measured batches after `warmup`; more gives steadier shares, costs time.
    warmup : batches run but left out of the shares and throughput (the first batch latency is kept apart).
    replay : batches kept (after warm-up) and replayed through `step` alone for the headspace; costs their memory.
    repeat : timed replays of those batches (median).
    copy : moves a batch to the device (e.g. `partial(move_to, device=device, non_blocking=True)`), timed apart.
    device : the device to synchronise (default: every CUDA device in use).
    instrument : False runs a DataLoader as it is, without the worker timeline.

    Explained in notebooks/15_is_my_loop_input_bound.ipynb.
    """
    if batches < 1 or warmup < 0 or replay < 1 or repeat < 1:
        raise ValueError(
            f"need batches >= 1, warmup >= 0, replay >= 1, repeat >= 1; got batches={batches}, "
            f"warmup={warmup}, replay={replay}, repeat={repeat}"
        )
    source = (_instrumented(loader) if instrument else None) or loader
    try:
        run = _run(source, step, warmup + batches, warmup, replay, copy, device)
    finally:
        _stop_workers(source, loader)
    if len(run.rows) <= warmup:
        raise ValueError(
            f"the loader yielded {len(run.rows)} batches, not more than warmup={warmup}: "
            f"lower warmup or give it more data"
        )
    replay_s = _replay(step, run.cached, repeat, device, run.replays)
    return _diagnosis(run, loader, replay_s, warmup, device)


def _replay(step: Callable[[Any], Any], cached: list[Any], repeat: int, device: Any, done: list[float]) -> float:
    """Return the median seconds of a pass of `step` over the cached batches alone: the loop with loading free.

    `done` holds the passes already run between live batches; passes are added until there are `repeat`.
    """
    passes = list(done)
    while len(passes) < repeat:
        passes.append(_replay_once(step, cached, device))
    return median(passes)


def _replay_once(step: Callable[[Any], Any], cached: list[Any], device: Any) -> float:
    """Return the seconds of one pass of `step` over `cached`, CUDA synchronised."""
    with Timer(device, contender="step") as t:  # for the warp: the live steps are the same contender
        for b in cached:
            step(b)
    return t.seconds


# ---------------------------------------------------------------------------------------------- the loop
@dataclass
class _Run:
    rows: list[dict[str, float]] = field(default_factory=list)  # one per batch: wait, copy, step, end, samples
    cached: list[Any] = field(default_factory=list)
    tl: timeline.Timeline = field(default_factory=lambda: timeline.Timeline(origin=now()))
    pss_mb: dict[str, float] = field(default_factory=dict)
    replays: list[float] = field(default_factory=list)  # seconds of the replay passes run between live batches
    pauses: list[int] = field(default_factory=list)  # the batches after which one ran
    cpu: processes.CpuReading = field(default_factory=processes.reading)  # the CPU times when the run started
    neighbours: processes.Neighbours | None = None  # what the others ran from then to the end of the replay


def _run(
    source: Iterable[Any],
    step: Callable[[Any], Any],
    total: int,
    warmup: int,
    replay: int,
    copy: Callable[[Any], Any] | None,
    device: Any,
) -> _Run:
    """Run `total` batches, epoch after epoch as training does (iter() again when the loader runs out)."""
    run = _Run()
    last = now()  # the end of the previous batch: an epoch's restart counts in its first batch's wait
    while len(run.rows) < total:
        before = len(run.rows)
        start = now()
        it = iter(source)
        run.tl.events.append(timeline.Event(MAIN, "start", -1, start, now()))
        try:
            last = _epoch(run, it, step, total, warmup, replay, copy, device, last)
        finally:
            if len(run.rows) >= total:
                run.pss_mb = pss_mb()  # after the last batch, workers still alive: what the running loop holds
            _close(it, source)
        if it is source or len(run.rows) == before:
            break  # a one-shot iterator is spent, or an epoch gave no batch
    if not run.pss_mb:
        run.pss_mb = pss_mb()
    return run


def _epoch(
    run: _Run,
    it: Iterator[Any],
    step: Callable[[Any], Any],
    total: int,
    warmup: int,
    replay: int,
    copy: Callable[[Any], Any] | None,
    device: Any,
    begin: float,
) -> float:
    """Run batches from `it` until it ends or `total` are done; return the end time of the last one."""
    first = True
    while len(run.rows) < total:
        n = len(run.rows)
        t0 = now()
        try:
            item = next(it)  # the wait: the loader's time and nothing else
        except StopIteration:
            return begin
        except Exception as exc:
            raise LoopError(
                f"the loader raised {type(exc).__name__} on batch {n} (counting from 0 since diagnose "
                f"started): {exc}. Fix the loader, or pass warmup + batches <= {n} "
                f"to diagnose the batches before it"
            ) from exc
        t1 = now()
        batch = _unwrap(item, n, run.tl)
        t2 = t1
        if copy is not None:
            batch = copy(batch)
            sync(device)
            t2 = now()
        try:
            step(batch)
        except Exception as exc:
            raise LoopError(f"the step raised {type(exc).__name__} on batch {n}: {exc}") from exc
        sync(device)  # the step's CUDA work is finished before the clock is read
        t3 = now()
        _record(run, n, begin, (t0, t1, t2, t3), batch, first, copy is not None)
        if warmup <= n < warmup + replay:
            run.cached.append(batch)  # kept for the replay
        begin, first = _pause(run, n, step, total, warmup, replay, device) or t3, False
    return begin


def _pause(
    run: _Run, n: int, step: Callable[[Any], Any], total: int, warmup: int, replay: int, device: Any
) -> float | None:
    """After every `replay` live batches (once the cache is full), replay the step alone once; return when done."""
    done = n + 1 - warmup - replay  # live batches since the cache filled
    if len(run.cached) < replay or done < 0 or done % replay or n + 1 >= total:
        return None
    run.replays.append(_replay_once(step, run.cached, device))
    run.pauses.append(n)
    return now()  # the next batch's time starts after the pass: the pause is not the loop's


def _record(
    run: _Run, n: int, begin: float, stamps: tuple[float, float, float, float], batch: Any, first: bool, copied: bool
) -> None:
    """Append batch `n`'s row (wait, copy, step, its whole time, samples) and its timeline events.

    The durations pass through the warp (`_warp_factors`); `begin` and `end` stay clock readings.
    """
    t0, t1, t2, t3 = stamps
    run.tl.events += [timeline.Event(MAIN, "wait", n, t0, t1), timeline.Event(MAIN, "step", n, t2, t3)]
    if copied:
        run.tl.events.append(timeline.Event(MAIN, "copy", n, t1, t2))
    wait_from = begin if first else t0  # an epoch's first wait runs from the last batch's end: iter() included
    f = _warp_factors()
    wait, copy, step = (t1 - wait_from) * f["wait"], (t2 - t1) * f["copy"], (t3 - t2) * f["step"]
    run.rows.append(
        {
            "begin": begin,
            "end": t3,
            "wait": wait,
            "copy": copy,
            "step": step,
            "batch": wait_from - begin + wait + copy + step,  # end - begin, with the loop's own overhead unwarped
            "samples": batch_size(batch),
            "first": first,
        }
    )


def _warp_factors() -> dict[str, float]:
    """Return the warp's factors (measure/warp.py) for the live wait, copy and step: all 1.0 unless warped.

    The live step gets the factor of its replay (`_replay_once` times the contender "step"), so the step's time
    in the loop over its time alone stays as measured; the wait and the copy get factors of their own, STEP
    apart at least, so the wait share and the headspace move as any ratio of two contenders does.
    """
    ranked = warp.factors(("wait", "copy", "step"))
    scale = warp.factor("step") / ranked["step"]
    return {k: v * scale for k, v in ranked.items()}


def _unwrap(item: Any, index: int, tl: timeline.Timeline) -> Any:
    if not isinstance(item, timeline.TimedBatch):
        return item
    tl.events.extend(timeline.Event(lane, stage, index, t0, t1) for lane, stage, t0, t1 in item.events)
    return item.data


def batch_size(batch: Any) -> int:
    """Return the number of samples in `batch`: the leading size of its first tensor or array (else 1)."""
    return batch_len(batch) or 1


def _close(it: Iterator[Any], source: Iterable[Any]) -> None:
    if it is source:
        return  # the caller's own iterator: leave it as it is
    shutdown = getattr(it, "_shutdown_workers", None)  # DataLoader's: stop non-persistent workers now
    if shutdown is not None and not getattr(it, "_persistent_workers", False):
        shutdown()
    close = getattr(it, "close", None)  # a generator (ThreadPrefetcher's stops its thread in `finally`)
    if close is not None:
        close()


def _stop_workers(source: Iterable[Any], loader: Iterable[Any]) -> None:
    """Shut down the persistent workers of the instrumented copy (the caller's own loader keeps its own)."""
    if source is loader:
        return
    it = getattr(source, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    source._iterator = None  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------------- the DataLoader copy
def _instrumented(loader: Iterable[Any]) -> DataLoader | None:
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


# ------------------------------------------------------------------------------------------ the figures
def _head_start(loader: Iterable[Any]) -> int:
    """Return how many batches a loader can have ready after a pause (they come without a wait)."""
    if isinstance(loader, DataLoader) and loader.num_workers > 0:
        return loader.num_workers * (loader.prefetch_factor or 2)
    return 1


def _measured(rows: pd.DataFrame, run: _Run, loader: Iterable[Any], warmup: int) -> pd.DataFrame:
    """Return the rows after warm-up, less the batches a loader had ready after each replay pass."""
    window = rows.iloc[warmup:]
    after = {p + k for p in run.pauses for k in range(1, _head_start(loader) + 1)}
    kept = window[~window.index.isin(after)]
    return kept if len(kept) else window


def _diagnosis(run: _Run, loader: Iterable[Any], replay_s: float, warmup: int, device: Any) -> Diagnosis:
    rows = pd.DataFrame(run.rows)
    window = _measured(rows, run, loader, warmup)
    per_batch = window["batch"]
    wall = float(per_batch.sum())
    samples = int(window["samples"].sum())
    rate = samples / wall
    replay_rate = sum(batch_size(b) for b in run.cached) / replay_s
    stages = _stages(run.tl, warmup)
    step_ratio = float(window["step"].median()) / (replay_s / len(run.cached))
    others = _neighbours(run)
    busy = _busy(step_ratio, others)
    figures = _figures(
        run,
        loader,
        stages,
        wall / len(window),
        replay_s / len(run.cached),
        float(window["wait"].sum()) / wall,
        replay_rate / rate,
        float(per_batch.median()),
        device,
    )
    return Diagnosis(
        samples_per_s=rate,
        wait_share=float(window["wait"].sum()) / wall,
        step_share=float(window["step"].sum()) / wall,
        copy_share=float(window["copy"].sum()) / wall,
        first_batch_s=float(rows["wait"].iloc[0]),
        epoch_start_s=figures.epoch_start_s,
        batch_p50_s=float(per_batch.median()),
        batch_p95_s=p95(per_batch.tolist()),
        replay_samples_per_s=replay_rate,
        headspace=replay_rate / rate,
        live_over_replay_step=step_ratio,
        others_cores=others.cores,
        pss_mb=run.pss_mb,
        stages_ms={k: v * 1e3 for k, v in stages.items()},
        batches=len(rows) - warmup,
        samples=int(rows["samples"].iloc[warmup:].sum()),
        verdict=f"{BUSY}: {others}" if busy else advice.verdict(figures.wait_share, figures.headspace),
        recommendations=[] if busy else advice.recommend(figures),
        figures=figures,
        timeline=run.tl,
        window_start=float(window["begin"].iloc[0] - run.tl.origin),
        neighbours=str(others),
    )


def _neighbours(run: _Run) -> processes.Neighbours:
    """Return what the other processes ran from the run's start until now (after the replay), read once."""
    if run.neighbours is None:
        run.neighbours = processes.neighbours(run.cpu, processes.reading(since=run.cpu))
    return run.neighbours


def _busy(step_ratio: float, neighbours: processes.Neighbours) -> bool:
    """Return whether another program ran enough to make the figures the machine's, not the loop's.

    A step slower in the loop than alone on a quiet machine is the loop's own doing (loading in the same thread
    takes the step's caches): the verdict stands. Beside a neighbour, the same disagreement, or a machine left
    without a spare core, says nothing certain about the loop.
    """
    if neighbours.cores < NEIGHBOUR_CORES:
        return False
    return neighbours.spare_cores < SPARE_CORES or not 1 / BUSY_RATIO <= step_ratio <= BUSY_RATIO


def _stages(tl: timeline.Timeline, warmup: int) -> dict[str, float]:
    """Return the median seconds per batch of each stage, over the measured batches."""
    df = tl.frame()
    df = df[df.batch >= warmup]
    per = df.groupby(["stage", "batch"])["seconds"].sum().groupby("stage").median()
    order = [s for s in timeline.STAGE_COLORS if s in per.index and s != "start"]
    return {s: float(per[s]) for s in order}


def _figures(
    run: _Run,
    loader: Iterable[Any],
    stages: dict[str, float],
    batch_s: float,
    step_s: float,
    wait_share: float,
    headspace: float,
    p50: float,
    device: Any,
) -> advice.Figures:
    mean_size = float(np.mean([r["samples"] for r in run.rows]))
    load = stages.get("fetch", 0.0) + stages.get("collate", 0.0) if "fetch" in stages else None
    f = advice.Figures(
        batch_s=batch_s,
        step_s=step_s,
        wait_share=wait_share,
        headspace=headspace,
        batch_size=mean_size,
        first_batch_s=run.rows[0]["wait"],
        p50_s=p50,
        epoch_start_s=median([r["wait"] for r in run.rows if r["first"]]),
        load_s=load,
        fetch_per_sample_s=stages["fetch"] / mean_size if "fetch" in stages else None,
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
    )
    if isinstance(loader, DataLoader):
        f.is_dataloader, f.num_workers, f.persistent_workers = True, loader.num_workers, loader.persistent_workers
        f.has_getitems = callable(getattr(loader.dataset, "__getitems__", None))
        f.epoch_batches = _len(loader)
    _cuda_figures(f, run.cached, device)
    return f


def _len(loader: Iterable[Any]) -> int | None:
    try:
        return len(loader)  # type: ignore[arg-type]
    except TypeError:
        return None


def _cuda_figures(f: advice.Figures, cached: list[Any], device: Any) -> None:
    """Fill in whether the step used CUDA on pageable batches, and the measured time to copy one batch."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()) or not cached:
        return
    host = [t for t in tensors(cached[0]) if isinstance(t, torch.Tensor) and t.device.type == "cpu"]
    f.cuda_step = True
    f.pageable = bool(host) and not any(t.is_pinned() for t in host)
    if f.pageable:
        target = device if device is not None and torch.device(device).type == "cuda" else "cuda"
        f.transfer_s = median(measure(lambda: [t.to(target) for t in host], repeat=3, warmup=1, device=target))
