"""DataLoader num_workers ladder on decoded JPEGs: images/s and the share of time the loop waits for data."""

from __future__ import annotations

import os
import warnings
from functools import partial
from typing import Any

import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..data.jpeg_folder import ImageFolder, synthetic_imagefolder
from ..load.move import move_to
from ..measure import timeline
from ..teach.worker_data import ResizeToTensor
from . import BenchResult


def jpeg_dataset(px: int | None = None) -> ImageFolder:
    """Return the cached synthetic ImageFolder's train split, decoded and resized to `px` x `px`."""
    px = px or config.size("anatomy.px")
    return ImageFolder(synthetic_imagefolder() / "train", transform=ResizeToTensor(px))


def make_loader(dataset: Any, num_workers: int = 0, batch_size: int | None = None, **kw: Any) -> DataLoader:
    """Return an instrumented DataLoader over `dataset` (events recorded by `timeline`)."""
    data, collate = timeline.instrument(dataset, kw.pop("collate_fn", None))
    if num_workers == 0:
        kw.pop("prefetch_factor", None)
        kw.pop("persistent_workers", None)
    return DataLoader(data, batch_size=batch_size or config.size("anatomy.batch_size"), shuffle=False,
                      num_workers=num_workers, collate_fn=collate, **kw)


def measure_loader(loader: Any, epochs: int = 1, step_ms: float | None = None,
                   wrap: Any = None) -> tuple[dict[str, Any], timeline.Timeline]:
    """Record `epochs` epochs of `loader` (optionally wrapped, e.g. by a prefetcher) with a GPU-like step.

    With a GPU, each batch is also copied to it (the timeline's `copy` stage); on the CPU there is no copy.
    """
    step = timeline.gpu_like_step((config.size("anatomy.step_ms") if step_ms is None else step_ms) / 1000)
    device = config.device() if config.device().type == "cuda" else None
    tl = None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(pin_memory|worker processes|CUDAPrefetcher).*")
        for _ in range(epochs):
            tl = timeline.record(wrap(loader) if wrap else loader, step=step, device=device, timeline=tl,
                                 copy=partial(move_to, device=device, non_blocking=True) if device else None)
    return tl.summary(), tl


def ladder() -> list[int]:
    """Return the num_workers values to try: 0, 1, 2 and the number of cores."""
    return sorted({0, 1, 2, os.cpu_count() or 1})


def sweep(dataset: Any, configs: dict[str, dict[str, Any]], epochs: int = 1,
          step_ms: float | None = None) -> tuple[list[dict[str, Any]], dict[str, timeline.Timeline]]:
    """Record each named configuration (DataLoader keywords, plus `wrap`: a prefetcher class); return rows and timelines."""
    rows, timelines = [], {}
    for label, knobs in configs.items():
        knobs = dict(knobs)
        wrap = knobs.pop("wrap", None)
        summary, tl = measure_loader(make_loader(dataset, **knobs), epochs=epochs, step_ms=step_ms, wrap=wrap)
        rows.append({"config": label, "img_per_s": summary["samples_per_s"], "wait_share": summary["wait_share"],
                     "first_batch_s": summary["first_batch_s"], "wall_s": summary["wall_s"],
                     "parallelism": timeline.parallelism(tl), "overlap": timeline.overlap_share(tl)})
        timelines[label] = tl
    return rows, timelines


def run() -> BenchResult:
    """Measure one epoch per num_workers value (after one untimed epoch that warms the page cache)."""
    dataset = jpeg_dataset()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as DataLoader does in each worker: collate's intra-op threads would fight them
    try:
        measure_loader(make_loader(dataset, 0), step_ms=0)  # warm-up: files into the page cache
        rows, _ = sweep(dataset, {f"num_workers={n}": {"num_workers": n} for n in ladder()})
    finally:
        torch.set_num_threads(threads)
    for row, n in zip(rows, ladder()):
        row["num_workers"] = n
    base = rows[0]["img_per_s"]
    best = max(rows, key=lambda r: r["img_per_s"])
    figures = {"img_per_s_workers0": base, "img_per_s_best": best["img_per_s"],
               "best_num_workers": best["num_workers"], "speedup_best_vs_0": best["img_per_s"] / base,
               "wait_share_workers0": rows[0]["wait_share"], "wait_share_best": best["wait_share"]}
    knobs = {"images": len(dataset), "px": config.size("anatomy.px"), "batch_size": config.size("anatomy.batch_size"),
             "step_ms": config.size("anatomy.step_ms"), "cores": os.cpu_count(), "main_threads": 1}
    return BenchResult(rows, figures, knobs=knobs, repeats=1)


def getitem_costs(dataset: Any, batch_size: int, repeat: int | None = None) -> dict[str, float]:
    """Split one batch's fetch into its parts, in seconds: per-sample calls, the stack (copy), one batched call.

    `dataset` has both `__getitem__` and `__getitems__` (e.g. teach.workers.BatchedStackedImages).
    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """
    from torch.utils.data import default_collate

    indices = list(range(batch_size))
    samples = [dataset[i] for i in indices]
    times = measure.interleaved({
        "calls": lambda: [dataset[i] for i in indices],
        "collate": lambda: default_collate(samples),
        "getitems": lambda: dataset.__getitems__(indices),
    }, repeat=repeat, warmup=2)
    out = {f"{name}_s": measure.median(t) for name, t in times.items()}
    out["batch_bytes"] = float(sum(t.numel() * t.element_size() for t in samples[0]) * batch_size)
    return out
