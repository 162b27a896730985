"""Record when each stage of a real PyTorch loader ran, and draw it as a Gantt chart.

Workers record the fetch and the collate of each batch and ship those events inside the batch
(a `TimedBatch`); the main process records the wait for the next batch, pinning (DataLoader's pin
thread calls `TimedBatch.pin_memory`), the host-to-device copy and the training step. Every clock is
`time.perf_counter`, which is system-wide (CLOCK_MONOTONIC on Linux), so worker and main times share
one axis.

Explained in notebooks/07_dataloader_anatomy.ipynb.
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch.utils.data import Dataset, default_collate, get_worker_info

from ..tree import batch_len
from .clock import now, sync

STAGE_COLORS = {
    "fetch": "#4c72b0",
    "collate": "#55a868",
    "wait": "#c44e52",
    "pin": "#8172b2",
    "copy": "#ccb974",
    "step": "#64b5cd",
    "start": "#bbbbbb",
}
_pending: list[tuple[str, float, float]] = []  # this process's fetch events not yet shipped with a batch


class Event(NamedTuple):
    """One stage of one batch: who ran it (lane), what (stage), which batch, and when (seconds)."""

    lane: str
    stage: str
    batch: int
    start: float
    end: float


def _lane() -> str:
    info = get_worker_info()
    if info is not None:
        return f"worker {info.id}"
    if multiprocessing.parent_process() is not None:  # e.g. a ProcessPrefetcher's loader process
        return "prefetch process"
    return "main: load" if threading.current_thread() is threading.main_thread() else "main: prefetch thread"


class TimedDataset(Dataset):
    """Wrap `dataset` so each batch fetch (per-sample loop or `__getitems__`) is recorded where it runs.

    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        """Fetch a batch of samples, timing the whole fetch as one event."""
        start = now()
        batched = getattr(self.dataset, "__getitems__", None)
        samples = batched(indices) if batched is not None else [self.dataset[i] for i in indices]
        _pending.append(("fetch", start, now()))
        return samples


@dataclass
class TimedBatch:
    """A collated batch plus the events that produced it; DataLoader's pin thread calls `pin_memory`."""

    data: Any
    events: list[tuple[str, str, float, float]]  # (lane, stage, start, end)

    def pin_memory(self, device: Any = None) -> TimedBatch:
        """Pin the batch and record when (the pin thread lives in the main process)."""
        from torch.utils.data._utils.pin_memory import pin_memory as pin  # handles any nesting

        start = now()
        data = pin(self.data)
        return TimedBatch(data, self.events + [("main: pin thread", "pin", start, now())])


class TimedCollate:
    """Wrap a collate function: time it and attach this batch's worker events to the result.

    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    def __init__(self, collate_fn: Callable[[list[Any]], Any] | None = None) -> None:
        self.collate_fn = collate_fn or default_collate

    def __call__(self, samples: list[Any]) -> TimedBatch:
        start = now()
        data = self.collate_fn(samples)
        lane = _lane()
        events = [(lane, stage, t0, t1) for stage, t0, t1 in _pending]
        _pending.clear()
        events.append((lane, "collate", start, now()))
        return TimedBatch(data, events)


def instrument(dataset: Any, collate_fn: Callable | None = None) -> tuple[TimedDataset, TimedCollate]:
    """Return the timed dataset and collate to pass to `DataLoader(dataset, collate_fn=...)`."""
    return TimedDataset(dataset), TimedCollate(collate_fn)


@dataclass
class Timeline:
    """The events of one recorded run, with t=0 at the call to `iter(loader)`.

    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    events: list[Event] = field(default_factory=list)
    origin: float = 0.0
    samples: int = 0

    def frame(self) -> pd.DataFrame:
        """Return the events as a DataFrame with times relative to the origin."""
        df = pd.DataFrame(self.events, columns=list(Event._fields))
        df[["start", "end"]] -= self.origin
        df["seconds"] = df["end"] - df["start"]
        return df

    def summary(self) -> dict[str, float]:
        """Return wall time, throughput, the share of wall time the main loop waited for data, and more."""
        df = self.frame()
        main = df[df.lane == "main: loop"]
        wall = float(df["end"].max()) if len(df) else 0.0
        per = main.groupby("stage")["seconds"].sum()
        wait = float(per.get("wait", 0.0))
        return {
            "wall_s": wall,
            "samples": self.samples,
            "samples_per_s": self.samples / wall if wall else 0.0,
            "wait_s": wait,
            "step_s": float(per.get("step", 0.0)),
            "copy_s": float(per.get("copy", 0.0)),
            "first_batch_s": float(main[main.stage == "wait"]["end"].min()) if len(main) else 0.0,
            "wait_share": wait / wall if wall else 0.0,
            "input_bound": wait / wall > 0.5 if wall else False,
        }


def record(
    loader: Iterable[Any],
    step: Callable[[Any], Any] | None = None,
    device: torch.device | str | None = None,
    max_batches: int | None = None,
    timeline: Timeline | None = None,
    copy: Callable[[Any], Any] | None = None,
) -> Timeline:
    """Run one epoch of `loader` (built with `instrument`), timing wait, copy and step per batch.

    `step` is the training step (called on the batch after the copy); `copy`, if given, moves each batch
    to `device` (e.g. `partial(move_to, device=device, non_blocking=True)`), and CUDA work on `device` is
    synchronised before each stamp. Pass `timeline` to append a further epoch to an earlier recording.
    """
    tl = timeline if timeline is not None else Timeline(origin=now())
    dev = torch.device(device) if device is not None else None
    start = now()
    it = iter(loader)
    tl.events.append(Event("main: loop", "start", -1, start, now()))
    for index in itertools.count() if max_batches is None else range(max_batches):
        t0 = now()
        try:
            item = next(it)
        except StopIteration:
            break
        tl.events.append(Event("main: loop", "wait", index, t0, now()))
        batch = _stamped(tl, index, "copy", copy, unwrap(item, index, tl), dev)
        _stamped(tl, index, "step", step, batch, dev)
        tl.samples += batch_len(batch) or 1
    del it  # shuts non-persistent workers down now, not at garbage collection
    return tl


def _stamped(tl: Timeline, index: int, stage: str, fn: Callable[[Any], Any] | None, batch: Any, dev: Any) -> Any:
    """Return `fn(batch)`, stamped as `stage` of batch `index` once `dev` has finished it (`batch` if no `fn`)."""
    if fn is None:
        return batch
    t0 = now()
    out = fn(batch)
    sync(dev)
    tl.events.append(Event("main: loop", stage, index, t0, now()))
    return out


def unwrap(item: Any, index: int, tl: Timeline) -> Any:
    """Return the data of `item`, a `TimedBatch`, adding its events to `tl` as batch `index`'s (else `item` as is).

    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """
    if not isinstance(item, TimedBatch):
        return item
    tl.events.extend(Event(lane, stage, index, t0, t1) for lane, stage, t0, t1 in item.events)
    return item.data


def gantt(tl: Timeline, title: str = "", until: float | None = None) -> Figure:
    """Draw one lane per worker and per main-process stage, coloured by stage."""
    df = tl.frame()
    if until is not None:
        df = df[df.start < until]
    lanes = sorted(df.lane.unique(), key=lambda s: (not s.startswith("worker"), s != "main: load", s))
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(lanes) + 1.4))
    draw_lanes(ax, df, lanes, "seconds since iter(loader)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def draw_lanes(ax: Axes, df: pd.DataFrame, lanes: list[str], xlabel: str) -> None:
    """Draw each of `lanes` as one row of `df`'s events on `ax`, coloured by stage, the legend in stage order.

    `gantt` draws a whole figure with it; `diagnose`'s plot draws its timeline panel. Explained in
    notebooks/07_dataloader_anatomy.ipynb.
    """
    for y, lane in enumerate(lanes):
        for stage, rows in df[df.lane == lane].groupby("stage"):
            ax.broken_barh(
                list(zip(rows.start, rows.seconds)),
                (y - 0.35, 0.7),
                color=STAGE_COLORS.get(stage, "#999999"),
                label=stage,
            )
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    found = {str(h.get_label()): h for h in ax.get_legend_handles_labels()[0]}
    order = [s for s in STAGE_COLORS if s in found] + [s for s in found if s not in STAGE_COLORS]
    ax.legend([found[s] for s in order], order, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _spans(df: pd.DataFrame) -> list[tuple[float, float]]:
    return _union(list(zip(df.start, df.end)))


def parallelism(tl: Timeline, stages: tuple[str, ...] = ("fetch", "collate")) -> float:
    """Return the mean number of `stages` running at once while any runs (2.0: two workers always busy)."""
    df = tl.frame()
    work = df[df.stage.isin(stages)]
    covered = sum(b - a for a, b in _spans(work))
    return float(work.seconds.sum() / covered) if covered else 0.0


def overlap_share(tl: Timeline, stage: str = "step", during: tuple[str, ...] = ("fetch", "collate")) -> float:
    """Return the share of `stage` time during which some `during` stage also ran (loading hidden by compute)."""
    df = tl.frame()
    a, b = _spans(df[df.stage == stage]), _spans(df[df.stage.isin(during)])
    total = sum(y - x for x, y in a)
    both = sum(max(0.0, min(y, v) - max(x, u)) for x, y in a for u, v in b)
    return both / total if total else 0.0


def gpu_like_step(seconds: float) -> Callable[[Any], None]:
    """Return a stand-in training step that takes `seconds` but leaves the CPU free, as a GPU step does."""

    def step(_batch: Any) -> None:
        time.sleep(seconds)

    return step
