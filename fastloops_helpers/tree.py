"""The one walker over nested batches: dicts (any mapping), lists, tuples, namedtuples, dataclasses, TensorDicts.

The loader, `move_to`, the prefetchers and the getitems Datasets all walk batches with it, so they accept the
same containers. A TensorDict or tensorclass is a leaf here: it already applies an operation to all its
tensors at once. Anything else that is iterable (a set, a deque, a generator) is refused with its path, since
rebuilding it could lose or reorder data. Explained in notebooks/06_device_moves.ipynb.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, cast

import torch

Tensor = torch.Tensor
# leaves passed to the function like any value; other iterables that are not containers here are refused
PLAIN_LEAVES = (str, bytes, bytearray, memoryview, range, torch.device, torch.dtype, torch.Size)


class LeafError(TypeError):
    """Raised by a leaf function about one leaf; `map_leaves` adds the leaf's path to the message."""

    def __init__(self, leaf: Any, message: str, container: bool = False) -> None:
        super().__init__(message)
        self.leaf, self.message, self.container = leaf, message, container


def is_tensor_collection(obj: Any) -> bool:
    """Return True for a TensorDict or tensorclass (without importing tensordict when nobody has)."""
    td = sys.modules.get("tensordict")  # if tensordict was never imported, obj cannot be one of its types
    return td is not None and td.is_tensor_collection(obj)


def map_leaves(fn: Callable[[Any], Any], obj: Any, where: str = "obj", refuse: str | None = None) -> Any:
    """Return `obj` rebuilt with the same container types and `fn(leaf)` at every leaf.

    An unsupported container, or a `LeafError` from `fn`, raises a TypeError naming the path (`where['k'][1]`);
    `refuse` rewords the first case (fields `{where}` and `{kind}`).
    """
    try:
        return _map(fn, obj)
    except LeafError as exc:
        path = _path_to(obj, exc.leaf, where) or where
        message = refuse if exc.container and refuse else exc.message
        raise TypeError(message.replace("{where}", path).replace("{kind}", type(exc.leaf).__name__)) from None


def leaves(obj: Any, where: str = "obj") -> list[tuple[str, Any]]:
    """Return (path, leaf) for every tensor or tensor collection in `obj`, in order."""
    kids = children(obj)
    if kids is None:
        return [(where, obj)] if isinstance(obj, Tensor) or is_tensor_collection(obj) else []
    return [leaf for key, child in kids for leaf in leaves(child, where + key)]


def tensors(obj: Any) -> list[Tensor]:
    """Return every tensor in `obj`, looking inside TensorDicts too."""
    return [
        tensor
        for _, leaf in leaves(obj)
        for tensor in (leaf.values(include_nested=True, leaves_only=True) if is_tensor_collection(leaf) else [leaf])
    ]


def batch_len(batch: Any) -> int:
    """Return the number of samples in a batch: the leading size of its first array-like leaf (else 1)."""
    try:
        kids = children(batch)
    except LeafError:  # a container we do not walk (a set, a deque): not a batch of rows
        kids = None
    if kids is None:
        shape = getattr(batch, "shape", getattr(batch, "batch_size", None))
        return int(shape[0]) if shape is not None and len(shape) > 0 else 0
    for _, child in kids:
        n = batch_len(child)
        if n:
            return n
    return 0


def children(obj: Any) -> list[tuple[str, Any]] | None:
    """Return (path suffix, child) for a container's children, or None for a leaf."""
    if isinstance(obj, Tensor) or is_tensor_collection(obj):
        return None
    if isinstance(obj, Mapping):
        return [(f"[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f".{f.name}", getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    if _is_unsupported(obj):
        raise LeafError(
            obj,
            "cannot walk a {kind} at {where}: use a dict, list, tuple, namedtuple, dataclass or TensorDict there",
            container=True,
        )
    return None


def _map(fn: Callable[[Any], Any], obj: Any) -> Any:
    # exact-type checks first: they are the common case and cost less than isinstance chains
    cls = type(obj)
    if cls is Tensor:
        return fn(obj)
    if cls is dict:
        return {k: _map(fn, v) for k, v in obj.items()}
    if cls is list:
        return [_map(fn, v) for v in obj]
    if cls is tuple:
        return tuple([_map(fn, v) for v in obj])
    return _map_other(fn, obj)


def _map_other(fn: Callable[[Any], Any], obj: Any) -> Any:
    if isinstance(obj, Tensor) or is_tensor_collection(obj):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*[_map(fn, v) for v in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)([_map(fn, v) for v in obj])
    if isinstance(obj, Mapping):
        return _rebuild_mapping(obj, {k: _map(fn, v) for k, v in obj.items()})
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        new = copy.copy(obj)
        for f in dataclasses.fields(obj):
            object.__setattr__(new, f.name, _map(fn, getattr(obj, f.name)))  # works when frozen too
        return new
    if _is_unsupported(obj):
        children(obj)  # raises the LeafError that names the container
    return fn(obj)


def _rebuild_mapping(original: Mapping[Any, Any], mapped: dict[Any, Any]) -> Mapping[Any, Any]:
    if isinstance(original, defaultdict):
        return defaultdict(original.default_factory, mapped)
    # most mapping types (dict, OrderedDict, MappingProxyType...) are built from a dict; the others raise below
    rebuild = cast("Callable[[dict[Any, Any]], Mapping[Any, Any]]", type(original))
    try:
        return rebuild(mapped)
    except TypeError as exc:
        raise TypeError(f"cannot rebuild a {type(original).__name__} from a dict: use a dict instead") from exc


def _is_unsupported(obj: Any) -> bool:
    return isinstance(obj, (set, frozenset)) or (
        hasattr(obj, "__iter__")
        and not isinstance(obj, PLAIN_LEAVES)
        and type(obj).__module__.split(".")[0] != "numpy"  # arrays are leaves
    )


def _path_to(obj: Any, target: Any, where: str) -> str | None:
    """Return the path of the object `target` (by identity) inside `obj`, or None."""
    if obj is target:
        return where
    try:
        kids = children(obj)
    except LeafError:
        return None
    for key, child in kids or ():
        found = _path_to(child, target, where + key)
        if found is not None:
            return found
    return None
