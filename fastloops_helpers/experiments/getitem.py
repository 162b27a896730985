"""The cost of `__getitem__`: µs per batch of per-sample fetches + stack vs one batched fetch, by batch size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..load import rows
from ..load.batch_loader import BatchLoader
from ..load.getitems import BatchRowDataset, RowDataset, SampleListDataset, collate_batch
from . import BenchResult
from .loops import iterate, time_epochs


def fetches(x: torch.Tensor, index: torch.Tensor) -> dict[str, Callable[[], Any]]:
    """Return {name: fetch the rows `index` of `x` once} for each way of fetching a batch."""
    items = index.tolist()
    return {
        "per_sample_stack": lambda: torch.stack([x[i] for i in items]),  # what DataLoader + default_collate do
        "per_sample_calls": lambda: [x[i] for i in items],               # the Python calls alone, no stack
        "batched_index": lambda: x[index],                               # the slide's one call
        "helpers_gather": lambda: rows.gather(x, index),                 # what BatchLoader uses
    }


def per_call_us(fn: Callable[[], Any], number: int, repeat: int | None = None) -> float:
    """Return the median µs of one call of `fn`, timing `number` calls per sample."""
    samples = measure.measure(lambda: [fn() for _ in range(number)], repeat=repeat, warmup=1)
    return float(np.median(samples)) / number * 1e6


def sweep(x: torch.Tensor, batch_sizes: list[int], seed: int = 0) -> list[dict[str, Any]]:
    """Return one row per (batch size, fetch): µs per batch and per sample, on random row indices."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for bs in measure.progress(batch_sizes, desc="batch sizes"):
        index = torch.randint(len(x), (bs,), generator=g)
        for name, fn in fetches(x, index).items():
            us = per_call_us(fn, number=max(3, config.size("getitem.samples") // bs))
            out.append({"batch_size": bs, "fetch": name, "us_per_batch": us, "us_per_sample": us / bs})
    return out


def dataloader_variants(data: Any, batch_size: int) -> dict[str, Callable[[], None]]:
    """Return {name: one shuffled epoch} for DataLoader per sample, with `__getitems__`, and BatchLoader."""
    def dl(dataset: Any, **kw: Any) -> Callable[[], None]:
        return iterate(DataLoader(dataset, batch_size=batch_size, shuffle=True, **kw))
    return {
        "DataLoader, per-sample __getitem__": dl(RowDataset(data)),
        "DataLoader, __getitems__ -> samples + default_collate": dl(SampleListDataset(data)),
        "DataLoader, __getitems__ + collate_batch": dl(BatchRowDataset(data), collate_fn=collate_batch),
        "BatchLoader": iterate(BatchLoader(data, batch_size, shuffle=True, seed=0)),
    }


def run() -> BenchResult:
    """Sweep batch sizes on a 1-D index tensor and a float matrix; report the slide's 100-item speed-up."""
    n, d = config.size("loops.samples"), config.size("getitem.features")
    found = []
    for kind, x in (("index", torch.arange(n)), ("matrix", torch.rand(n, d))):
        found += [dict(r, data=kind) for r in sweep(x, list(config.size("getitem.batch_sizes")))]
    us = {(r["data"], r["batch_size"], r["fetch"]): r["us_per_batch"] for r in found}
    figures = {"slide_100_per_sample_us": us["index", 100, "per_sample_stack"],
               "slide_100_batched_us": us["index", 100, "batched_index"],
               "slide_100_speedup": us["index", 100, "per_sample_stack"] / us["index", 100, "batched_index"]}
    return BenchResult(found, figures, knobs={"rows": n, "features": d}, repeats=config.size("repeat"))


def epoch_table(variants: dict[str, Callable[[], None]], repeat: int) -> list[dict[str, Any]]:
    """Time `repeat` epochs of each variant (after one warm-up) and return ms per epoch."""
    seconds = time_epochs(variants, repeat, desc="epochs")
    return [{"loader": k, "ms_per_epoch": float(np.median(v)) * 1e3} for k, v in seconds.items()]
