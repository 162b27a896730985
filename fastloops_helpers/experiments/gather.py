"""Gather throughput (GB/s delivered): shuffled batches of rows from a float32 matrix, per primitive and loader.

Explained in notebooks/02_getitem_cost.ipynb. `compare()` computes the table and figures that notebook 02 shows
and `python -m fastloops_helpers.book.bench gather` saves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import torch

from .. import measure
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


def index_select(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """torch's row gather; on the CPU it splits the rows across torch's threads."""
    return x.index_select(0, index)


def advanced_indexing(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The general path: any index shapes, broadcasting."""
    return x[index]


def np_take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """numpy's row gather, on one thread, over the tensor's own memory (no copy in, none out)."""
    return torch.from_numpy(np.take(x.numpy(), index.numpy(), axis=0))


def per_row_stack(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """A Python call per row, then a stack: the per-sample path, for scale."""
    return torch.stack([x[j] for j in index.tolist()])


Gather = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# the gathers torch and numpy offer (notebook 02 defines them in a `#@save` cell and passes its own)
PRIMITIVES: dict[str, Gather] = {
    "index_select": index_select,
    "advanced_indexing": advanced_indexing,
    "np_take": np_take,
    "per_row_stack": per_row_stack,
}


def epochs(
    x: torch.Tensor, batch_size: int, primitives: Mapping[str, Gather] = PRIMITIVES
) -> dict[str, Callable[[], Any]]:
    """Return {name: one shuffled epoch} for the helpers' loader and each primitive `fetch(x, indices)`."""
    found = {"helpers": measure.drain(BatchLoader(x, batch_size, shuffle=True, seed=0))}
    return found | {name: per_batch(x, batch_size, partial(fetch, x)) for name, fetch in primitives.items()}


def compare(
    n: int, features: int, batch_size: int, rounds: int, primitives: Mapping[str, Gather] = PRIMITIVES
) -> BenchResult:
    """Time shuffled epochs of an n x features float32 matrix per gather, interleaved; return GB/s and ratios.

    `primitives` are the gathers timed beside the helpers' loader ({name: fetch(x, indices)}; notebook 02 passes
    the ones its cell defines). Explained in notebooks/02_getitem_cost.ipynb.
    """
    x = torch.rand(n, features, generator=torch.Generator().manual_seed(0))
    found = epochs(x, batch_size, primitives)
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
        # the medians behind that ratio: the loader's epoch, and the faster candidate's epoch of each round
        "helpers_epoch_ms": measure.median(seconds["helpers"]) * 1e3,
        "best_primitive_epoch_ms": measure.median(best["best"]) * 1e3,
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
