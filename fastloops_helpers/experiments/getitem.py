"""The cost of `__getitem__`: µs per batch of per-sample fetches + stack vs one batched fetch, by batch size.

Explained in notebooks/02_getitem_cost.ipynb. `slide_example()` computes the slide's 100-item figures that
notebook 02 shows and `python -m fastloops_helpers.book.bench getitem` saves. The fetches timed are the slide's
(`teach.slide_getitem.per_sample_fetch`, `batched_fetch`) unless the caller passes its own, as the notebook does with
the ones its cells define.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader

from .. import measure
from ..load import rows
from ..load.batch_loader import BatchLoader
from ..load.getitems import BatchRowDataset, RowDataset, SampleListDataset, collate_batch
from ..teach.slide_getitem import batched_fetch, per_sample_fetch
from . import BenchResult

Fetch = Callable[[torch.Tensor, Any], torch.Tensor]


def fetches(
    x: torch.Tensor, index: torch.Tensor, per_sample: Fetch = per_sample_fetch, batched: Fetch = batched_fetch
) -> dict[str, Callable[[], Any]]:
    """Return {name: fetch the rows `index` of `x` once} for each way of fetching a batch."""
    items = index.tolist()
    return {
        "per_sample_stack": lambda: per_sample(x, items),  # what DataLoader + default_collate do
        "per_sample_calls": lambda: [x[i] for i in items],  # the Python calls alone, no stack
        "batched_index": lambda: batched(x, index),  # the slide's one call
        "helpers_gather": lambda: rows.gather(x, index),  # what BatchLoader uses
    }


def slide_example(
    n: int, repeat: int | None = None, per_sample: Fetch = per_sample_fetch, batched: Fetch = batched_fetch
) -> dict[str, float]:
    """Time the slide's example on `torch.arange(n)`: 100 single fetches stacked vs one batched fetch of 100.

    Returns µs per batch of each and their ratio (median over interleaved rounds). Explained in
    notebooks/02_getitem_cost.ipynb.
    """
    x, index = torch.arange(n), torch.arange(100)
    both = {"per_sample": lambda: per_sample(x, range(100)), "batched": lambda: batched(x, index)}
    seconds = measure.per_call(both, repeat=repeat, block_s=0.01)
    return {
        "slide_100_per_sample_us": measure.median(seconds["per_sample"]) * 1e6,
        "slide_100_batched_us": measure.median(seconds["batched"]) * 1e6,
        "slide_100_speedup": measure.ratio(seconds, "per_sample", "batched"),
    }


def sweep(
    x: torch.Tensor,
    batch_sizes: list[int],
    seed: int = 0,
    repeat: int | None = None,
    per_sample: Fetch = per_sample_fetch,
    batched: Fetch = batched_fetch,
) -> list[dict[str, Any]]:
    """Return one row per (batch size, fetch): µs per batch and per sample, on random row indices."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for bs in measure.progress(batch_sizes, desc="batch sizes"):
        index = torch.randint(len(x), (bs,), generator=g)
        seconds = measure.per_call(fetches(x, index, per_sample, batched), repeat=repeat)
        for name, values in seconds.items():
            us = measure.median(values) * 1e6
            out.append({"batch_size": bs, "fetch": name, "us_per_batch": us, "us_per_sample": us / bs})
    return out


def dataloader_variants(data: Any, batch_size: int) -> dict[str, Callable[[], Any]]:
    """Return {name: one shuffled epoch} for DataLoader per sample, with `__getitems__`, and BatchLoader."""

    def dl(dataset: Any, **kw: Any) -> Callable[[], Any]:
        return measure.drain(DataLoader(dataset, batch_size=batch_size, shuffle=True, **kw))

    return {
        "DataLoader, per-sample __getitem__": dl(RowDataset(data)),
        "DataLoader, __getitems__ -> samples + default_collate": dl(SampleListDataset(data)),
        "DataLoader, __getitems__ + collate_batch": dl(BatchRowDataset(data), collate_fn=collate_batch),
        "BatchLoader": measure.drain(BatchLoader(data, batch_size, shuffle=True, seed=0)),
    }


def epoch_table(variants: dict[str, Callable[[], Any]], repeat: int) -> list[dict[str, Any]]:
    """Time `repeat` interleaved epochs of each variant (after one warm-up); return ms per epoch (median)."""
    seconds = measure.interleaved(variants, repeat, warmup=1, desc="epochs")
    return [{"loader": k, "ms_per_epoch": measure.median(v) * 1e3} for k, v in seconds.items()]


def compare(n: int, features: int, batch_sizes: list[int], repeat: int) -> BenchResult:
    """Time the slide's example, then sweep `batch_sizes` on a 1-D index tensor of `n` and an n x features matrix."""
    figures = slide_example(n, repeat)
    found = []
    for kind, x in (("index", torch.arange(n)), ("matrix", torch.rand(n, features))):
        found += [dict(r, data=kind) for r in sweep(x, batch_sizes, repeat=repeat)]
    knobs = {"rows": n, "features": features, "batch_sizes": batch_sizes}
    return BenchResult(found, figures, knobs=knobs, repeats=repeat)
