"""Moving the slide's nested xs to a device: helpers' move_to vs pytree, optree, dm-tree, tensordict, torch.save."""

from __future__ import annotations

import io

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import config, measure
from ..load.devices import move_to
from ..tree import is_tensor_collection
from ..teach.slides import slide_move_to, slide_xs
from . import BenchResult

LEAF_SIDES = {"small": 8, "large": 224}  # image side of the slide's xs: tiny leaves show pure overhead


def _block(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, block_s: float) -> dict[str, list[float]]:
    """Time each fn in turn, `rounds` times, so that machine noise hits all of them alike; seconds per call."""
    calls = {}
    for name, fn in fns.items():
        fn()  # warm-up
        calls[name] = max(1, int(block_s / max(_block(fn, 1), 1e-7)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(_block(fn, calls[name]))
    return samples


def cuda_copy_rows(nbytes: int, repeat: int = 10) -> list[dict[str, Any]]:
    """Time host-to-GPU copies of `nbytes`: pageable vs pinned, blocking vs non_blocking, pinning each time."""

    dev = torch.device("cuda")
    pageable = torch.rand(nbytes // 4)
    pinned = pageable.pin_memory()
    ways = {"pageable .to()": lambda: pageable.to(dev),
            "pageable .to(non_blocking=True)": lambda: pageable.to(dev, non_blocking=True),
            "pinned .to()": lambda: pinned.to(dev),
            "pinned .to(non_blocking=True)": lambda: pinned.to(dev, non_blocking=True),
            "pin_memory() then .to(non_blocking=True)": lambda: pageable.pin_memory().to(dev, non_blocking=True)}
    rows = []
    for name, fn in ways.items():
        t = float(np.median(measure.measure(fn, repeat=repeat, warmup=2, device=dev)))
        rows.append({"way": name, "mb": nbytes / 2**20, "ms": t * 1e3, "gb_per_s": nbytes / t / 1e9})
    return rows


def run() -> BenchResult:
    """Time every available method on the slide's xs with small and large leaves, CPU target; check each result."""
    found, skipped = methods()
    target = torch.device("cpu")
    rounds, block_s = config.size("devices.rounds"), config.size("devices.block_ms") / 1e3
    rows, figures = [], {}
    for leaves, side in LEAF_SIDES.items():
        xs = slide_xs(side)
        samples = interleaved({n: (lambda f=f: f(xs, target)) for n, f in found.items()}, rounds, block_s)
        median = {n: float(np.median(s)) for n, s in samples.items()}
        fastest = min(median.values())
        for name, fn in found.items():
            rows.append({"leaves": leaves, "method": name, "us_per_call": median[name] * 1e6,
                         "over_fastest": median[name] / fastest,
                         "correct_cpu": check_moved(xs, fn(xs, target), target),
                         "correct_meta": check_moved(xs, fn(xs, torch.device("meta")), "meta")})
        figures[f"move_to_over_fastest_{leaves}"] = median["move_to (helpers)"] / fastest
    figures["move_to_over_fastest"] = max(figures.values())
    knobs = {"rounds": rounds, "block_ms": block_s * 1e3, "target": str(target), "skipped": skipped,
             "statistic": "median over interleaved rounds", "leaf_sides": LEAF_SIDES}
    return BenchResult(rows, figures, knobs=knobs, repeats=rounds)


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
    if is_tensor_collection(moved):
        moved = moved.to_dict()
    want, want_spec = tree_flatten_with_path(original)
    got, got_spec = tree_flatten_with_path(moved)
    if want_spec != got_spec:
        return f"structure differs: {got_spec} instead of {want_spec}"
    for (path, a), (_, b) in zip(want, got):
        if not isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or type(b).__module__.startswith("jax"):
                continue
            return f"xs{keystr(path)} is a {type(b).__name__}, not a tensor"
        if b.device.type != device.type:
            return f"xs{keystr(path)} is on {b.device}, not on {device}"
        if device.type != "meta" and not torch.equal(a.cpu(), b.cpu()):
            return f"xs{keystr(path)} has different values"
    return "ok"
