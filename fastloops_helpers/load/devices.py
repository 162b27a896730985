"""Move nested structures of tensors (dicts, lists, tuples, dataclasses, TensorDicts) to a device.

Explained in notebooks/06_device_moves.ipynb.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import torch

Tensor = torch.Tensor
# leaves that are passed through unchanged; any other iterable we do not know is refused
_PLAIN_LEAVES = (str, bytes, bytearray, memoryview, range, torch.device, torch.dtype, torch.Size)
_REFUSED = (set, frozenset)


def move_to(obj: Any, device: torch.device | str, non_blocking: bool = False) -> Any:
    """Return a copy of `obj` with every tensor moved to `device`, keeping the containers' types.

    Handles dicts (and other mappings), lists, tuples, namedtuples, dataclasses, TensorDicts and
    tensorclasses; non-tensor leaves (numbers, strings, None, numpy arrays, ...) are passed through
    unchanged. An unsupported container (a set, a deque, a generator, ...) raises a TypeError that names
    its path, e.g. `obj['pim'][1]`. Explained in notebooks/06_device_moves.ipynb.
    """
    device = torch.device(device)
    try:
        return _move(obj, device, non_blocking)
    except _Unsupported:
        path, bad = _find_unsupported(obj, "obj")
        raise TypeError(f"move_to cannot move a {type(bad).__name__} at {path}: use a dict, list, tuple, "
                        f"namedtuple, dataclass or TensorDict there") from None


class _Unsupported(Exception):
    """Raised deep in the walk; move_to then walks again to name the path (a slow path only on error)."""


def _move(obj: Any, device: torch.device, nb: bool) -> Any:
    # exact-type checks first: they are the common case and cost less than isinstance chains
    cls = type(obj)
    if cls is Tensor:  # the keyword costs argument parsing on every leaf: pass it only when it is set
        return obj.to(device, non_blocking=True) if nb else obj.to(device)
    if cls is dict:
        return {k: _move(v, device, nb) for k, v in obj.items()}
    if cls is list:
        return [_move(v, device, nb) for v in obj]
    if cls is tuple:
        return tuple([_move(v, device, nb) for v in obj])
    return _move_other(obj, device, nb)


def _move_other(obj: Any, device: torch.device, nb: bool) -> Any:
    if isinstance(obj, Tensor):  # subclasses, e.g. nn.Parameter
        return obj.to(device, non_blocking=nb)
    if _is_tensor_collection(obj):
        return obj.to(device, non_blocking=nb)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*[_move(v, device, nb) for v in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)([_move(v, device, nb) for v in obj])
    if isinstance(obj, Mapping):
        return _rebuild_mapping(obj, {k: _move(v, device, nb) for k, v in obj.items()})
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        new = copy.copy(obj)
        for f in dataclasses.fields(obj):
            object.__setattr__(new, f.name, _move(getattr(obj, f.name), device, nb))  # works when frozen too
        return new
    if _is_unsupported(obj):
        raise _Unsupported
    return obj


def _rebuild_mapping(original: Mapping, moved: dict) -> Mapping:
    if isinstance(original, defaultdict):
        return defaultdict(original.default_factory, moved)
    try:
        return type(original)(moved)
    except TypeError as exc:
        raise TypeError(f"cannot rebuild a {type(original).__name__} from a dict: give move_to a dict") from exc


def _is_tensor_collection(obj: Any) -> bool:
    td = sys.modules.get("tensordict")  # if tensordict was never imported, obj cannot be one of its types
    return td is not None and td.is_tensor_collection(obj)


def _is_unsupported(obj: Any) -> bool:
    if isinstance(obj, _REFUSED):
        return True
    return hasattr(obj, "__iter__") and not isinstance(obj, _PLAIN_LEAVES) and not _is_array_like(obj)


def _is_array_like(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "numpy"


def _children(obj: Any) -> list[tuple[str, Any]] | None:
    if isinstance(obj, Mapping):
        return [(f"[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f".{f.name}", getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    return None  # not a container


def _find_unsupported(obj: Any, path: str) -> tuple[str, Any]:
    """Return (path, object) of the first unsupported container under `obj`."""
    if isinstance(obj, Tensor) or _is_tensor_collection(obj):
        return "", None
    children = _children(obj)
    if children is None:
        return (path, obj) if _is_unsupported(obj) else ("", None)
    for key, child in children:
        found = _find_unsupported(child, path + key)
        if found[1] is not None:
            return found
    return "", None
