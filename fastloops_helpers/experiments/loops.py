"""The slide's question: ms per epoch of index-only loops.

The loops: pure Python, numpy, DataLoader, tf.data, the helpers' loader.

Explained in notebooks/01_the_question.ipynb. `measure_loops()` computes the table and figures that notebook 01
shows (with its defaults block) and `python -m fastloops_helpers.book.bench loops` saves (through `run`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..load.batch_loader import BatchLoader
from ..load.getitems import BatchRowDataset, collate_batch
from ..teach.slide_code import FastDataloader, numpy_epoch, python_epoch, slide_dataloader, tf_data_pipeline
from . import BenchResult

# Groups timed apart, each interleaved (one epoch of every loop per round, in a new order each round):
# the close contenders (a few ms each) share a group, so their ratio is a median of per-round ratios, and no
# loop that evicts the caches or leaves threads spinning (pure Python's 300,000-item list, the workers)
# runs between them; the slower loops take 0.1-3 s per epoch, so they get fewer rounds. tf.data runs last:
# TensorFlow's thread pools must not run beside the other loops.
VECTORISED = ("numpy", "helpers", "slide_fast_dataloader")
SLOWER = ("python", "dataloader_getitems", "dataloader_nw0", "dataloader_workers")


def workers() -> int:
    """Return the slide's worker count, capped by this machine's cores: min(10, cores)."""
    return min(10, os.cpu_count() or 1)


def slide_loops(n: int, batch_size: int, num_workers: int, with_tf: bool = True) -> dict[str, Callable[[], int]]:
    """Return {name: one epoch, returning its batch count} for every loop notebook 01 times.

    The slide's four (DataLoader with `num_workers`, left out when 0; tf.data when installed and `with_tf`),
    then DataLoader without workers, a `__getitems__` Dataset, the slide's FastDataloader and BatchLoader.
    """
    x = torch.arange(n)
    found = {"python": python_epoch(n, batch_size), "numpy": numpy_epoch(n, batch_size)}
    if num_workers:
        found["dataloader_workers"] = measure.drain(slide_dataloader(n, batch_size, num_workers))
    pipeline = tf_data_pipeline(n, batch_size) if with_tf else None
    if pipeline is not None:
        found["tf_data"] = measure.drain(pipeline)
    found["dataloader_nw0"] = measure.drain(slide_dataloader(n, batch_size, 0))
    getitems = DataLoader(BatchRowDataset(x), batch_size=batch_size, shuffle=True, collate_fn=collate_batch)
    found["dataloader_getitems"] = measure.drain(getitems)
    found["slide_fast_dataloader"] = measure.drain(FastDataloader(x, batch_size))
    found["helpers"] = measure.drain(BatchLoader(x, batch_size, shuffle=True, seed=0))
    return found


def time_loops(
    found: dict[str, Callable[[], int]], rounds: int, slow_rounds: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Time the loops by group (VECTORISED over `rounds`, the slower ones and tf.data over `slow_rounds`).

    Each group runs interleaved after one untimed epoch of each of its loops, which warms it up (and starts the
    persistent workers) and counts its batches. Return ({name: seconds per epoch}, {name: batches per epoch}).
    """
    groups = [
        (VECTORISED, rounds, "vectorised loops"),
        (SLOWER, slow_rounds, "slower loops"),
        (("tf_data",), slow_rounds, "tf.data"),
    ]
    seconds: dict[str, list[float]] = {}
    batches: dict[str, int] = {}
    for names, repeat, desc in groups:
        group = {k: found[k] for k in names if k in found}
        batches |= {k: epoch() for k, epoch in group.items()}
        if group:
            seconds |= measure.interleaved(group, repeat, warmup=0, desc=desc, shuffle=True)
    return seconds, batches


def table(seconds: dict[str, list[float]], n: int, batches: dict[str, int] | None = None) -> list[dict]:
    """Return one row per loop, fastest first: median and p95 ms per epoch, samples/s, x the fastest's time."""
    med = {k: measure.median(v) for k, v in seconds.items()}
    best = min(med.values())
    return [
        {
            "loop": k,
            "ms_per_epoch": med[k] * 1e3,
            "p95_ms": measure.p95(seconds[k]) * 1e3,
            "samples_per_s": n / med[k],
            "x_fastest": med[k] / best,
            "epochs": len(seconds[k]),
            **({"batches_per_epoch": batches[k]} if batches else {}),
        }
        for k in sorted(med, key=med.__getitem__)
    ]


def figures(seconds: dict[str, list[float]]) -> dict[str, float]:
    """Return the ratios notebook 01 and the benchmark report (those whose loops were timed) and every epoch time."""
    ms = {k: measure.median(v) * 1e3 for k, v in seconds.items()}
    found = {f"ms_per_epoch_{k}": v for k, v in ms.items()}
    if {"helpers", "numpy"} <= set(ms):
        found["helpers_over_numpy"] = measure.ratio(seconds, "helpers", "numpy")
    for top, bottom in (("dataloader_nw0", "helpers"), ("dataloader_nw0", "numpy"), ("dataloader_workers", "numpy")):
        if {top, bottom} <= set(ms):
            found[f"{top}_over_{bottom}"] = ms[top] / ms[bottom]
    return found


def measure_loops(
    num_samples: int, batch_size: int, num_workers: int, rounds: int, slow_rounds: int, with_tf: bool = True
) -> BenchResult:
    """Time every loop of the slide and the extra ones over `num_samples` indices; return the table and figures.

    Explained in notebooks/01_the_question.ipynb.
    """
    found = slide_loops(num_samples, batch_size, num_workers, with_tf)
    seconds, batches = time_loops(found, rounds, slow_rounds)
    knobs = {
        "samples": num_samples,
        "batch_size": batch_size,
        "num_workers": num_workers,
        "rounds": rounds,
        "slow_rounds": slow_rounds,
        "tf_data": "tf_data" in found,
        "torch_threads": torch.get_num_threads(),
    }
    return BenchResult(table(seconds, num_samples, batches), figures(seconds), knobs=knobs, repeats=rounds)


def run(scale: str) -> BenchResult:
    """Time every loop at the scale's samples and batch size, the vectorised ones over more rounds."""
    return measure_loops(
        config.size("loops.samples", scale),
        config.size("loops.batch_size", scale),
        workers(),
        config.size("loops.rounds", scale),
        config.size("loops.worker_epochs", scale),
    )
