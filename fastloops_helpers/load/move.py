"""Move nested structures of tensors (dicts, lists, tuples, namedtuples, dataclasses, TensorDicts) to a device.

Explained in notebooks/06_device_moves.ipynb.
"""

from __future__ import annotations

from typing import Any

import torch

from ..tree import is_tensor_collection, map_leaves

Tensor = torch.Tensor


def move_to(obj: Any, device: torch.device | str, non_blocking: bool = False) -> Any:
    """Return a copy of `obj` with every tensor moved to `device`, keeping the containers' types.

    Handles dicts (and other mappings), lists, tuples, namedtuples, dataclasses, TensorDicts and
    tensorclasses (the containers of `load.tree`); non-tensor leaves (numbers, strings, None, numpy arrays)
    are passed through unchanged. An unsupported container (a set, a deque, a generator, ...) raises a
    TypeError that names its path, e.g. `obj['pim'][1]`. Explained in notebooks/06_device_moves.ipynb.
    """
    device = torch.device(device)

    def move(leaf: Any) -> Any:
        if type(leaf) is Tensor:  # the keyword costs argument parsing on every leaf: pass it only when set
            return leaf.to(device, non_blocking=True) if non_blocking else leaf.to(device)
        if isinstance(leaf, Tensor) or is_tensor_collection(leaf):  # subclasses, e.g. nn.Parameter
            return leaf.to(device, non_blocking=non_blocking)
        return leaf

    try:
        return map_leaves(move, obj)
    except TypeError as exc:
        raise TypeError(f"move_to: {exc}") from None
