"""The slide's question: ms per epoch of index-only loops (pure Python, numpy, DataLoader, the helpers' loader)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..load.batch_loader import BatchLoader
from ..load.getitems import BatchRowDataset, collate_batch
from ..teach.slides import SlideLoader, numpy_epoch, python_epoch
from . import BenchResult

SLOW = ("dataloader_nw0", "dataloader_workers", "dataloader_getitems")  # timed over fewer epochs


def iterate(loader: Any) -> Callable[[], None]:
    """Return one epoch over any iterable loader, doing nothing with its batches."""
    def epoch() -> None:
        for _ in loader:
            pass
    return epoch


def dataloader(n: int, batch_size: int, num_workers: int = 0) -> DataLoader:
    """Return the slide's DataLoader over `torch.arange(n)` (workers, prefetch_factor=16, persistent)."""
    extra = dict(prefetch_factor=16, persistent_workers=True) if num_workers else {}
    return DataLoader(torch.arange(n), batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available(), **extra)


def workers() -> int:
    """Return the slide's worker count, capped by this machine's cores: min(10, cores)."""
    return min(10, os.cpu_count() or 1)


def loops(n: int, batch_size: int, with_workers: bool = True) -> dict[str, Callable[[], None]]:
    """Return {name: one-epoch function} for every loop of the slide that runs without TensorFlow."""
    x = torch.arange(n)
    found = {
        "python": python_epoch(n, batch_size),
        "numpy": numpy_epoch(n, batch_size),
        "slide_fast_dataloader": iterate(SlideLoader(x, batch_size)),
        "helpers": iterate(BatchLoader(x, batch_size, shuffle=True, seed=0)),
        "dataloader_getitems": iterate(DataLoader(BatchRowDataset(x), batch_size=batch_size, shuffle=True,
                                                  collate_fn=collate_batch)),
        "dataloader_nw0": iterate(dataloader(n, batch_size)),
    }
    if with_workers:
        found["dataloader_workers"] = iterate(dataloader(n, batch_size, workers()))
    return found


def time_epochs(epochs: dict[str, Callable[[], None]], repeat: int, warmup: int = 1,
                desc: str = "loops") -> dict[str, list[float]]:
    """Time `repeat` epochs of each loop, interleaved (one epoch of each in turn) so noise hits all alike."""
    for fn in epochs.values():
        for _ in range(warmup):
            fn()
    seconds: dict[str, list[float]] = {name: [] for name in epochs}
    for _ in measure.progress(range(repeat), desc=desc):
        for name, fn in epochs.items():
            with measure.Timer() as t:
                fn()
            seconds[name].append(t.seconds)
    return seconds


def table(seconds: dict[str, list[float]], n: int) -> list[dict[str, Any]]:
    """Return one row per loop: median and p95 ms per epoch, samples/s, ratio to the fastest."""
    med = {k: float(np.median(v)) for k, v in seconds.items()}
    best = min(med.values())
    return [{"loop": k, "ms_per_epoch": med[k] * 1e3, "p95_ms": float(np.quantile(seconds[k], 0.95)) * 1e3,
             "samples_per_s": n / med[k], "x_fastest": med[k] / best, "epochs": len(seconds[k])}
            for k in sorted(med, key=med.get)]


def run() -> BenchResult:
    """Time every loop at the scale's samples and batch size, the fast ones over more epochs."""
    n, bs = config.size("loops.samples"), config.size("loops.batch_size")
    everything = loops(n, bs)
    fast = {k: v for k, v in everything.items() if k not in SLOW}
    slow = {k: v for k, v in everything.items() if k in SLOW}
    seconds = time_epochs(fast, config.size("loops.epochs"))
    seconds |= time_epochs(slow, config.size("loops.worker_epochs"), desc="slow loops")
    rows = table(seconds, n)
    ms = {r["loop"]: r["ms_per_epoch"] for r in rows}
    figures = {"helpers_over_numpy": ms["helpers"] / ms["numpy"],
               "dataloader_nw0_over_helpers": ms["dataloader_nw0"] / ms["helpers"]}
    figures |= {f"ms_per_epoch_{k}": v for k, v in ms.items()}
    knobs = {"samples": n, "batch_size": bs, "num_workers": workers(), "torch_threads": torch.get_num_threads()}
    return BenchResult(rows, figures, knobs=knobs, repeats=config.size("loops.epochs"))
