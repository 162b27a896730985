"""The `__getitem__` slides' own code: the per-sample `D` and batched `FD` Datasets, and the two fetches the slide
times (100 single fetches stacked, one batched fetch).

Teaching replicas: the production versions are `load.getitems` (the Datasets) and `load.rows.gather` (the fetch).
Notebook 02 shows this code in `#@save` cells and times the cells' definitions. Explained in
notebooks/02_getitem_cost.ipynb.
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset


class D(Dataset):
    """The slide's per-sample Dataset: DataLoader calls `__getitem__` once per index of a batch."""

    def __init__(self, data):
        self.data = data

    def __getitem__(self, idx):
        return self.data[idx]

    def __len__(self):
        return len(self.data)


class FD(D):
    """The slide's batched Dataset: DataLoader calls `__getitems__` once per batch with the list of its indices."""

    def __getitems__(self, idxs):
        return self[idxs]


def per_sample_fetch(x: torch.Tensor, items: list[int]) -> torch.Tensor:
    """The slide's slow fetch: one `x[i]` call per index, then a stack (what `default_collate` does)."""
    return torch.stack([x[i] for i in items])


def batched_fetch(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The slide's fast fetch: one indexing call with a tensor of indices."""
    return x[index]
