"""DataLoader num_workers ladder on decoded JPEGs: images/s and the share of time the loop waits for data.

`run(scale)` reads the sizes table once; every other function takes its sizes as arguments, so notebook 07
passes its own defaults block to the same functions. Explained in notebooks/07_dataloader_anatomy.ipynb.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from .. import config, measure
from ..data.jpeg_folder import ImageFolder
from ..load.move import move_to
from ..measure import timeline
from ..teach.worker_data import ResizeToTensor


def jpeg_dataset(root: str | Path, px: int) -> ImageFolder:
    """Return the ImageFolder's train split under `root`, decoded and resized to `px` x `px` at every access."""
    return ImageFolder(Path(root) / "train", transform=ResizeToTensor(px))


def make_loader(dataset: Any, num_workers: int, batch_size: int, **kw: Any) -> DataLoader:
    """Return a DataLoader over `dataset` whose fetches and collates are recorded (`timeline.instrument`)."""
    data, collate = timeline.instrument(dataset, kw.pop("collate_fn", None))
    if num_workers == 0:  # DataLoader rejects these without workers
        kw.pop("prefetch_factor", None)
        kw.pop("persistent_workers", None)
    return DataLoader(data, batch_size=batch_size, shuffle=False, num_workers=num_workers, collate_fn=collate, **kw)


def measure_loader(
    loader: Any, step_ms: float, epochs: int = 1, wrap: Any = None
) -> tuple[dict[str, Any], timeline.Timeline]:
    """Record `epochs` epochs of `loader` (optionally wrapped, e.g. by a prefetcher) with a `step_ms` GPU-like step.

    With a GPU, each batch is also copied to it (the timeline's `copy` stage); on the CPU there is no copy.
    """
    step = timeline.gpu_like_step(step_ms / 1000)
    device = config.device() if config.device().type == "cuda" else None
    tl: timeline.Timeline | None = None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(pin_memory|worker processes|CUDAPrefetcher).*")
        for _ in range(epochs):
            tl = timeline.record(
                wrap(loader) if wrap else loader,
                step=step,
                device=device,
                timeline=tl,
                copy=partial(move_to, device=device, non_blocking=True) if device else None,
            )
    if tl is None:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    return tl.summary(), tl


BATCHES_PER_WORKER = 4  # an epoch gives each worker of the largest count at least this many batches


def ladder(cores: int | None = None) -> list[int]:
    """Return the num_workers values to try: 0, 1, 2, 4, 8, half the cores and the cores, none above the cores."""
    cores = cores or os.cpu_count() or 1
    return sorted({n for n in (0, 1, 2, 4, 8, cores // 2, cores) if n <= cores})


def epoch_indices(size: int, counts: Sequence[int], batch_size: int) -> list[int]:
    """Return one ladder epoch's sample indices: the dataset in order, cycled until the largest worker count gets
    BATCHES_PER_WORKER batches per worker (with fewer, the step and the start-up bound the rate, not the workers)."""
    total = max(size, BATCHES_PER_WORKER * max(counts, default=0) * batch_size)
    return [i % size for i in range(total)]


def sweep(
    dataset: Any, configs: dict[str, dict[str, Any]], batch_size: int, step_ms: float, epochs: int = 1
) -> tuple[list[dict[str, Any]], dict[str, timeline.Timeline]]:
    """Record each named configuration once; return rows and timelines.

    A configuration is DataLoader keywords, plus `wrap`: a prefetcher class.
    """
    rows, timelines = [], {}
    for label, knobs in configs.items():
        row, timelines[label] = record_config(dataset, label, knobs, batch_size, step_ms, epochs)
        rows.append(row)
    return rows, timelines


def record_config(
    dataset: Any, label: str, knobs: dict[str, Any], batch_size: int, step_ms: float, epochs: int = 1
) -> tuple[dict[str, Any], timeline.Timeline]:
    """Record one configuration (DataLoader keywords, plus `wrap`); return its row and its timeline."""
    knobs = dict(knobs)
    wrap = knobs.pop("wrap", None)
    loader = make_loader(dataset, knobs.pop("num_workers", 0), batch_size, **knobs)
    summary, tl = measure_loader(loader, step_ms, epochs=epochs, wrap=wrap)
    row = {
        "config": label,
        "img_per_s": summary["samples_per_s"],
        "wait_share": summary["wait_share"],
        "first_batch_s": summary["first_batch_s"],
        "wall_s": summary["wall_s"],
        "batches": steps(tl),
        "parallelism": timeline.parallelism(tl),
        "overlap": timeline.overlap_share(tl),
    }
    return row, tl


def interleaved_ladder(
    dataset: Any, counts: Sequence[int], batch_size: int, step_ms: float, rounds: int
) -> tuple[list[dict[str, Any]], dict[str, timeline.Timeline], dict[int, list[float]]]:
    """Record one epoch of each `num_workers` value per round, in a new order each round, for `rounds` rounds.

    An epoch is `epoch_indices`: the dataset, cycled where the largest count would get fewer than
    BATCHES_PER_WORKER batches per worker.

    The rounds run through the harness's `interleaved` (a busy spell slows every value alike), so the ratio of two
    values is a median of per-round ratios with an interval (`ladder_figures`). Return one row per value (medians
    over rounds), each value's timeline from its median round, and {num_workers: img/s per round}.
    """
    recorded: dict[int, list[tuple[dict[str, Any], timeline.Timeline]]] = {n: [] for n in counts}
    indices = epoch_indices(len(dataset), counts, batch_size)  # the same epoch for every value

    def epoch(n: int) -> None:
        knobs = {"num_workers": n, "sampler": indices}
        recorded[n].append(record_config(dataset, f"num_workers={n}", knobs, batch_size, step_ms))

    measure.interleaved({n: partial(epoch, n) for n in counts}, rounds, warmup=0, shuffle=True)
    rows, timelines = [], {}
    for runs in recorded.values():
        row = dict(runs[0][0])
        for key in ("img_per_s", "wait_share", "first_batch_s", "wall_s", "parallelism", "overlap"):
            row[key] = measure.median([r[key] for r, _ in runs])
        middle = sorted(runs, key=lambda run: run[0]["img_per_s"])[(len(runs) - 1) // 2]
        rows.append(row | {"rounds": len(runs)})
        timelines[row["config"]] = middle[1]
    return rows, timelines, {n: [r["img_per_s"] for r, _ in runs] for n, runs in recorded.items()}


def ladder_figures(img_per_s: dict[int, list[float]]) -> dict[str, float]:
    """Return each value's median img/s and the claimed ratio, 2 workers over 0, per round with its 95 % interval."""
    found = {f"ladder_img_per_s_{n}": measure.median(v) for n, v in img_per_s.items()}
    if {0, 2} <= set(img_per_s):
        found |= measure.interval_figures("workers2_over_workers0", measure.ratios(img_per_s, 2, 0))
    return found


def steps(tl: timeline.Timeline) -> int:
    """Return how many training steps (batches) a recording holds."""
    return int((tl.frame().stage == "step").sum())


def epoch_starts(
    dataset: Any, num_workers: int, batch_size: int, step_ms: float, persistent_workers: bool, **kw: Any
) -> list[float]:
    """Record two epochs; return the delay from the start of each epoch to its first batch, in seconds."""
    loader = make_loader(dataset, num_workers, batch_size, persistent_workers=persistent_workers, **kw)
    _, tl = measure_loader(loader, step_ms, epochs=2)
    df = tl.frame()
    starts = df[df.stage == "start"].start.tolist()
    return [float(df[(df.stage == "wait") & (df.start >= s)].end.min() - s) for s in starts]


def getitem_costs(dataset: Any, batch_size: int, repeat: int | None = None) -> dict[str, float]:
    """Split one batch's fetch into its parts, in seconds: per-sample calls, the stack (copy), one batched call.

    `dataset` has both `__getitem__` and `__getitems__` (e.g. teach.worker_data.BatchedStackedImages).
    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """
    from torch.utils.data import default_collate

    indices = list(range(batch_size))
    samples = [dataset[i] for i in indices]
    times = measure.interleaved(
        {
            "calls": lambda: [dataset[i] for i in indices],
            "collate": lambda: default_collate(samples),
            "getitems": lambda: dataset.__getitems__(indices),
        },
        repeat=repeat,
        warmup=2,
    )
    out = {f"{name}_s": measure.median(t) for name, t in times.items()}
    out["batch_bytes"] = float(sum(t.numel() * t.element_size() for t in samples[0]) * batch_size)
    return out
