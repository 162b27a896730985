"""Moving the slide's nested xs to a device, timed and checked.

The helpers' move_to vs pytree, optree, dm-tree, tensordict, torch.save and JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch

from .. import config, measure
from ..load.move import move_to
from ..teach import slide_moves
from ..teach.slide_code import slide_move_to, slide_xs
from ..tree import is_tensor_collection
from . import BenchResult

LEAF_SIDES = {"small": 8, "large": 224}  # image side of the slide's xs: tiny leaves show pure overhead
HELPERS = "move_to (helpers)"  # the row every other way is compared with
CUDA_MB = 64  # host-to-GPU copies on a CUDA target: large enough to show bandwidth, not latency
WAYS: dict[str, Callable[[Any, torch.device], Any]] = {
    HELPERS: move_to,
    "slide move_to (fixed)": slide_move_to,
    "torch pytree tree_map": slide_moves.pytree_move,
    "optree.tree_map": slide_moves.optree_move,
    "dm-tree map_structure": slide_moves.dm_tree_move,
    "TensorDict.from_dict(xs).to": slide_moves.tensordict_move,
    "torch.save + load(map_location)": slide_moves.torch_save_move,
}
# JAX's ways: two start from torch tensors (the conversion is part of the cost), two from JAX arrays made beforehand
JAX_FROM_TORCH: dict[str, Callable[[Any, Any], Any]] = {
    "torch -> numpy -> jax.device_put": slide_moves.jax_via_numpy,
    "torch -> dlpack -> jax.device_put": slide_moves.jax_via_dlpack,
}
JAX_FROM_JAX: dict[str, Callable[[Any, Any], Any]] = {
    "jax.device_put (JAX arrays in)": slide_moves.jax_device_put,
    "jax.tree_util.tree_map(jax.device_put)": slide_moves.jax_tree_map_device_put,
}


def per_call_seconds(
    fns: dict[str, Callable[[], Any]], rounds: int, block_s: float, device: torch.device | str | None = None
) -> dict[str, list[float]]:
    """Time each fn in interleaved rounds (measure.interleaved), each round a block of ~`block_s`; seconds per call.

    A call of a few microseconds is shorter than what one clock read resolves reliably, so each sample
    times a block of calls sized from calibration calls. The clock waits for `device` (a CUDA target's
    queued copies). Explained in notebooks/06_device_moves.ipynb.
    """
    calls = {name: max(1, int(block_s / max(_calibrate(fn, device), 1e-7))) for name, fn in fns.items()}
    return measure.per_call(fns, calls, repeat=rounds, warmup=1, device=device, shuffle=False)


def _calibrate(fn: Callable[[], Any], device: torch.device | str | None, calls: int = 3) -> float:
    """Return the median real seconds of `calls` calls of `fn` after one warm-up call.

    Real time, not `measure.measure`'s: it only sizes a block, so the warp (a test switch) must not change how
    long a block runs.
    """
    fn()
    seconds = []
    for _ in range(calls):
        measure.sync(device)
        start = measure.now()
        fn()
        measure.sync(device)
        seconds.append(measure.now() - start)
    return measure.median(seconds)


def methods() -> tuple[dict[str, Callable[[Any, torch.device], Any]], dict[str, str]]:
    """Return ({name: fn(xs, device)} of the ways to move nested data installed here, {name: why skipped}).

    Explained in notebooks/06_device_moves.ipynb.
    """
    found, skipped = dict(WAYS), {}
    if slide_moves.dm_tree is None:
        del found["dm-tree map_structure"]
        skipped["dm-tree map_structure"] = "dm-tree is not installed: pip install dm-tree"
    return found, skipped


def compare_ways(
    ways: dict[str, Callable[[Any, torch.device], Any]],
    sides: dict[str, int],
    rounds: int,
    block_ms: float,
    target: torch.device | str = "cpu",
    make_xs: Callable[[int], Any] = slide_xs,
) -> list[dict[str, Any]]:
    """Time each `way(xs, target)` on `make_xs(side)` at each leaf side, interleaved; check what each moved.

    One row per (leaves, way): µs per call (median over `rounds`), its ratio to the fastest way, and whether
    every tensor reached `target` (`correct`) and the meta device (`correct_meta`).
    Explained in notebooks/06_device_moves.ipynb.
    """
    target, rows = torch.device(target), []
    for leaves, side in sides.items():
        xs = make_xs(side)
        calls: dict[str, Callable[[], Any]] = {n: partial(f, xs, target) for n, f in ways.items()}
        samples = per_call_seconds(calls, rounds, block_ms / 1e3, target)
        median = {n: measure.median(s) for n, s in samples.items()}
        fastest = min(median.values())
        rows += [
            {
                "leaves": leaves,
                "method": name,
                "input": "torch tensors",
                "target": str(target),
                "us_per_call": median[name] * 1e6,
                "over_fastest": median[name] / fastest,
                "correct": check_moved(xs, fn(xs, target), target),
                "correct_meta": check_moved(xs, fn(xs, torch.device("meta")), "meta"),
            }
            for name, fn in ways.items()
        ]
    return rows


def compare_jax(
    from_torch: dict[str, Callable[[Any, Any], Any]],
    from_jax: dict[str, Callable[[Any, Any], Any]],
    sides: dict[str, int],
    rounds: int,
    block_ms: float,
    make_xs: Callable[[int], Any] = slide_xs,
    baseline: Callable[[Any, torch.device | str], Any] = move_to,
) -> list[dict[str, Any]]:
    """Time JAX's ways onto its default device, interleaved with `baseline` (`move_to`) to the CPU; [] without JAX.

    `from_torch` ways get `make_xs(side)` as torch tensors (the conversion is part of their cost), `from_jax`
    ways the same xs converted to JAX arrays beforehand. Each call waits for JAX's asynchronous dispatch.
    Explained in notebooks/06_device_moves.ipynb.
    """
    try:
        import jax
    except ImportError:
        return []
    device, rows = jax.devices()[0], []

    def waited(f: Callable[[Any, Any], Any], xs: Any) -> Callable[[], Any]:
        return lambda: jax.block_until_ready(f(xs, device))

    for leaves, side in sides.items():
        xs = make_xs(side)
        jax_xs = jax.device_put(jax.tree_util.tree_map(np.asarray, xs), device)
        calls = {n: waited(f, xs) for n, f in from_torch.items()}
        calls |= {n: waited(f, jax_xs) for n, f in from_jax.items()}
        samples = per_call_seconds(calls | {HELPERS: partial(baseline, xs, "cpu")}, rounds, block_ms / 1e3)
        rows += [
            {
                "leaves": leaves,
                "method": name,
                "input": "torch tensors" if name in from_torch else "JAX arrays",
                "us_per_call": measure.median(samples[name]) * 1e6,
                "over_move_to": measure.ratio(samples, name, HELPERS),
                "correct": check_jax(xs, call()),
            }
            for name, call in calls.items()
        ]
    return rows


def figures(rows: list[dict[str, Any]], jax_rows: list[dict[str, Any]]) -> dict[str, float]:
    """Return the figures notebook 06 and the benchmark report, from `compare_ways` and `compare_jax` rows."""
    found = {f"move_to_over_fastest_{r['leaves']}": r["over_fastest"] for r in rows if r["method"] == HELPERS}
    found["move_to_over_fastest"] = max(found.values())
    for r in jax_rows:
        if r["method"] == "jax.device_put (JAX arrays in)":
            found[f"jax_device_put_us_{r['leaves']}"] = r["us_per_call"]
        if r["method"] == "torch -> numpy -> jax.device_put":
            found[f"jax_via_numpy_over_move_to_{r['leaves']}"] = r["over_move_to"]
    if jax_rows:  # a yes/no figure: 1.0 when every JAX way moved every leaf with equal values
        found["jax_device_put_moves_all"] = float(all(r["correct"] == "ok" for r in jax_rows))
    return found


def run(scale: str) -> BenchResult:
    """Time every available way on the slide's xs with small and large leaves onto `config.device()`; check each.

    On a CUDA device the host-to-GPU copies (pageable, pinned, non_blocking) are timed too.
    """
    rounds, block_ms, target = (
        config.size("devices.rounds", scale),
        config.size("devices.block_ms", scale),
        config.device(),
    )
    found, skipped = methods()
    rows = compare_ways(found, LEAF_SIDES, rounds, block_ms, target)
    jax_rows = compare_jax(JAX_FROM_TORCH, JAX_FROM_JAX, LEAF_SIDES, rounds, block_ms)
    if not jax_rows:
        skipped |= dict.fromkeys([*JAX_FROM_TORCH, *JAX_FROM_JAX], "JAX is not installed: pip install jax")
    copy_rows, copy_found = cuda_copies(CUDA_MB * 2**20, rounds, target) if target.type == "cuda" else ([], {})
    knobs = {
        "rounds": rounds,
        "block_ms": block_ms,
        "target": str(target),
        "jax_baseline": "move_to to cpu",
        "cuda_mb": CUDA_MB if copy_rows else None,
        "skipped": skipped,
        "statistic": "median over interleaved rounds",
        "leaf_sides": LEAF_SIDES,
    }
    found_figures = figures(rows, jax_rows) | copy_found
    return BenchResult(rows + jax_rows + copy_rows, found_figures, knobs=knobs, repeats=rounds)


PAGEABLE, PINNED = "pageable .to()", "pinned .to()"  # the pair pinned_copy_speedup compares


def cuda_copies(
    nbytes: int, repeat: int = 10, device: torch.device | str = "cuda"
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Time host-to-GPU copies of `nbytes`, interleaved: pageable vs pinned, blocking or not, pinning each time.

    Return one row per way (median ms and GB/s) and the figures `copy_figures` takes from the rounds.
    Explained in notebooks/06_device_moves.ipynb.
    """
    dev = torch.device(device)
    pageable = torch.rand(nbytes // 4)
    pinned = pageable.pin_memory()
    ways = {
        PAGEABLE: partial(pageable.to, dev),
        "pageable .to(non_blocking=True)": partial(pageable.to, dev, non_blocking=True),
        PINNED: partial(pinned.to, dev),
        "pinned .to(non_blocking=True)": partial(pinned.to, dev, non_blocking=True),
        "pin_memory() then .to(non_blocking=True)": partial(_pin_then_copy, pageable, dev),
    }
    samples = measure.interleaved(ways, repeat=repeat, warmup=2, device=dev, shuffle=True)
    rows = []
    for name, seconds in samples.items():
        t = measure.median(seconds)
        rows.append(
            {"way": name, "target": str(dev), "mb": nbytes / 2**20, "ms": t * 1e3, "gb_per_s": nbytes / t / 1e9}
        )
    return rows, copy_figures(samples)


def _pin_then_copy(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    return t.pin_memory().to(device, non_blocking=True)


def copy_figures(samples: dict[str, list[float]]) -> dict[str, float]:
    """Return pinned_copy_speedup (pageable over pinned seconds, per round) with its 95 % interval.

    Explained in notebooks/06_device_moves.ipynb.
    """
    return measure.interval_figures("pinned_copy_speedup", measure.ratios(samples, PAGEABLE, PINNED))


def cuda_copy_rows(nbytes: int, repeat: int = 10) -> list[dict[str, Any]]:
    """Time host-to-GPU copies of `nbytes` (`cuda_copies`' rows); notebook 06 saves `cuda_copies`' figures too."""
    return cuda_copies(nbytes, repeat)[0]


def jax_shares_memory() -> dict[str, bool]:
    """Return {conversion: whether the JAX array still sees a later in-place write to the torch tensor}.

    Explained in notebooks/06_device_moves.ipynb.
    """
    import jax

    ways = {
        "np.asarray then jax.device_put": lambda t: jax.device_put(np.asarray(t)),
        "jax.dlpack.from_dlpack": jax.dlpack.from_dlpack,
        "jax.numpy.asarray(t.numpy())": lambda t: jax.numpy.asarray(t.numpy()),
    }
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


def check_moved(original: Any, moved: Any, device: torch.device | str) -> str:
    """Return "ok" if `moved` has `original`'s structure, every tensor on `device` and equal values.

    Otherwise return the first problem found. Values are compared only when `device` can be read back
    (not on the meta device).
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
