"""The training-loop pieces the experiments share: a training step, per-batch times as seed 003 takes them, their table.

Explained in notebooks/10_ffcv_otto.ipynb and notebooks/11_ffcv_cifar.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import torch
from torch import nn

from .. import measure
from ..load.move import move_to
from ..measure.steps import Blocks, block

SKIP = 2  # batches per epoch left out of step timings: worker start-up and pipeline fill (the seed skips 11)
Step = Callable[[torch.Tensor, torch.Tensor], Any]


def batch_times(
    loader: Iterable[Any],
    epochs: int,
    step: Step | None = None,
    skip: int = SKIP,
    device: torch.device | None = None,
    limit: int | None = None,
) -> list[float]:
    """Return the seconds of each batch (fetching it plus `step`), over `epochs` epochs.

    As in seed 003, consecutive batches are timed back to back, so the clock counts everything the loop waits
    for; the first batch's time includes making the epoch's iterator (worker start-up). Each epoch is one block
    of `measure.steps.block`, the harness's per-batch timer: its first `skip` batches are left out (0 keeps the
    whole epoch: the honest throughput), and it stops after `limit` timed batches (both rounded up to whole
    multiples of a DataLoader's workers). Explained in notebooks/10_ffcv_otto.ipynb.
    """
    blocks = Blocks(settle=skip, timed=limit)
    run = step or (lambda *batch: None)
    return [s for _ in range(epochs) for s in block("the loader", loader, run, blocks, device)[1]]


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device) -> Step:
    """Return a function that runs one training step (forward, loss, backward, optimizer step) on a batch."""
    loss_fn = nn.CrossEntropyLoss()

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        x, y = move_to((x, y), device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x.float()), y.flatten())
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def table(times: dict[str, list[float]], batch_size: int, baseline: str = "DataLoader") -> pd.DataFrame:
    """Summarise per-batch times as the seed does (mean, median, p95, uplift %) plus samples/s.

    Samples/s divides by the mean, not the median: a loader that gathers several batches at once and then
    hands out views has a tiny median and an occasional slow batch; only the mean counts both.
    """
    t = measure.summarize(times, baseline=baseline if baseline in times else None)
    t["samples_per_s"] = batch_size / t["mean"]
    return t
