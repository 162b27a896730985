"""Gather throughput (GB/s delivered): shuffled batches of rows from a float32 matrix, per primitive and loader."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .. import config, measure
from ..load.batch_loader import BatchLoader
from . import BenchResult
from .loops import iterate, time_epochs


def per_batch(x: torch.Tensor, batch_size: int, fetch: Callable[[torch.Tensor], object],
              seed: int = 0) -> Callable[[], None]:
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


def epochs(x: torch.Tensor, batch_size: int, per_row: bool = True) -> dict[str, Callable[[], None]]:
    """Return {name: one shuffled epoch} for the helpers' loader and each primitive."""
    found = {"helpers": iterate(BatchLoader(x, batch_size, shuffle=True, seed=0))}
    for name, fetch in primitives(x).items():
        if per_row or name != "per_row_stack":
            found[name] = per_batch(x, batch_size, fetch)
    return found


def run() -> BenchResult:
    """Time shuffled epochs of the scale's matrix for each gather and report GB/s delivered."""
    n, d, bs = (config.size(f"gather.{k}") for k in ("rows", "features", "batch_size"))
    x = torch.rand(n, d, generator=torch.Generator().manual_seed(0))
    fast = epochs(x, bs, per_row=False)
    seconds = time_epochs(fast, config.size("gather.epochs"), desc="gather")
    seconds |= time_epochs({"per_row_stack": epochs(x, bs)["per_row_stack"]}, 1, warmup=0, desc="per row")
    rows = [{"gather": k, "ms_per_epoch": float(np.median(v)) * 1e3, "gb_per_s": x.nbytes / float(np.median(v)) / 1e9,
             "epochs": len(v)} for k, v in seconds.items()]
    rows.sort(key=lambda r: -r["gb_per_s"])
    gbps = {r["gather"]: r["gb_per_s"] for r in rows}
    figures = {"helpers_gb_per_s": gbps["helpers"]} | {f"{k}_gb_per_s": v for k, v in gbps.items() if k != "helpers"}
    knobs = {"rows": n, "features": d, "batch_size": bs, "dtype": "float32", "torch_threads": torch.get_num_threads()}
    return BenchResult(rows, figures, knobs=knobs, repeats=config.size("gather.epochs"))
