"""How well an order mixes the classes in each batch: notebook 04's measure of a shuffle, notebook 16's too.

The slide's grouped shuffle and FFCV's quasi-random order it compares live in notebook 04's cells; the production
order is `load.order.grouped_permutation`. Explained in notebooks/04_fast_shuffle.ipynb.
"""

from __future__ import annotations

import numpy as np
import torch


def batch_class_entropy(
    labels: np.ndarray | torch.Tensor, order: np.ndarray | torch.Tensor, batch_size: int, num_classes: int | None = None
) -> float:
    """Return the mean entropy (bits) of the class mix of the full batches that `order` makes.

    A well-shuffled order gives close to log2(num_classes) when batches are large; a batch drawn from
    one class gives 0. Explained in notebooks/04_fast_shuffle.ipynb.
    """
    labels = np.asarray(labels)
    order = np.asarray(order)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    num_batches = len(order) // batch_size
    if num_batches == 0:
        raise ValueError(f"order has {len(order)} items, fewer than one batch of {batch_size}")
    num_classes = int(labels.max()) + 1 if num_classes is None else num_classes
    batched = labels[order[: num_batches * batch_size]].reshape(num_batches, batch_size)
    offsets = (np.arange(num_batches) * num_classes)[:, None]
    counts = np.bincount((batched + offsets).ravel(), minlength=num_batches * num_classes)
    p = counts.reshape(num_batches, num_classes) / batch_size
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)
    return float(h.mean())
