"""Datasets over row data for the stock DataLoader: per sample, and batched through `__getitems__`.

They live in the package (not in a notebook) so that DataLoader workers can import them under fork, spawn and
forkserver. Explained in notebooks/02_getitem_cost.ipynb.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

from ..tree import map_leaves
from . import rows


class RowDataset(Dataset):
    """The slide's per-sample `D` for any rows: `__getitem__` returns one row of `data` (tensor, array or dict of them).

    Explained in notebooks/02_getitem_cost.ipynb.
    """

    def __init__(self, data: Any) -> None:
        self.data = rows.to_tensors(data)
        self.length = rows.num_rows(self.data)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        return _index(self.data, index)


def _index(data: Any, index: Any) -> Any:
    batch = isinstance(index, torch.Tensor) and index.dim() == 1  # a batch: the fast gather, not advanced indexing
    return rows.take(data, index) if batch else map_leaves(lambda leaf: leaf[index], data)


class GetItemsMixin:
    """Give a Dataset whose `__getitem__` accepts an index tensor a batched `__getitems__`.

    DataLoader then makes one call per batch instead of `batch_size` calls; pair it with `collate_batch`,
    because DataLoader still passes what `__getitems__` returns to its `collate_fn`.
    Explained in notebooks/02_getitem_cost.ipynb.
    """

    def __getitems__(self, indices: Sequence[int]) -> Any:
        return self[torch.as_tensor(indices)]  # type: ignore[index]  # the Dataset it is mixed into has __getitem__


class BatchRowDataset(GetItemsMixin, RowDataset):
    """`RowDataset` that fetches a whole batch with one `__getitems__` call (the slide's `FD`).

    Explained in notebooks/02_getitem_cost.ipynb.
    """


class SampleListDataset(RowDataset):
    """`RowDataset` whose `__getitems__` gathers a batch at once but returns a list of samples (as the docs ask).

    `default_collate` then works, but still stacks the samples one by one.
    Explained in notebooks/02_getitem_cost.ipynb.
    """

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        return _samples(self[torch.as_tensor(indices)])


def _samples(batch: Any) -> list[Any]:
    return rows.unzip(map_leaves(lambda leaf: rows.Parts(list(leaf.unbind(0))), batch))


def collate_batch(batch: Any) -> Any:
    """Return an already-batched `__getitems__` result unchanged (DataLoader's collate_fn)."""
    return batch
