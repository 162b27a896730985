"""Count, gather and split the rows of tensors, arrays, memmaps, TensorDicts and nested dicts/tuples/lists of them.

The loader in `loaders` works on "row data": anything whose first dimension indexes samples. This module
holds the three operations it needs (how many rows, gather rows by an index tensor, cut a gathered chunk
into batches) and the choice of the gather primitive, which notebooks/02_getitem_cost.ipynb measures.

Explained in notebooks/02_getitem_cost.ipynb and notebooks/03_custom_loader.ipynb.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

try:
    from tensordict import is_tensor_collection
except ImportError:  # tensordict is a dependency, but the loader must not need it for plain tensors
    def is_tensor_collection(obj: Any) -> bool:  # type: ignore[misc]
        return False

# Which gather a CPU tensor uses (notebooks/02_getitem_cost.ipynb measures all of them). On an idle 2-core
# machine torch's multithreaded `index_select` gathered matrix rows about 1.4x faster than numpy's single-threaded
# `take`; with one other busy process on the machine its threads waited for each other and it fell to a few % of
# np.take's speed. Advanced indexing `x[idx]` was the slowest everywhere. So by default ("measure") `BatchLoader`
# times both on the first chunks of every epoch and uses the faster; single calls and 1-D data use np.take.
CPU_GATHER = "measure"  # "measure", "numpy" (np.take), "index_select" or "advanced" (x[idx])
PROBED = ("numpy", "index_select")  # the candidates "measure" times


def to_tensors(data: Any, where: str = "data") -> Any:
    """Return `data` with every numpy array (memmaps included) wrapped as a tensor without a copy."""
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return data
    if isinstance(data, np.ndarray):
        return _from_numpy(data, where)
    if isinstance(data, Mapping):
        return {k: to_tensors(v, f"{where}[{k!r}]") for k, v in data.items()}
    if isinstance(data, (tuple, list)) and data:
        items = [to_tensors(v, f"{where}[{i}]") for i, v in enumerate(data)]
        return tuple(items) if isinstance(data, tuple) else items
    raise TypeError(
        f"{where} is a {type(data).__name__}, which cannot be indexed by a batch of indices: pass a tensor, a "
        "numpy array or memmap, a TensorDict or tensorclass, a dict/tuple/list of these, or a Dataset with "
        "__getitems__"
    )


def _from_numpy(array: np.ndarray, where: str) -> torch.Tensor:
    if array.ndim == 0:
        raise TypeError(f"{where} is a 0-d array: it has no rows to batch; give it a first dimension")
    with warnings.catch_warnings():  # read-only memmaps: we only ever read, and gathers copy
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        try:
            return torch.from_numpy(array)
        except TypeError as exc:
            raise TypeError(
                f"{where} has numpy dtype {array.dtype}, which torch cannot hold; convert it first "
                "(e.g. array.astype(np.float32), or encode strings as integer ids)"
            ) from exc


def leaves(data: Any, where: str = "data") -> list[tuple[str, Any]]:
    """Return (name, leaf) for every tensor or tensor collection in a nested dict/tuple/list."""
    if isinstance(data, Mapping):
        return [leaf for k, v in data.items() for leaf in leaves(v, f"{where}[{k!r}]")]
    if isinstance(data, (tuple, list)):
        return [leaf for i, v in enumerate(data) for leaf in leaves(v, f"{where}[{i}]")]
    return [(where, data)]


def num_rows(data: Any) -> int:
    """Return the number of rows, checking that every field has the same number."""
    counts = {}
    for name, leaf in leaves(data):
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
    """Return the rows `index` of one tensor with `primitive` (default: CPU_GATHER) on the CPU, index_select elsewhere."""
    if index.device != x.device:
        index = index.to(x.device)
    if x.device.type != "cpu":
        return x.index_select(0, index)
    primitive = primitive or (CPU_GATHER if CPU_GATHER != "measure" else "numpy")
    if primitive == "numpy" and not x.requires_grad and x.dtype != torch.bfloat16:
        return torch.from_numpy(np.take(x.numpy(), index.numpy(), axis=0))
    if primitive == "advanced":
        return x[index]
    return x.index_select(0, index)


def take(data: Any, index: torch.Tensor, primitive: str | None = None) -> Any:
    """Return the rows `index` of every field, keeping the structure (dict, tuple, list, TensorDict)."""
    if isinstance(data, torch.Tensor):
        return gather(data, index, primitive)
    if is_tensor_collection(data):
        return data.apply(lambda x: gather(x, index, primitive), batch_size=[len(index)])
    if isinstance(data, Mapping):
        return {k: take(v, index, primitive) for k, v in data.items()}
    return type(data)(take(v, index, primitive) for v in data)


def split(data: Any, batch_size: int) -> list[Any]:
    """Cut every field into consecutive batches of `batch_size` rows (views, no copy)."""
    if isinstance(data, torch.Tensor):
        return _split_tensor(data, batch_size)
    if is_tensor_collection(data):
        return list(data.split(batch_size))
    if isinstance(data, Mapping):
        parts = {k: split(v, batch_size) for k, v in data.items()}
        return [dict(zip(parts, batch)) for batch in zip(*parts.values())]
    parts = [split(v, batch_size) for v in data]
    return [type(data)(batch) for batch in zip(*parts)]


def _split_tensor(x: torch.Tensor, batch_size: int) -> list[torch.Tensor]:
    # unbind of a (batches, batch_size, ...) view makes the views in one C++ loop: measured several times
    # cheaper than Tensor.split on a busy machine, the same on an idle one
    full = x.shape[0] // batch_size
    out = list(x[:full * batch_size].view(full, batch_size, *x.shape[1:]).unbind(0)) if full else []
    if x.shape[0] > full * batch_size:
        out.append(x[full * batch_size:])
    return out


def narrow(data: Any, start: int, length: int) -> Any:
    """Return rows `start:start+length` of every field as views."""
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return data[start:start + length]
    if isinstance(data, Mapping):
        return {k: narrow(v, start, length) for k, v in data.items()}
    return type(data)(narrow(v, start, length) for v in data)


def row_nbytes(data: Any) -> int:
    """Return the bytes of one row summed over the fields."""
    total = 0
    for _, leaf in leaves(data):
        rows = leaf.shape[0] if isinstance(leaf, torch.Tensor) else int(leaf.batch_size[0])
        size = leaf.numel() * leaf.element_size() if isinstance(leaf, torch.Tensor) else leaf.bytes()
        total += size // rows if rows else 0
    return total
