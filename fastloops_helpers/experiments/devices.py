"""Moving the slide's nested xs to a device: helpers' move_to vs pytree, optree, dm-tree, tensordict, torch.save, JAX."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import config, measure
from ..load.move import move_to
from ..tree import is_tensor_collection
from ..teach.slide_code import slide_move_to, slide_xs
from . import BenchResult

LEAF_SIDES = {"small": 8, "large": 224}  # image side of the slide's xs: tiny leaves show pure overhead


def _repeated(fn: Callable[[], Any], calls: int) -> Callable[[], None]:
    def block() -> None:
        for _ in range(calls):
            fn()
    return block


def per_call_seconds(fns: dict[str, Callable[[], Any]], rounds: int, block_s: float) -> dict[str, list[float]]:
    """Time each fn in interleaved rounds (measure.interleaved), each round a block of ~`block_s`; seconds per call.

    A call of a few microseconds is shorter than what one clock read resolves reliably, so each sample
    times a block of calls sized from one calibration call. Explained in notebooks/06_device_moves.ipynb.
    """
    calls = {name: max(1, int(block_s / max(measure.median(measure.measure(fn, repeat=3, warmup=1)), 1e-7)))
             for name, fn in fns.items()}
    blocks = {name: _repeated(fn, calls[name]) for name, fn in fns.items()}
    samples = measure.interleaved(blocks, repeat=rounds, warmup=1)
    return {name: [s / calls[name] for s in values] for name, values in samples.items()}


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
        t = measure.median(measure.measure(fn, repeat=repeat, warmup=2, device=dev))
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
        fns = {n: (lambda f=f: f(xs, target)) for n, f in found.items()}
        jax_fns, jax_skipped = jax_methods(xs)
        skipped.update(jax_skipped)
        samples = per_call_seconds({**fns, **jax_fns}, rounds, block_s)
        median = {n: measure.median(s) for n, s in samples.items()}
        fastest = min(median[n] for n in found)
        for name, fn in found.items():
            rows.append({"leaves": leaves, "method": name, "input": "torch tensors", "us_per_call": median[name] * 1e6,
                         "over_fastest": median[name] / fastest,
                         "correct_cpu": check_moved(xs, fn(xs, target), target),
                         "correct_meta": check_moved(xs, fn(xs, torch.device("meta")), "meta")})
        for name, fn in jax_fns.items():
            rows.append({"leaves": leaves, "method": name, "input": JAX_INPUT[name], "us_per_call": median[name] * 1e6,
                         "over_fastest": median[name] / fastest, "correct_cpu": check_jax(xs, fn()),
                         "correct_meta": "n/a (JAX has no meta device)"})
        figures[f"move_to_over_fastest_{leaves}"] = median["move_to (helpers)"] / fastest
        if jax_fns:
            figures[f"jax_device_put_us_{leaves}"] = median["jax.device_put (JAX arrays in)"] * 1e6
            figures[f"jax_via_numpy_over_move_to_{leaves}"] = median["torch -> numpy -> jax.device_put"] / median["move_to (helpers)"]
    figures["move_to_over_fastest"] = max(v for k, v in figures.items() if k.startswith("move_to_over_fastest_"))
    knobs = {"rounds": rounds, "block_ms": block_s * 1e3, "target": str(target), "skipped": skipped,
             "statistic": "median over interleaved rounds", "leaf_sides": LEAF_SIDES}
    return BenchResult(rows, figures, knobs=knobs, repeats=rounds)


# what each JAX row starts from: torch tensors (the conversion is part of the cost) or JAX arrays already
JAX_INPUT = {"torch -> numpy -> jax.device_put": "torch tensors", "torch -> dlpack -> jax.device_put": "torch tensors",
             "jax.device_put (JAX arrays in)": "JAX arrays", "jax.tree_util.tree_map(jax.device_put)": "JAX arrays"}


def jax_methods(xs: Any) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """Return ({name: fn()} moving `xs` to JAX's default device four ways, {name: why skipped}) .

    Two rows start from torch tensors and include the conversion (through numpy, through DLPack, whose array
    stays where the tensor was until `device_put` moves it); two
    start from JAX arrays converted once beforehand, which is what `jax.device_put` alone costs.
    Explained in notebooks/06_device_moves.ipynb.
    """
    try:
        import jax
    except ImportError:
        return {}, {name: "JAX is not installed (pip install 'fastloops-helpers[jax]')" for name in JAX_INPUT}
    device = jax.devices()[0]
    tree_map = jax.tree_util.tree_map
    as_jax = tree_map(np.asarray, xs)
    as_jax = jax.device_put(as_jax, device)
    ready = jax.block_until_ready  # JAX dispatches asynchronously: time the work, not only its launch
    return {"torch -> numpy -> jax.device_put": lambda: ready(jax.device_put(tree_map(np.asarray, xs), device)),
            "torch -> dlpack -> jax.device_put": lambda: ready(jax.device_put(tree_map(jax.dlpack.from_dlpack, xs), device)),
            "jax.device_put (JAX arrays in)": lambda: ready(jax.device_put(as_jax, device)),
            "jax.tree_util.tree_map(jax.device_put)": lambda: ready(tree_map(lambda a: jax.device_put(a, device),
                                                                             as_jax))}, {}


def jax_shares_memory() -> dict[str, bool]:
    """Return {conversion: whether the JAX array still sees a later in-place write to the torch tensor}.

    Explained in notebooks/06_device_moves.ipynb.
    """
    import jax

    ways = {"np.asarray then jax.device_put": lambda t: jax.device_put(np.asarray(t)),
            "jax.dlpack.from_dlpack": jax.dlpack.from_dlpack,
            "jax.numpy.asarray(t.numpy())": lambda t: jax.numpy.asarray(t.numpy())}
    shared = {}
    for name, convert in ways.items():
        t = torch.zeros(1024)
        converted = convert(t)
        t[0] = 1.0  # JAX assumes its arrays never change: an aliasing conversion breaks that promise
        shared[name] = bool(np.asarray(converted)[0] == 1.0)
    return shared


def check_jax(original: Any, moved: Any) -> str:
    """Return "ok" if `moved` has `original`'s structure with JAX arrays of equal values on JAX's default device.

    Explained in notebooks/06_device_moves.ipynb.
    """
    import jax

    pairs = _leaves_by_path(original, moved)
    if isinstance(pairs, str):
        return pairs
    want, got = pairs
    for path, a in want.items():
        b = got[path]
        if not isinstance(b, jax.Array):
            return f"xs{path} is a {type(b).__name__}, not a JAX array"
        if b.devices() != {jax.devices()[0]}:
            return f"xs{path} is on {b.devices()}, not on {jax.devices()[0]}"
        if not np.array_equal(np.asarray(b), a.numpy()):
            return f"xs{path} has different values"
    return "ok"


def _leaves_by_path(original: Any, moved: Any) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """Return both trees' leaves keyed by path, or how their structures differ (JAX rebuilds dicts sorted)."""
    from torch.utils._pytree import keystr, tree_flatten_with_path

    want = {keystr(path): leaf for path, leaf in tree_flatten_with_path(original)[0]}
    got = {keystr(path): leaf for path, leaf in tree_flatten_with_path(moved)[0]}
    if want.keys() != got.keys():
        return f"structure differs: leaves {sorted(got)} instead of {sorted(want)}"
    return want, got


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


def check_moved(original: Any, moved: Any, device: torch.device | str) -> str:
    """Return "ok" if `moved` has `original`'s structure, every tensor on `device` and equal values, else the first problem.

    Values are compared only when `device` can be read back (not on the meta device).
    Explained in notebooks/06_device_moves.ipynb.
    """
    device = torch.device(device)
    if is_tensor_collection(moved):
        moved = moved.to_dict()
    pairs = _leaves_by_path(original, moved)
    if isinstance(pairs, str):
        return pairs
    want, got = pairs
    for path, a in want.items():
        b = got[path]
        if not isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                continue
            return f"xs{path} is a {type(b).__name__}, not a tensor"
        if b.device.type != device.type:
            return f"xs{path} is on {b.device}, not on {device}"
        if device.type != "meta" and not torch.equal(a.cpu(), b.cpu()):
            return f"xs{path} has different values"
    return "ok"
