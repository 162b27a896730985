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


def slide_move_to(obj: Any, device: torch.device | str) -> Any:
    """Move tensors in dicts, lists and tuples to `device`: the slide's function, fixed (reference for 06).

    Explained in notebooks/06_device_moves.ipynb.
    """
    if torch.is_tensor(obj):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: slide_move_to(v, device) for k, v in obj.items()}
    if isinstance(obj, list):
        return [slide_move_to(v, device) for v in obj]
    if isinstance(obj, tuple):
        return tuple(slide_move_to(v, device) for v in obj)
    raise TypeError(f"slide_move_to cannot move a {type(obj).__name__}: only tensors, dicts, lists and tuples")


def slide_xs(side: int = 224, seed: int = 0) -> dict[str, Any]:
    """Return the slide's nested `xs` (images of `side` x `side`), seeded.

    Explained in notebooks/06_device_moves.ipynb.
    """
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    return {"im": {"label": rand(1, side, side), "image": rand(3, side, side)},
            "cim": rand(3, side, side), "pim": [rand(3, side, side), rand(3, side, side)]}


def _via_torch_save(obj: Any, device: torch.device) -> Any:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, map_location=device, weights_only=True)


def methods() -> tuple[dict[str, Callable[[Any, torch.device], Any]], dict[str, str]]:
    """Return ({name: fn(obj, device)} of the ways to move nested data here, {name: why skipped}).

    Explained in notebooks/06_device_moves.ipynb.
    """
    from torch.utils._pytree import tree_map

    found: dict[str, Callable[[Any, torch.device], Any]] = {
        "move_to (helpers)": move_to,
        "slide move_to (fixed)": slide_move_to,
        "torch pytree tree_map": lambda xs, d: tree_map(lambda x: x.to(d), xs),
    }
    skipped: dict[str, str] = {}
    _add_optional(found, skipped)
    found["torch.save + load(map_location)"] = _via_torch_save
    return found, skipped


def _add_optional(found: dict, skipped: dict) -> None:
    try:
        import optree
        found["optree.tree_map"] = lambda xs, d: optree.tree_map(lambda x: x.to(d), xs)
    except ImportError:
        skipped["optree.tree_map"] = "optree is not installed: pip install optree"
    try:
        import tree as dm_tree
        found["dm-tree map_structure"] = lambda xs, d: dm_tree.map_structure(lambda x: x.to(d), xs)
    except ImportError:
        skipped["dm-tree map_structure"] = "dm-tree is not installed: pip install dm-tree"
    try:
        from tensordict import TensorDict
        found["TensorDict.from_dict(xs).to"] = lambda xs, d: TensorDict.from_dict(xs).to(d)
    except ImportError:
        skipped["TensorDict.from_dict(xs).to"] = "tensordict is not installed: pip install tensordict"
    try:
        import jax
        import numpy as np
        # JAX takes its own arrays, not torch tensors: the conversion is part of the cost, and the result
        # holds JAX arrays on JAX's default device (the `device` argument is not a JAX device)
        found["jax.device_put"] = lambda xs, d: jax.device_put(jax.tree_util.tree_map(np.asarray, xs))
    except ImportError:
        skipped["jax.device_put"] = "JAX is not installed (pip install jax): skipped"


def check_moved(original: Any, moved: Any, device: torch.device | str) -> str:
    """Return "ok" if `moved` has `original`'s structure, every tensor on `device` and equal values, else the first problem.

    Values are compared only when `device` can be read back (not on the meta device).
    Explained in notebooks/06_device_moves.ipynb.
    """
    from torch.utils._pytree import keystr, tree_flatten_with_path

    device = torch.device(device)
    if _is_tensor_collection(moved):
        moved = moved.to_dict()
    want, want_spec = tree_flatten_with_path(original)
    got, got_spec = tree_flatten_with_path(moved)
    if want_spec != got_spec:
        return f"structure differs: {got_spec} instead of {want_spec}"
    for (path, a), (_, b) in zip(want, got):
        if not isinstance(b, Tensor):
            if not isinstance(a, Tensor) or type(b).__module__.startswith("jax"):
                continue
            return f"xs{keystr(path)} is a {type(b).__name__}, not a tensor"
        if b.device.type != device.type:
            return f"xs{keystr(path)} is on {b.device}, not on {device}"
        if device.type != "meta" and not torch.equal(a.cpu(), b.cpu()):
            return f"xs{keystr(path)} has different values"
    return "ok"
