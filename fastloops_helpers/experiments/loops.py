"""The slide's question: ms per epoch of index-only loops.

The loops: pure Python, numpy, DataLoader, tf.data, the helpers' loader.

Explained in notebooks/01_the_question.ipynb. `measure_loops()` computes the table and figures that notebook 01
shows, with its defaults block and its cells' loops, passed as `slide`; `python -m fastloops_book.bench
loops` executes that notebook and saves what it measured.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader

from .. import measure
from ..load.batch_loader import BatchLoader
from ..load.getitems import BatchRowDataset, collate_batch
from ..teach import slide_code
from . import BenchResult

# Groups timed apart, each interleaved (one epoch of every loop per round, in a new order each round):
# the close contenders (a few ms each) share a group, so their ratio is a median of per-round ratios, and no
# loop that evicts the caches or leaves threads spinning (pure Python's 300,000-item list, the workers)
# runs between them. The per-sample DataLoader without workers (up to seconds per epoch) runs beside the helpers
# and numpy in a group of its own, so that its ratios to them are per round too; the other slower loops get
# fewer rounds. tf.data runs last: TensorFlow's thread pools must not run beside the other loops.
VECTORISED = ("numpy", "helpers", "slide_fast_dataloader")
PER_SAMPLE = ("dataloader_nw0", "helpers", "numpy")
SLOWER = ("python", "dataloader_getitems", "dataloader_workers")
# the per-round ratios the figures give with their 95 % interval: (group, numerator, denominator)
PER_ROUND = {
    "helpers_over_numpy": ("vectorised", "helpers", "numpy"),
    "dataloader_nw0_over_helpers": ("per_sample", "dataloader_nw0", "helpers"),
    "dataloader_nw0_over_numpy": ("per_sample", "dataloader_nw0", "numpy"),
}
# The slide's code the loops are built from: notebook 01 passes its cells' objects, by these names.
SLIDE = ("python_epoch", "numpy_epoch", "slide_dataloader", "tf_data_pipeline", "loader_epoch")


def workers() -> int:
    """Return the slide's worker count, capped by this machine's cores: min(10, cores)."""
    return min(10, os.cpu_count() or 1)


def _check_slide(slide: Mapping[str, Any]) -> None:
    missing, unknown = set(SLIDE) - set(slide), set(slide) - set(SLIDE)
    if missing or unknown:
        raise ValueError(
            f"slide takes exactly the names {SLIDE} (notebook 01's cells): missing {sorted(missing)}, "
            f"unknown {sorted(unknown)}"
        )


def slide_loops(
    n: int, batch_size: int, num_workers: int, slide: Mapping[str, Any], with_tf: bool = True
) -> dict[str, Callable[[], int]]:
    """Return {name: one epoch, returning its batch count} for every loop notebook 01 times.

    The slide's four (DataLoader with `num_workers`, left out when 0; tf.data when installed and `with_tf`),
    then DataLoader without workers, a `__getitems__` Dataset, the slide's FastDataloader and BatchLoader. The
    slide's code comes from `slide` ({name in `SLIDE`: object}, notebook 01's cells), every name given.
    """
    _check_slide(slide)
    x = torch.arange(n)
    found = {"python": slide["python_epoch"](n, batch_size), "numpy": slide["numpy_epoch"](n, batch_size)}
    if num_workers:
        found["dataloader_workers"] = slide["loader_epoch"](slide["slide_dataloader"](n, batch_size, num_workers))
    pipeline = slide["tf_data_pipeline"](n, batch_size) if with_tf else None
    if pipeline is not None:
        found["tf_data"] = slide["loader_epoch"](pipeline)
    found["dataloader_nw0"] = slide["loader_epoch"](slide["slide_dataloader"](n, batch_size, 0))
    getitems = DataLoader(BatchRowDataset(x), batch_size=batch_size, shuffle=True, collate_fn=collate_batch)
    found["dataloader_getitems"] = measure.drain(getitems)
    found["slide_fast_dataloader"] = measure.drain(slide_code.FastDataloader(x, batch_size))
    found["helpers"] = measure.drain(BatchLoader(x, batch_size, shuffle=True, seed=0))
    return found


def time_loops(
    found: dict[str, Callable[[], int]], rounds: int, slow_rounds: int, pair_rounds: int
) -> tuple[dict[str, dict[str, list[float]]], dict[str, int]]:
    """Time the loops by group; return ({group: {name: seconds per epoch}}, {name: batches per epoch}).

    Each group runs interleaved after one untimed epoch of each of its loops, which warms it up (and starts the
    persistent workers) and counts its batches. The vectorised loops run `rounds` rounds, then more while the 95 %
    interval of helpers/numpy is wider than +-5 % of its median, up to twice that time (`interleaved_until_steady`:
    it stops on the width, never on the verdict). The per-sample DataLoader runs beside the helpers and numpy over
    `pair_rounds`, the other slower loops and tf.data over `slow_rounds`.
    """
    batches = {k: epoch() for k, epoch in found.items() if k in VECTORISED}
    vectorised = {k: found[k] for k in VECTORISED if k in found}
    groups = {"vectorised": measure.interleaved_until_steady(vectorised, "helpers", "numpy", rounds, warmup=0)}
    for label, names, repeat, desc in (
        ("per_sample", PER_SAMPLE, pair_rounds, "per-sample DataLoader"),
        ("slower", SLOWER, slow_rounds, "slower loops"),
        ("tf_data", ("tf_data",), slow_rounds, "tf.data"),
    ):
        group = {k: found[k] for k in names if k in found}
        batches |= {k: epoch() for k, epoch in group.items() if k not in batches}
        if group:
            groups[label] = measure.interleaved(group, repeat, warmup=0, desc=desc, shuffle=True)
    return groups, batches


def epochs(groups: dict[str, dict[str, list[float]]]) -> dict[str, list[float]]:
    """Return {loop: seconds per epoch}, each loop's from the first group that timed it (the helpers' and numpy's
    from the vectorised group, which gives them the most rounds)."""
    seconds: dict[str, list[float]] = {}
    for group in groups.values():
        for name, values in group.items():
            seconds.setdefault(name, values)
    return seconds


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


def per_round(groups: dict[str, dict[str, list[float]]]) -> dict[str, list[float]]:
    """Return {figure: its per-round ratios} for the PER_ROUND ratios whose loops were timed."""
    return {
        key: measure.ratios(groups[group], top, bottom)
        for key, (group, top, bottom) in PER_ROUND.items()
        if group in groups and {top, bottom} <= set(groups[group])
    }


def figures(groups: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    """Return every epoch time and the ratios notebook 01 and the benchmark report (those whose loops were timed).

    A per-round ratio comes with its 95 % interval (`key_ci_low`, `key_ci_high`). `dataloader_workers_over_numpy`
    is a single run: the ratio of the medians of two groups (the workers' loop takes seconds per epoch).
    """
    ms = {k: measure.median(v) * 1e3 for k, v in epochs(groups).items()}
    found = {f"ms_per_epoch_{k}": v for k, v in ms.items()}
    for key, ratios in per_round(groups).items():
        found |= measure.interval_figures(key, ratios)
    if {"dataloader_workers", "numpy"} <= set(ms):
        found["dataloader_workers_over_numpy"] = ms["dataloader_workers"] / ms["numpy"]
    return found


def measure_loops(
    num_samples: int,
    batch_size: int,
    num_workers: int,
    rounds: int,
    slow_rounds: int,
    pair_rounds: int,
    slide: Mapping[str, Any],
    with_tf: bool = True,
) -> tuple[BenchResult, dict[str, list[float]]]:
    """Time every loop of the slide and the extra ones over `num_samples` indices.

    `slide` gives the slide's code by name (`SLIDE`; notebook 01 passes its cells' objects, so an edit to a cell is
    what is timed; every name given). Return the table and figures, and
    {figure: per-round ratios} (for `measure.verdict`). Explained in notebooks/01_the_question.ipynb.
    """
    found = slide_loops(num_samples, batch_size, num_workers, slide, with_tf)
    groups, batches = time_loops(found, rounds, slow_rounds, pair_rounds)
    knobs = {
        "samples": num_samples,
        "batch_size": batch_size,
        "num_workers": num_workers,
        "rounds": rounds,
        "rounds_taken": len(groups["vectorised"]["numpy"]),
        "slow_rounds": slow_rounds,
        "pair_rounds": pair_rounds,
        "tf_data": "tf_data" in found,
        "torch_threads": torch.get_num_threads(),
    }
    result = BenchResult(table(epochs(groups), num_samples, batches), figures(groups), knobs=knobs, repeats=rounds)
    return result, per_round(groups)
