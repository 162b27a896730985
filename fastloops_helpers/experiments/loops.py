"""The slide's question: ms per epoch of index-only loops (pure Python, numpy, DataLoader, tf.data, the helpers' loader).

Explained in notebooks/01_the_question.ipynb. `compare()` computes the table and figures that notebook 01 shows
and `python -m fastloops_helpers.book.bench loops` saves.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..load.batch_loader import BatchLoader
from ..load.getitems import BatchRowDataset, collate_batch
from ..teach.slide_code import SlideLoader, numpy_epoch, python_epoch
from . import BenchResult

# Groups timed apart, each interleaved (one epoch of every loop per round, in a new order each round):
# the close contenders (a few ms each) share a group, so their ratio is a median of per-round ratios, and no
# loop that evicts the caches or leaves threads spinning (pure Python's 300,000-item list, the workers)
# runs between them; the slower loops take 0.1-3 s per epoch, so they get fewer rounds.
VECTORISED = ("numpy", "helpers", "slide_fast_dataloader")
SLOWER = ("python", "dataloader_getitems", "dataloader_nw0", "dataloader_workers")


def dataloader(n: int, batch_size: int, num_workers: int = 0) -> DataLoader:
    """Return the slide's DataLoader over `torch.arange(n)` (workers, prefetch_factor=16, persistent)."""
    extra = dict(prefetch_factor=16, persistent_workers=True) if num_workers else {}
    return DataLoader(torch.arange(n), batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available(), **extra)


def workers() -> int:
    """Return the slide's worker count, capped by this machine's cores: min(10, cores)."""
    return min(10, os.cpu_count() or 1)


def loops(n: int, batch_size: int, with_workers: bool = True) -> dict[str, Callable[[], Any]]:
    """Return {name: one-epoch function} for every loop of the slide that runs without TensorFlow."""
    x = torch.arange(n)
    found = {
        "numpy": numpy_epoch(n, batch_size),
        "helpers": measure.drain(BatchLoader(x, batch_size, shuffle=True, seed=0)),
        "slide_fast_dataloader": measure.drain(SlideLoader(x, batch_size)),
        "python": python_epoch(n, batch_size),
        "dataloader_getitems": measure.drain(DataLoader(BatchRowDataset(x), batch_size=batch_size, shuffle=True,
                                                        collate_fn=collate_batch)),
        "dataloader_nw0": measure.drain(dataloader(n, batch_size)),
    }
    if with_workers:
        found["dataloader_workers"] = measure.drain(dataloader(n, batch_size, workers()))
    return found


def tf_data(n: int, batch_size: int) -> Callable[[], Any] | None:
    """Return one epoch of the slide's tf.data pipeline (shuffle buffer of n, batch, prefetch), or None without TF."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    data = tf.data.Dataset.range(n)
    pipeline = (data.shuffle(buffer_size=data.cardinality(), reshuffle_each_iteration=True)
                .batch(batch_size).prefetch(tf.data.AUTOTUNE))
    return measure.drain(pipeline)


def table(seconds: dict[str, list[float]], n: int) -> list[dict[str, Any]]:
    """Return one row per loop, fastest first: median and p95 ms per epoch, samples/s, x the fastest's time."""
    med = {k: measure.median(v) for k, v in seconds.items()}
    best = min(med.values())
    return [{"loop": k, "ms_per_epoch": med[k] * 1e3, "p95_ms": measure.p95(seconds[k]) * 1e3,
             "samples_per_s": n / med[k], "x_fastest": med[k] / best, "epochs": len(seconds[k])}
            for k in sorted(med, key=med.get)]


def compare(n: int, batch_size: int, rounds: int, slow_rounds: int, with_tf: bool = True) -> BenchResult:
    """Time every loop (tf.data too when TensorFlow is installed); return the table and the figures.

    Explained in notebooks/01_the_question.ipynb.
    """
    found = loops(n, batch_size)
    seconds = measure.interleaved({k: found[k] for k in VECTORISED}, rounds, warmup=1, desc="vectorised loops",
                                  shuffle=True)
    seconds |= measure.interleaved({k: found[k] for k in SLOWER}, slow_rounds, warmup=1, desc="slower loops",
                                   shuffle=True)
    tf_epoch = tf_data(n, batch_size) if with_tf else None
    if tf_epoch is not None:  # last: TensorFlow's thread pools must not run beside the other loops
        seconds |= measure.interleaved({"tf_data": tf_epoch}, slow_rounds, warmup=1, desc="tf.data")
    rows = table(seconds, n)
    ms = {r["loop"]: r["ms_per_epoch"] for r in rows}
    figures = {"helpers_over_numpy": measure.ratio(seconds, "helpers", "numpy"),
               "dataloader_nw0_over_helpers": ms["dataloader_nw0"] / ms["helpers"],
               "dataloader_nw0_over_numpy": ms["dataloader_nw0"] / ms["numpy"],
               "dataloader_workers_over_numpy": ms["dataloader_workers"] / ms["numpy"]}
    figures |= {f"ms_per_epoch_{k}": v for k, v in ms.items()}
    knobs = {"samples": n, "batch_size": batch_size, "num_workers": workers(), "rounds": rounds,
             "slow_rounds": slow_rounds, "tf_data": tf_epoch is not None, "torch_threads": torch.get_num_threads()}
    return BenchResult(rows, figures, knobs=knobs, repeats=rounds)


def run() -> BenchResult:
    """Time every loop at the scale's samples and batch size, the vectorised ones over more rounds."""
    return compare(config.size("loops.samples"), config.size("loops.batch_size"), config.size("loops.rounds"),
                   config.size("loops.worker_epochs"))
