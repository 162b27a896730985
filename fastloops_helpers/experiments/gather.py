"""Gather throughput (GB/s delivered): shuffled batches of rows from a float32 matrix, per primitive and loader.

Explained in notebooks/02_getitem_cost.ipynb. `compare()` computes the table and figures that notebook 02 shows
and `python -m fastloops_helpers.book.bench gather` saves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import config, measure
from ..load.batch_loader import BatchLoader
from . import BenchResult

CANDIDATES = ("np_take", "index_select")  # the two primitives BatchLoader chooses between on a CPU


def per_batch(
    x: torch.Tensor, batch_size: int, fetch: Callable[[torch.Tensor], object], seed: int = 0
) -> Callable[[], None]:
    """Return one epoch that draws a permutation and calls `fetch(indices)` once per batch."""
    g = torch.Generator().manual_seed(seed)

    def epoch() -> None:
        for index in torch.randperm(len(x), generator=g).split(batch_size):
            fetch(index)

    return epoch


def primitives(x: torch.Tensor) -> dict[str, Callable[[torch.Tensor], object]]:
    """Return {name: fetch(indices)} for the gather primitives torch and numpy offer."""
    xn = x.numpy()
    return {
        "index_select": lambda i: x.index_select(0, i),
        "advanced_indexing": lambda i: x[i],
        "np_take": lambda i: torch.from_numpy(np.take(xn, i.numpy(), axis=0)),
        "per_row_stack": lambda i: torch.stack([x[j] for j in i.tolist()]),
    }


def epochs(x: torch.Tensor, batch_size: int) -> dict[str, Callable[[], Any]]:
    """Return {name: one shuffled epoch} for the helpers' loader and each primitive."""
    found = {"helpers": measure.drain(BatchLoader(x, batch_size, shuffle=True, seed=0))}
    return found | {name: per_batch(x, batch_size, fetch) for name, fetch in primitives(x).items()}


def compare(n: int, features: int, batch_size: int, rounds: int) -> BenchResult:
    """Time shuffled epochs of an n x features float32 matrix per gather, interleaved; return GB/s and ratios.

    Explained in notebooks/02_getitem_cost.ipynb.
    """
    x = torch.rand(n, features, generator=torch.Generator().manual_seed(0))
    found = epochs(x, batch_size)
    slow = found.pop("per_row_stack")  # a Python call per row: one epoch, for scale
    seconds = measure.interleaved(found, rounds, warmup=1, desc="gather", shuffle=True)
    seconds |= measure.interleaved({"per_row_stack": slow}, 1, warmup=0, desc="per row")
    rows: list[dict[str, Any]] = [
        {
            "gather": k,
            "ms_per_epoch": measure.median(v) * 1e3,
            "p95_ms": measure.p95(v) * 1e3,
            "gb_per_s": x.nbytes / measure.median(v) / 1e9,
            "epochs": len(v),
        }
        for k, v in seconds.items()
    ]
    rows.sort(key=lambda r: -r["gb_per_s"])
    gbps = {r["gather"]: r["gb_per_s"] for r in rows}
    best = {"best": [min(pair) for pair in zip(*(seconds[k] for k in CANDIDATES))]}
    figures = {
        "helpers_gb_per_s": gbps["helpers"],
        "helpers_over_best_primitive": measure.ratio(seconds | best, "helpers", "best"),
    }
    figures |= {f"{k}_gb_per_s": v for k, v in gbps.items() if k != "helpers"}
    knobs = {
        "rows": n,
        "features": features,
        "batch_size": batch_size,
        "dtype": "float32",
        "rounds": rounds,
        "torch_threads": torch.get_num_threads(),
    }
    return BenchResult(rows, figures, knobs=knobs, repeats=rounds)


def run(scale: str) -> BenchResult:
    """Time shuffled epochs of `scale`'s matrix for each gather and report GB/s delivered."""
    return compare(*(config.size(f"gather.{k}", scale) for k in ("rows", "features", "batch_size", "rounds")))
