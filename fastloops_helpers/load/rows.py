"""Count, gather and split the rows of tensors, arrays, memmaps, TensorDicts and nested dicts/tuples/lists of them.

The loader in `loaders` works on "row data": anything whose first dimension indexes samples. This module
holds the three operations it needs (how many rows, gather rows by an index tensor, cut a gathered chunk
into batches) and the choice of the gather primitive, which notebooks/02_getitem_cost.ipynb measures.

Explained in notebooks/02_getitem_cost.ipynb and notebooks/03_custom_loader.ipynb.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import numpy as np
import torch

from ..tree import LeafError, is_tensor_collection, leaves, map_leaves
from .order import one_thread

NOT_ROWS = (
    "{where} is a {kind}, which cannot be indexed by a batch of indices: pass a tensor, a numpy array or "
    "memmap, a TensorDict or tensorclass, a dict/tuple/list/namedtuple/dataclass of these, or a Dataset "
    "with __getitems__"
)

# Which gather a CPU tensor uses (notebooks/02_getitem_cost.ipynb measures all of them). On an idle 2-core
# machine torch's multithreaded `index_select` gathered matrix rows about 1.4x faster than numpy's single-threaded
# `take`; with one other busy process on the machine its threads waited for each other and it fell to a few % of
# np.take's speed. Advanced indexing `x[idx]` was the slowest everywhere. So by default ("measure") `BatchLoader`
# times both on the first chunks of every epoch and uses the faster; single calls and 1-D data use np.take.
CPU_GATHER = "measure"  # "measure", "numpy" (np.take), "index_select" or "advanced" (x[idx])
PROBED = ("numpy", "index_select")  # the candidates "measure" times


def to_tensors(data: Any, where: str = "data") -> Any:
    """Return `data` with every numpy array (memmaps included) wrapped as a tensor without a copy."""

    def wrap(leaf: Any) -> Any:
        if isinstance(leaf, np.ndarray):
            return _from_numpy(leaf)
        if isinstance(leaf, torch.Tensor) or is_tensor_collection(leaf):
            return leaf
        raise LeafError(leaf, NOT_ROWS)

    return map_leaves(wrap, data, where, refuse=NOT_ROWS)


def _from_numpy(array: np.ndarray) -> torch.Tensor:
    if array.ndim == 0:
        raise LeafError(array, "{where} is a 0-d array: it has no rows to batch; give it a first dimension")
    with warnings.catch_warnings():  # read-only memmaps: we only ever read, and gathers copy
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        try:
            return torch.from_numpy(array)
        except TypeError:
            raise LeafError(
                array,
                f"{{where}} has numpy dtype {array.dtype}, which torch cannot hold; convert it "
                "first (e.g. array.astype(np.float32), or encode strings as integer ids)",
            ) from None


def num_rows(data: Any) -> int:
    """Return the number of rows, checking that every field has the same number."""
    counts = {}
    for name, leaf in leaves(data, "data"):
        if isinstance(leaf, torch.Tensor) and leaf.dim() == 0:
            raise ValueError(f"{name} is a 0-d tensor: it has no rows to batch; give it a first dimension")
        counts[name] = leaf.shape[0] if isinstance(leaf, torch.Tensor) else int(leaf.batch_size[0])
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{k}: {v}" for k, v in counts.items())
        raise ValueError(f"fields have different numbers of rows ({listed}); every field needs one row per sample")
    return next(iter(counts.values()))


def device_of(data: Any) -> torch.device:
    """Return the device of the first field (where the loader builds its index order)."""
    leaf = leaves(data)[0][1]
    return leaf.device if leaf.device is not None else torch.device("cpu")


def gather(x: torch.Tensor, index: torch.Tensor, primitive: str | None = None) -> torch.Tensor:
    """Return the rows `index` of one tensor: with `primitive` (default: CPU_GATHER) on the CPU, else index_select."""
    if index.device != x.device:
        index = index.to(x.device)
    if x.device.type != "cpu":
        return x.index_select(0, index)
    primitive = primitive or (CPU_GATHER if CPU_GATHER != "measure" else "numpy")
    if primitive == "numpy" and x.dim() == 1:
        # one value per row: np.take would first cast the int32 epoch order to intp (an extra pass over the
        # index); index_select takes it as it is, and on one thread it does not wait for a busy core
        with one_thread():
            return x.index_select(0, index)
    if primitive == "numpy" and not x.requires_grad and x.dtype != torch.bfloat16:
        return torch.from_numpy(np.take(x.numpy(), index.numpy(), axis=0))
    return x[index] if primitive == "advanced" else x.index_select(0, index)


def take(data: Any, index: torch.Tensor, primitive: str | None = None) -> Any:
    """Return the rows `index` of every field, keeping the structure (dict, tuple, list, TensorDict, ...)."""
    if isinstance(data, torch.Tensor):
        return gather(data, index, primitive)
    if _plain_tensors(data):
        return type(data)(gather(x, index, primitive) for x in data)
    return map_leaves(lambda leaf: _take_leaf(leaf, index, primitive), data)


def _take_leaf(leaf: Any, index: torch.Tensor, primitive: str | None) -> Any:
    if is_tensor_collection(leaf):
        return leaf.apply(lambda x: gather(x, index, primitive), batch_size=[len(index)])
    return gather(leaf, index, primitive)


def split(data: Any, batch_size: int) -> list[Any]:
    """Cut every field into consecutive batches of `batch_size` rows (views, no copy)."""
    if isinstance(data, torch.Tensor):
        return _split_tensor(data, batch_size)
    if _plain_tensors(data):
        return [type(data)(batch) for batch in zip(*(_split_tensor(x, batch_size) for x in data))]
    return unzip(map_leaves(lambda leaf: Parts(_split_leaf(leaf, batch_size)), data))


def _plain_tensors(data: Any) -> bool:
    # the common (X, y) case: skipping the structure walker saves tens of µs of Python per batch
    return type(data) in (tuple, list) and all(type(x) is torch.Tensor for x in data)


class Parts:
    """The pieces of one leaf: a leaf to the walker (not a list), so `unzip` can deal them out."""

    __slots__ = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items


def unzip(parts: Any) -> list[Any]:
    """Turn a structure whose leaves are `Parts` of equal length into a list of structures."""
    counts: list[int] = []
    map_leaves(lambda p: counts.append(len(p.items)) if isinstance(p, Parts) else None, parts)
    return [map_leaves(partial(_part, i), parts) for i in range(min(counts, default=0))]


def _part(i: int, leaf: Any) -> Any:
    return leaf.items[i] if isinstance(leaf, Parts) else leaf


def _split_leaf(leaf: Any, batch_size: int) -> list[Any]:
    return list(leaf.split(batch_size)) if is_tensor_collection(leaf) else _split_tensor(leaf, batch_size)


def _split_tensor(x: torch.Tensor, batch_size: int) -> list[torch.Tensor]:
    # unbind of a (batches, batch_size, ...) view makes the views in one C++ loop: measured several times
    # cheaper than Tensor.split on a busy machine, the same on an idle one
    if x.shape[0] <= batch_size:  # a chunk of one batch: the chunk itself (a view costs ~20 µs of dispatch)
        return [x]
    full = x.shape[0] // batch_size
    out = list(x[: full * batch_size].view(full, batch_size, *x.shape[1:]).unbind(0)) if full else []
    if x.shape[0] > full * batch_size:
        out.append(x[full * batch_size :])
    return out


def narrow(data: Any, start: int, length: int) -> Any:
    """Return rows `start:start+length` of every field as views."""
    return map_leaves(lambda leaf: leaf[start : start + length], data)


def row_nbytes(data: Any) -> int:
    """Return the bytes of one row summed over the fields."""
    total = 0
    for _, leaf in leaves(data):
        rows = leaf.shape[0] if isinstance(leaf, torch.Tensor) else int(leaf.batch_size[0])
        size = leaf.numel() * leaf.element_size() if isinstance(leaf, torch.Tensor) else leaf.bytes()
        total += size // rows if rows else 0
    return total
