"""Is my loop input-bound? Run it, time every wait and step, replay the step on cached batches, name the knob.

`diagnose(loader, step)` runs `warmup + batches` iterations of the loop as training would (`timed_loop`: epochs
restart when the loader runs out, a DataLoader's workers report their stages), stamping with `measure.now` and
synchronising CUDA before each stamp. The step alone is replayed over the first cached batches, the throughput
the loop would have if loading were free, in passes interleaved with the live batches, so that a busy spell of
the machine hits both. The step may still run slower in the loop than alone for a reason of the loop's own
(loading in the same thread takes its caches), so the verdict is "inconclusive: the machine was busy" only when
other processes took CPU time during the live and replay passes (`processes.neighbours`) and either made the two
disagree or left the loop no spare core; it names the busiest of them.
Explained in notebooks/15_is_my_loop_input_bound.ipynb.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import length_hint
from typing import Any

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch.utils.data import DataLoader

from ..measure import measure, median, p95, processes, timeline
from ..tree import tensors
from . import advice, timed_loop
from .plot import draw
from .timed_loop import Run, batch_size

BUSY = "inconclusive: the machine was busy"
NEIGHBOUR_CORES = 0.5  # the other processes took at least half a core during the loop: a neighbour, busy ...
BUSY_RATIO = 1.5  # ... if the step's time per batch in the loop and alone are further apart than this ...
SPARE_CORES = 0.5  # ... or the neighbour left the loop less than half a core spare


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
        return draw(self, title, until)  # matplotlib layout kept apart from the measurement


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
    run = Run(step, warmup + batches, warmup, replay, repeat, copy, device)
    source = (timed_loop.instrumented(loader) if instrument else None) or loader
    try:
        timed_loop.run_loop(source, run)
    finally:
        timed_loop.stop_workers(source, loader)
    return _diagnosis(run, loader, timed_loop.replay(run))


# ------------------------------------------------------------------------------------------ the figures
def _diagnosis(run: Run, loader: Iterable[Any], replay_s: float) -> Diagnosis:
    """Turn the run's rows into shares and percentiles, the verdict and the ranked knobs."""
    rows = pd.DataFrame(run.rows)
    window = _measured(rows, run, loader)
    stages = _stages(run.tl, run.warmup)
    f = _figures(run, loader, window, stages, replay_s)
    wall = float(window["batch"].sum())
    rate = float(window["samples"].sum()) / wall
    step_ratio = float(window["step"].median()) / f.step_s
    others = run.neighbours or processes.neighbours(run.cpu, processes.reading(since=run.cpu))  # after the replay
    busy = _busy(step_ratio, others)
    return Diagnosis(
        samples_per_s=rate,
        wait_share=f.wait_share,
        step_share=float(window["step"].sum()) / wall,
        copy_share=float(window["copy"].sum()) / wall,
        first_batch_s=f.first_batch_s,
        epoch_start_s=f.epoch_start_s,
        batch_p50_s=f.p50_s,
        batch_p95_s=p95(window["batch"].tolist()),
        replay_samples_per_s=rate * f.headspace,
        headspace=f.headspace,
        live_over_replay_step=step_ratio,
        others_cores=others.cores,
        pss_mb=run.pss_mb,
        stages_ms={k: v * 1e3 for k, v in stages.items()},
        batches=len(rows) - run.warmup,
        samples=int(rows["samples"].iloc[run.warmup :].sum()),
        verdict=f"{BUSY}: {others}" if busy else advice.verdict(f.wait_share, f.headspace),
        recommendations=[] if busy else advice.recommend(f),
        figures=f,
        timeline=run.tl,
        window_start=float(window["begin"].iloc[0] - run.tl.origin),
        neighbours=str(others),
    )


def _measured(rows: pd.DataFrame, run: Run, loader: Iterable[Any]) -> pd.DataFrame:
    """Return the rows after warm-up, less the batches a loader had ready after each replay pass.

    A DataLoader's workers have `num_workers * prefetch_factor` batches ready after a pause, any other loader one:
    they come without a wait.
    """
    ahead = loader.num_workers * (loader.prefetch_factor or 2) if isinstance(loader, DataLoader) else 1
    window = rows.iloc[run.warmup :]
    after = {p + k for p in run.pauses for k in range(1, max(ahead, 1) + 1)}
    kept = window[~window.index.isin(after)]
    return kept if len(kept) else window


def _figures(
    run: Run, loader: Iterable[Any], window: pd.DataFrame, stages: dict[str, float], replay_s: float
) -> advice.Figures:
    """Return what the advice reads: the live loop's and the replay's figures, the loader's knobs, CUDA's."""
    wall, mean_size = float(window["batch"].sum()), float(np.mean([r["samples"] for r in run.rows]))
    rate, replay_rate = float(window["samples"].sum()) / wall, sum(batch_size(b) for b in run.cached) / replay_s
    f = advice.Figures(
        batch_s=wall / len(window),
        step_s=replay_s / len(run.cached),
        wait_share=float(window["wait"].sum()) / wall,
        headspace=replay_rate / rate,
        batch_size=mean_size,
        first_batch_s=run.rows[0]["wait"],
        p50_s=float(window["batch"].median()),
        epoch_start_s=median([r["wait"] for r in run.rows if r["first"]]),
        load_s=stages.get("fetch", 0.0) + stages.get("collate", 0.0) if "fetch" in stages else None,
        fetch_per_sample_s=stages["fetch"] / mean_size if "fetch" in stages else None,
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
    )
    if isinstance(loader, DataLoader):
        f.is_dataloader, f.num_workers, f.persistent_workers = True, loader.num_workers, loader.persistent_workers
        f.has_getitems = callable(getattr(loader.dataset, "__getitems__", None))
        f.epoch_batches = length_hint(loader) or None  # None: a loader without a length (len() raises TypeError)
    _cuda_figures(f, run.cached, run.device)
    return f


def _busy(step_ratio: float, neighbours: processes.Neighbours) -> bool:
    """Return whether another program ran enough to make the figures the machine's, not the loop's.

    A step slower in the loop than alone on a quiet machine is the loop's own doing (loading in the same thread
    takes the step's caches): the verdict stands. Beside a neighbour, the same disagreement, or a machine left
    without a spare core, says nothing certain about the loop.
    """
    disagree = not 1 / BUSY_RATIO <= step_ratio <= BUSY_RATIO
    return neighbours.cores >= NEIGHBOUR_CORES and (neighbours.spare_cores < SPARE_CORES or disagree)


def _stages(tl: timeline.Timeline, warmup: int) -> dict[str, float]:
    """Return the median seconds per batch of each stage, over the measured batches."""
    df = tl.frame()
    per = df[df.batch >= warmup].groupby(["stage", "batch"])["seconds"].sum().groupby("stage").median()
    order = [s for s in timeline.STAGE_COLORS if s in per.index and s != "start"]
    return {s: float(per[s]) for s in order}


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
