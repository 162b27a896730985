# %% [markdown] slideshow={"slide_type": "slide"}
# # 06 · Moving nested data to a device
#
# | | |
# |---|---|
# | **Question** | How do you move a dict of lists/tuples/dicts of tensors to a device, which way is correct and which is fastest, and when do pinned memory and `non_blocking` help? |
# | **Seeds** | 000/001 "Other tips": *To Devices Problem*, *General Solution*, *PyTree*, *Tensordict*, *optree*, *IO*, *JAX*; 002: `pin_memory` and `non_blocking` |
# | **GPU** | optional: every way is timed onto `config.device()` (the GPU when torch sees one); the pinned-memory section runs only on a CUDA target and says so otherwise |
# | **Optional** | tensordict, optree, dm-tree, jax: each library's way of moving a nest is skipped without it |
# | **Run time** | <!-- run-time --> workshop ~14 s (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# A batch is rarely one tensor: images, labels, masks and metadata arrive as a nested structure. The slide
# lists six ways to move such a structure to a device. This notebook checks that each one really moves every
# tensor, times them on the same structure, compares them with `fastloops_helpers.move_to`, and measures what
# JAX's `device_put` costs when the data starts as torch tensors. Every way is shown in a cell before it is timed.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import collections
import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import pandas as pd
import torch

from fastloops_helpers import config, measure, tree
from fastloops_book import claims
from fastloops_book.source import show_code
from fastloops_helpers.experiments import bandwidth
from fastloops_helpers.load.move import move_to
from fastloops_helpers.measure import plots

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
sides = {"small": 8, "large": 224}          # image sides of xs: 8 shows the per-call overhead alone, 224 is the slide's
rounds = config.size("devices.rounds")      # interleaved timing rounds per way: more narrows the medians, costs time
block_ms = config.size("devices.block_ms")  # each round times a block of calls this long: longer beats clock resolution
device = config.device()                    # the target, the loop's device: FASTLOOPS_DEVICE, else CUDA if present
cuda_mb = 64                                # pinned-memory section's buffer: larger shows bandwidth, smaller latency

# %% [markdown] slideshow={"slide_type": "-"}
# The slide's nested `xs`: a dict holding a dict, a tensor and a list of tensors (seeded, and with a side of our
# choosing, so that small leaves can show the fixed costs):

# %% slideshow={"slide_type": "-"}
def slide_xs(side: int = 224, seed: int = 0) -> dict[str, Any]:
    """Return the slide's nested `xs` (images of `side` x `side`), seeded."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    return {"im": {"label": rand(1, side, side), "image": rand(3, side, side)},
            "cim": rand(3, side, side), "pim": [rand(3, side, side), rand(3, side, side)]}


# %% slideshow={"slide_type": "-"}
xs = slide_xs(sides["large"])
print({k: (tuple(v.shape) if torch.is_tensor(v) else type(v).__name__) for k, v in xs.items()})

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. The slide's hand-written `move_to`, fixed
#
# The slide's function has a stray colon after `return obj.to(device)` (a syntax error), and it raises on
# tuples, which is what a DataLoader's default collate gives for `(image, label)` pairs. Here it is with both
# fixed:

# %% slideshow={"slide_type": "subslide"}
def slide_move_to(obj: Any, device: torch.device | str) -> Any:
    """Move tensors in dicts, lists and tuples to `device`: the slide's function, fixed."""
    if torch.is_tensor(obj):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: slide_move_to(v, device) for k, v in obj.items()}
    if isinstance(obj, list):
        return [slide_move_to(v, device) for v in obj]
    if isinstance(obj, tuple):
        return tuple(slide_move_to(v, device) for v in obj)
    raise TypeError(f"slide_move_to cannot move a {type(obj).__name__}: only tensors, dicts, lists and tuples")


# a tuple is walked too, and anything else is refused with what it was
assert slide_move_to((torch.ones(1), [torch.ones(1)]), "meta")[1][0].is_meta
try:
    slide_move_to({"n": 3}, "cpu")
    raise AssertionError("an int was let through")
except TypeError as e:
    assert "only tensors, dicts, lists and tuples" in str(e)


# %% [markdown] slideshow={"slide_type": "subslide"}
# We check correctness on the **meta** device: it exists on every machine, holds shapes but no data, and a
# tensor that was not moved stays visibly on the CPU. `check_moved` pairs the leaves of the original and the moved
# structure by their path, then checks the structure, the device of every tensor and (on a real device) the
# values, and returns the first problem it finds:

# %% slideshow={"slide_type": "-"}
from torch.utils._pytree import keystr, tree_flatten_with_path


def leaves_by_path(original: Any, moved: Any) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """Return both trees' leaves keyed by path, or how their structures differ (JAX rebuilds dicts sorted)."""
    want = {keystr(path): leaf for path, leaf in tree_flatten_with_path(original)[0]}
    got = {keystr(path): leaf for path, leaf in tree_flatten_with_path(moved)[0]}
    if want.keys() != got.keys():
        return f"structure differs: leaves {sorted(got)} instead of {sorted(want)}"
    return want, got


# %% slideshow={"slide_type": "subslide"}
def check_moved(original: Any, moved: Any, device: torch.device | str) -> str:
    """Return "ok" if `moved` has `original`'s structure, every tensor on `device` and equal values."""
    device = torch.device(device)
    pairs = leaves_by_path(original, moved.to_dict() if tree.is_tensor_collection(moved) else moved)
    if isinstance(pairs, str):
        return pairs
    want, got = pairs
    for path, a in want.items():
        b = got[path]
        if not isinstance(b, torch.Tensor):
            if isinstance(a, torch.Tensor):
                return f"xs{path} is a {type(b).__name__}, not a tensor"
        elif b.device.type != device.type:
            return f"xs{path} is on {b.device}, not on {device}"
        elif device.type != "meta" and not torch.equal(a.cpu(), b.cpu()):  # meta holds no values to compare
            return f"xs{path} has different values"
    return "ok"


# %% slideshow={"slide_type": "-"}
# the check can fail: a changed value and a missing leaf are reported
assert check_moved(xs, {**xs, "cim": xs["cim"] + 1}, "cpu") == "xs['cim'] has different values"
assert check_moved(xs, {"cim": xs["cim"]}, "cpu").startswith("structure differs")

# %% slideshow={"slide_type": "subslide"}
moved = slide_move_to(xs, "meta")
print(check_moved(xs, moved, "meta"))

# %% [markdown] slideshow={"slide_type": "-"}
# The slide's function moves the slide's `xs`. It still has limits: a namedtuple comes back as a plain tuple, a
# dataclass or an `int` in the batch raises, and the error does not say *where* in the structure the problem is. The
# helpers' `move_to` (the one `fastloops_helpers` exports, and the one its prefetchers call) moves each tensor it
# meets and hands the walk to `tree.map_leaves`:

# %% slideshow={"slide_type": "subslide"}
show_code(move_to)

# %% [markdown] slideshow={"slide_type": "-"}
# The walker checks exact types first (a plain dict, list, tuple or tensor, which is all the slide's `xs` holds),
# and only then the slower `isinstance` tests for namedtuples, other mappings, dataclasses and TensorDicts:

# %% slideshow={"slide_type": "subslide"}
show_code(tree._map)  # the walker inside map_leaves, which move_to, the loaders and the prefetchers share

# %% [markdown] slideshow={"slide_type": "-"}
# So `move_to` handles dicts and other mappings, lists, tuples, namedtuples, dataclasses (frozen too),
# TensorDicts and tensorclasses, passes other leaves through, and names the path of what it cannot move:

# %% slideshow={"slide_type": "subslide"}
Pair = collections.namedtuple("Pair", "image label")


@dataclasses.dataclass
class Sample:
    pair: Pair
    index: int


batch = {"xs": xs, "sample": Sample(Pair(torch.ones(2), torch.zeros(1)), index=7)}
out = move_to(batch, "meta")
print(type(out["sample"]).__name__, type(out["sample"].pair).__name__, out["sample"].index, out["sample"].pair.image.device)
try:
    move_to({"xs": xs, "tags": [torch.ones(1), {"cat", "dog"}]}, "meta")
except TypeError as err:
    print(err)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Do all of the slide's ways really move everything?
#
# The slide's other ways are one-liners around a library: a tree map from torch's own [pytree](https://github.com/pytorch/pytorch/blob/main/torch/utils/_pytree.py), from [optree](https://github.com/metaopt/optree) or from
# DeepMind's [dm-tree](https://github.com/google-deepmind/tree), a TensorDict built from the dict, and a round trip through `torch.save` and
# `torch.load(map_location=...)` in memory. (The slide's list of libraries announces "three common
# structures" and then names four: torch's pytree, tensordict, dm-tree and optree; all four are here, dm-tree
# when it is installed.) Each one, as a function of `(xs, device)`:

# %% slideshow={"slide_type": "subslide"}
# the slide's one-liners, each a function of (xs, device); dm-tree is optional
import io

import optree
from tensordict import TensorDict
from torch.utils._pytree import tree_map

try:
    import tree as dm_tree  # optional: pip install dm-tree
except ImportError:
    dm_tree = None


def pytree_move(xs: Any, device: torch.device | str) -> Any:
    return tree_map(lambda x: x.to(device), xs)


def optree_move(xs: Any, device: torch.device | str) -> Any:
    return optree.tree_map(lambda x: x.to(device), xs)


def dm_tree_move(xs: Any, device: torch.device | str) -> Any:
    return dm_tree.map_structure(lambda x: x.to(device), xs)


def tensordict_move(xs: Any, device: torch.device | str) -> Any:
    return TensorDict.from_dict(xs).to(device)


def torch_save_move(xs: Any, device: torch.device | str) -> Any:
    temp = io.BytesIO()
    torch.save(xs, temp)
    temp.seek(0)
    return torch.load(temp, map_location=device, weights_only=True)


# %% [markdown] slideshow={"slide_type": "subslide"}
# With the two hand-written functions of section 1, these are the ways this notebook times:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
ways = {"move_to (helpers)": move_to, "slide move_to (fixed)": slide_move_to, "torch pytree tree_map": pytree_move,
        "optree.tree_map": optree_move, "dm-tree map_structure": dm_tree_move,
        "TensorDict.from_dict(xs).to": tensordict_move, "torch.save + load(map_location)": torch_save_move}
if dm_tree is None:
    del ways["dm-tree map_structure"]
    print("skipped dm-tree map_structure: dm-tree is not installed (pip install dm-tree)")
print(f"{len(ways)} ways to move xs")

# %% [markdown] slideshow={"slide_type": "-"}
# **Prediction:** the tree-mapping libraries (`torch.utils._pytree`, optree, dm-tree) and `torch.load` with
# `map_location` know dicts and lists, so they move every tensor. `TensorDict.from_dict` is built for
# dicts of tensors; a list of tensors is not a tensor field, so it may be kept as a non-tensor value.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
checks = pd.DataFrame({"moved correctly (meta)": {name: check_moved(xs, way(xs, torch.device("meta")), "meta")
                                                  for name, way in ways.items()}})
assert checks.loc["move_to (helpers)"].item() == "ok"
assert checks.loc["TensorDict.from_dict(xs).to"].item().startswith("xs['pim']")  # the list stays behind
assert (checks["moved correctly (meta)"].drop("TensorDict.from_dict(xs).to") == "ok").all()  # the others move all
checks


# %% [markdown] slideshow={"slide_type": "-"}
# TensorDict stores the list `pim` as a non-tensor stack, and `.to(device)` leaves its tensors where they were:
# code written against it must turn lists into stacked tensors (or a nested TensorDict) first. JAX's
# `device_put` (the slide's last option) works on JAX arrays, not torch tensors, so it gets its own section (4).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. How long does each take?
#
# **Prediction.** On a CPU target, `.to("cpu")` returns the tensor itself, so every method's time is pure
# Python overhead: walking the structure and calling `.to` five times. A plain recursive function does
# little besides that, optree walks in C++ but calls back into Python per leaf, torch's pytree and dm-tree
# build and rebuild tree specifications, TensorDict builds a new object with checks. `torch.save` +
# `torch.load` is different: it serialises every byte into a buffer and reads it back into new tensors, two
# copies of the data. The large `xs` holds 13 planes of 224 x 224 float32 (one 1-channel and four 3-channel
# images), 13 x 224 x 224 x 4 B = 2.6 MB, so with copies at `r` GB/s (counting read and write, as notebook 00
# does) two copies add 2 x 2 x 2.6 MB / `r` on top of what the small leaves cost.
#
# On a GPU target every way also copies every byte to the device: 2.6 MB from pageable memory over the host link
# (section 5 measures its rate) adds the same time to each way that moves everything, so at large leaves the copy
# can be most of the cost and the ways bunch together, while the small leaves still show the walking.
# (A meta target holds no bytes: nothing is copied there, as on the CPU.)
#
# `compare_ways` times the `ways` above onto `target` (here `device`, the defaults' target) on `slide_xs(side)`
# for each leaf side in `sides`, in `rounds` interleaved rounds (so that a busy machine slows them alike), each
# round a block of calls lasting about `block_ms`; it also checks what each way moved. A way that leaves a tensor
# behind gives a wrong answer, so it is listed and marked but never the fastest: each way's time is divided by the
# fastest way that moved every tensor.

# %% [markdown] slideshow={"slide_type": "subslide"}
# A call of a few microseconds is shorter than what one clock read resolves reliably, so each sample times a block
# of calls. The block is sized from calibration calls after a warm-up, in real time: the test suite's clock warp
# must not change how long a block runs. The clock waits for `device` (a CUDA target's queued copies).

# %% slideshow={"slide_type": "-"}
def calibrate(fn: Callable[[], Any], device: torch.device | str | None, calls: int = 3) -> float:
    """Return the median real seconds of `calls` calls of `fn` after one warm-up call."""
    fn()
    seconds = []
    for _ in range(calls):
        measure.sync(device)
        start = measure.now()
        fn()
        measure.sync(device)
        seconds.append(measure.now() - start)
    return measure.median(seconds)


# %% slideshow={"slide_type": "subslide"}
def per_call_seconds(fns: dict[str, Callable[[], Any]], rounds: int, block_s: float,
                     device: torch.device | str | None = None) -> dict[str, list[float]]:
    """Time each fn in interleaved rounds, each round a block of about `block_s`; return seconds per call."""
    calls = {name: max(1, int(block_s / max(calibrate(fn, device), 1e-7))) for name, fn in fns.items()}
    return measure.per_call(fns, calls, repeat=rounds, warmup=1, device=device, shuffle=False)


# %% [markdown] slideshow={"slide_type": "-"}
# `compare_ways` gives one row per leaf size and way: µs per call (the median over rounds), what `check_moved` says
# of the way's result on the target and on the meta device (on a CPU target a tensor left behind is still "on the
# target": meta shows it), and `over_fastest`. `over_fastest` marks the ways that moved every tensor, checked
# by code from those two verdicts, and divides each time by the fastest of them:

# %% slideshow={"slide_type": "subslide"}
def compare_ways(ways: dict[str, Callable[[Any, torch.device], Any]], sides: dict[str, int], rounds: int,
                 block_ms: float, target: torch.device | str, make_xs=slide_xs) -> list[dict[str, Any]]:
    """Time each `way(xs, target)` on `make_xs(side)` at each leaf side, interleaved; check what each moved."""
    target, rows = torch.device(target), []
    for leaves, side in sides.items():
        xs = make_xs(side)
        samples = per_call_seconds({n: partial(f, xs, target) for n, f in ways.items()}, rounds, block_ms / 1e3, target)
        rows += [{"leaves": leaves, "method": name, "input": "torch tensors", "target": str(target),
                  "us_per_call": measure.median(samples[name]) * 1e6,
                  "correct": check_moved(xs, fn(xs, target), target),
                  "correct_meta": check_moved(xs, fn(xs, torch.device("meta")), "meta")} for name, fn in ways.items()]
    return over_fastest(rows)


def over_fastest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark the rows that moved every tensor; divide each row's time by the fastest such row at its leaf size."""
    for r in rows:  # on the target and on meta, where a tensor left on the CPU shows
        r["moved_every_tensor"] = r["correct"] == "ok" and r["correct_meta"] == "ok"
    fastest = {}
    for r in rows:
        if r["moved_every_tensor"]:
            fastest[r["leaves"]] = min(fastest.get(r["leaves"], float("inf")), r["us_per_call"])
    return [r | {"over_fastest": r["us_per_call"] / fastest[r["leaves"]]} for r in rows]



# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
rows = compare_ways(ways, sides, rounds, block_ms, device, make_xs=slide_xs)
assert [(r["leaves"], r["method"]) for r in rows] == [(s, m) for s in sides for m in ways]
missed = set(checks.index[checks["moved correctly (meta)"] != "ok"])  # section 2's verdicts, on meta
assert {r["method"] for r in rows if not r["moved_every_tensor"]} == missed  # the target's rows agree
table = pd.DataFrame(rows)
per_call = table.pivot(index="method", columns="leaves", values="us_per_call")
per_call["moved every tensor"] = table.groupby("method")["moved_every_tensor"].all()
print(f"target: {device}")
per_call.round(1).sort_values("large")


# %% slideshow={"slide_type": "subslide"}
def walker_figures(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Return move_to's ratio to the fastest way at each leaf size, and the largest of them."""
    found = {f"move_to_over_fastest_{r['leaves']}": r["over_fastest"]
             for r in rows if r["method"] == "move_to (helpers)"}
    return found | {"move_to_over_fastest": max(found.values())}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
large = table[table.leaves == "large"].assign(  # a wrong way stays in the plot, marked
    method=lambda t: t.method.where(t.moved_every_tensor, t.method + " (misses tensors)"))
fig = plots.bars(large.sort_values("us_per_call"), "us_per_call", "method", baseline="move_to (helpers)", log=True,
                 unit="µs per call, log scale", title=f"Moving the slide's xs to {device} (ratio to move_to)")
fig.axes[0].set_xlabel("time per call (µs, log scale)")
plots.save(fig, "06_device_moves-methods")
print("fastest to slowest (large leaves):", " < ".join(large.sort_values("us_per_call").method))
print(f"move_to over the fastest way that moved every tensor: {walker_figures(rows)['move_to_over_fastest']:.2f}x")


# %% [markdown] slideshow={"slide_type": "subslide"}
# Now the prediction for `torch.save`, with this machine's copy rate for a buffer of the size of `xs` (notebook
# 00's measurement, repeated here with its `numpy_copy`: numpy's single-threaded copy, the kind
# `torch.save` and `torch.load` do):

# %% slideshow={"slide_type": "-"}
show_code(bandwidth.numpy_copy)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
xs_bytes = sum(t.numel() * t.element_size() for t in [xs["cim"], *xs["pim"], *xs["im"].values()])
rate = bandwidth.copy_bandwidth(xs_bytes, "numpy", repeat=rounds)  # GB/s, read + write; one thread, as torch.save
save = per_call.loc["torch.save + load(map_location)"]
predicted_us = save["small"] + 2 * 2 * xs_bytes / (rate * 1e9) * 1e6
print(f"xs: {xs_bytes / 1e6:.1f} MB; copy rate {rate:.1f} GB/s")
_ = measure.predicted(f"torch.save + load, large leaves (small-leaf time + two copies = {predicted_us:.0f} µs, "
                      "within 2x)", predicted_us / 2, predicted_us * 2, save["large"], "µs", ".0f")
copies = device.type not in ("cpu", "meta")  # the CPU keeps the tensor itself, meta holds no bytes
for m in ["move_to (helpers)", "optree.tree_map"]:  # without a copy the leaf size should not matter
    grows = per_call.loc[m, "large"] / per_call.loc[m, "small"]
    if copies:  # the large leaves copy 2.6 MB more than the small ones to the device
        _ = measure.predicted(f"{m}, large over small leaves (copies to {device})", 1.5, float("inf"), grows, "x")
    else:
        _ = measure.predicted(f"{m}, large over small leaves (no copy to {device})", 1 / 1.5, 1.5, grows, "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# On a CPU or meta target the walkers copy no data, so nothing in their work grows with the leaf size: their cost
# is per call and per leaf, and the large/small ratios printed above set that prediction beside this run. Where a
# ratio lands away from 1 there, something other than the walk moved it: nothing the walk does scales with the bytes.
# On a GPU target the same ratio measures the copy to the device, which every correct way pays alike, so the
# ranking at large leaves is mostly the copy and at small leaves the walk. `move_to` checks exact types first and
# covers more containers than the slide's function at about its cost; optree's C++ walk pays a Python
# callback per leaf; torch's pytree and dm-tree build tree specifications in Python. On a CPU target `torch.save` is
# the only method whose time grows with the data. What makes its prediction miss: pickling and the zip container of
# `torch.save` add a fixed cost per tensor, `torch.load` allocates fresh memory for every tensor (the first
# write to a new page faults it in, which can cost as much as the copy), the copy rate of a buffer
# already in cache is higher than that of one read once, and on a GPU target the copy to the device comes on top.
# It is for checkpoints, not for every batch.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. JAX: `device_put`, and what leaving torch costs
#
# JAX places arrays itself and needs no `move_to`; `jax.device_put(tree, device)` moves a whole nested
# structure in one call. But JAX works on its own arrays: a batch that comes from a torch loader must first be
# converted, through numpy (`np.asarray(t)`, then `device_put`) or through DLPack (`jax.dlpack.from_dlpack(t)`,
# a zero-copy handover of the buffer). Two ways start from torch tensors and include the conversion; two start
# from JAX arrays converted once beforehand, which is what `device_put` alone costs (JAX is imported inside
# each function, so the notebook runs without it):

# %% slideshow={"slide_type": "subslide"}
# two ways from torch tensors (the conversion included), two from JAX arrays converted once beforehand
import numpy as np


def jax_via_numpy(xs: Any, device: Any) -> Any:
    import jax  # optional: pip install jax

    return jax.device_put(jax.tree_util.tree_map(np.asarray, xs), device)


def jax_via_dlpack(xs: Any, device: Any) -> Any:
    import jax

    return jax.device_put(jax.tree_util.tree_map(jax.dlpack.from_dlpack, xs), device)


def jax_device_put(jax_xs: Any, device: Any) -> Any:
    import jax

    return jax.device_put(jax_xs, device)


def jax_tree_map_device_put(jax_xs: Any, device: Any) -> Any:
    import jax

    return jax.tree_util.tree_map(lambda a: jax.device_put(a, device), jax_xs)


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction:** on a CPU target neither conversion needs to copy a byte (numpy and DLPack can alias torch's
# memory, and `device_put` onto the device where the data already lies can keep it), so every JAX row is a fixed
# cost per call and per leaf, like the walkers: large and small leaves should take the same time (a ratio near
# one). Had they copied, the large `xs` would add at least 2 x 2.6 MB / `r` per call (printed below).
# `compare_jax` times the four ways onto JAX's default device, each call waiting for JAX's asynchronous
# dispatch to finish, interleaved with `move_to` so that each way gets a ratio to it.

# %% slideshow={"slide_type": "subslide"}
def check_jax(original: Any, moved: Any) -> str:
    """Return "ok" if `moved` has `original`'s structure with JAX arrays of equal values on JAX's default device."""
    import jax

    pairs = leaves_by_path(original, moved)
    if isinstance(pairs, str):
        return pairs
    for path, a in pairs[0].items():
        b = pairs[1][path]
        if not isinstance(b, jax.Array):
            return f"xs{path} is a {type(b).__name__}, not a JAX array"
        if b.devices() != {jax.devices()[0]}:
            return f"xs{path} is on {b.devices()}, not on {jax.devices()[0]}"
        if not np.array_equal(np.asarray(b), a.numpy()):
            return f"xs{path} has different values"
    return "ok"


# %% slideshow={"slide_type": "subslide"}
def jax_calls(from_torch: dict[str, Callable], from_jax: dict[str, Callable], xs: Any, device: Any) -> dict:
    """Return {name: a call of each way, waited for}: on `xs` as torch tensors, or converted to JAX arrays before."""
    import jax

    def waited(f: Callable[[Any, Any], Any], arg: Any) -> Callable[[], Any]:
        return lambda: jax.block_until_ready(f(arg, device))

    jax_xs = jax.device_put(jax.tree_util.tree_map(np.asarray, xs), device)
    return {n: waited(f, xs) for n, f in from_torch.items()} | {n: waited(f, jax_xs) for n, f in from_jax.items()}


# %% slideshow={"slide_type": "subslide"}
def compare_jax(from_torch, from_jax, sides, rounds, block_ms, make_xs=slide_xs, baseline=move_to) -> list[dict]:
    """Time JAX's ways onto its default device, interleaved with `baseline` to the CPU; [] without JAX."""
    try:
        import jax
    except ImportError:
        return []
    rows = []
    for leaves, side in sides.items():
        xs = make_xs(side)
        calls = jax_calls(from_torch, from_jax, xs, jax.devices()[0])
        samples = per_call_seconds(calls | {"move_to (helpers)": partial(baseline, xs, "cpu")}, rounds, block_ms / 1e3)
        rows += [{"leaves": leaves, "method": name, "input": "torch tensors" if name in from_torch else "JAX arrays",
                  "us_per_call": measure.median(samples[name]) * 1e6,
                  "over_move_to": measure.ratio(samples, name, "move_to (helpers)"), "correct": check_jax(xs, call())}
                 for name, call in calls.items()]
    return rows


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
jax_rows = compare_jax({"torch -> numpy -> jax.device_put": jax_via_numpy,
                        "torch -> dlpack -> jax.device_put": jax_via_dlpack},
                       {"jax.device_put (JAX arrays in)": jax_device_put,
                        "jax.tree_util.tree_map(jax.device_put)": jax_tree_map_device_put},
                       sides, rounds, block_ms, make_xs=slide_xs, baseline=move_to)
if jax_rows:
    jax_table = pd.DataFrame(jax_rows).pivot(index=["method", "input"], columns="leaves", values="us_per_call")
    jax_table["large / small"] = jax_table["large"] / jax_table["small"]
    jax_table["over move_to (large)"] = pd.DataFrame(jax_rows).query("leaves == 'large'").set_index(
        ["method", "input"])["over_move_to"]
    copy_us = 2 * xs_bytes / (rate * 1e9) * 1e6
    print(f"a copy of the large xs would add about {copy_us:.0f} µs per call")
    for (name, _), ratio in jax_table["large / small"].items():  # no copy: the leaf size should not matter
        _ = measure.predicted(f"{name}, large over small leaves (no copy)", 1 / 1.5, 1.5, ratio, "x")
else:
    jax_table = pd.DataFrame()
    print("JAX is not installed (pip install 'fastloops-helpers[jax]'): the JAX rows were skipped")
jax_table.round(2)


# %% slideshow={"slide_type": "subslide"}
def jax_figures(jax_rows: list[dict[str, Any]]) -> dict[str, float]:
    """Return device_put's µs per call, numpy's route over move_to, and whether every JAX way moved every leaf."""
    found = {f"jax_device_put_us_{r['leaves']}": r["us_per_call"] for r in jax_rows
             if r["method"] == "jax.device_put (JAX arrays in)"}
    found |= {f"jax_via_numpy_over_move_to_{r['leaves']}": r["over_move_to"] for r in jax_rows
              if r["method"] == "torch -> numpy -> jax.device_put"}
    if jax_rows:  # a yes/no figure: 1.0 when every JAX way moved every leaf with equal values
        found["jax_device_put_moves_all"] = float(all(r["correct"] == "ok" for r in jax_rows))
    return found


# %% [markdown] slideshow={"slide_type": "-"}
# Does a converted array still share the torch tensor's memory? Write into the tensor after the conversion and
# read the JAX array back:

# %% slideshow={"slide_type": "subslide"}
def jax_shares_memory() -> dict[str, bool]:
    """Return {conversion: whether the JAX array still sees a later in-place write to the torch tensor}."""
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


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if jax_rows:
    print("every JAX way moves every leaf with equal values:", all(r["correct"] == "ok" for r in jax_rows))
    assert [r["method"] for r in jax_rows if r["correct"] != "ok"] == []
    assert "not a JAX array" in check_jax(xs, xs)  # the check can fail: torch tensors are not JAX arrays
    for way, shared in jax_shares_memory().items():
        print(f"{way}: {'aliases the torch tensor' if shared else 'copies'}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# What the JAX rows show is dispatch, not data movement: each call crosses into JAX's C++ runtime, builds an
# array object per leaf and, with `block_until_ready`, waits for JAX's asynchronous dispatch to finish. Where
# a conversion aliases the torch tensor (printed above), a later in-place write in torch changes the "immutable"
# JAX array too: convert only batches that torch will not touch again. On a GPU, `device_put` from host memory
# is a real copy (host to device), and DLPack hands over a CUDA buffer without a copy only when the tensor
# already lives on the GPU.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. On a GPU: pinned memory and `non_blocking`
#
# Copies from ordinary (pageable) host memory to a GPU go through a pinned staging buffer inside the driver,
# and they block the Python thread. A tensor already in pinned (page-locked) memory can be copied by DMA, and
# with `non_blocking=True` the call returns at once, so the CPU can prepare the next batch while the copy
# runs. The pitfall (seed 002): calling `.pin_memory()` on every batch right before the copy *adds* a copy into
# pinned memory, so `x.pin_memory().to(device, non_blocking=True)` can be slower than a plain `x.to(device)`.
# Pinning pays when it happens off the critical path: in DataLoader workers (`pin_memory=True`) or a
# prefetching thread (notebook 07).

# %% [markdown] slideshow={"slide_type": "-"}
# Five ways to copy one buffer of `cuda_mb` MiB, timed interleaved with the GPU synchronised, in a new order each
# round; `pinned_copy_speedup` is pageable over pinned seconds, round by round, with its interval:

# %% slideshow={"slide_type": "subslide"}
PAGEABLE, PINNED = "pageable .to()", "pinned .to()"  # the pair pinned_copy_speedup compares


def copy_ways(pageable: torch.Tensor, device: torch.device) -> dict[str, Callable[[], Any]]:
    """Return the ways to copy `pageable` to `device`: pageable or pinned, blocking or not, pinning each time."""
    pinned = pageable.pin_memory()
    return {PAGEABLE: partial(pageable.to, device),
            "pageable .to(non_blocking=True)": partial(pageable.to, device, non_blocking=True),
            PINNED: partial(pinned.to, device),
            "pinned .to(non_blocking=True)": partial(pinned.to, device, non_blocking=True),
            "pin_memory() then .to(non_blocking=True)": lambda: pageable.pin_memory().to(device, non_blocking=True)}


# %% slideshow={"slide_type": "subslide"}
def copy_figures(samples: dict[str, list[float]]) -> dict[str, float]:
    """Return pinned_copy_speedup (pageable over pinned seconds, per round) with its 95 % interval."""
    return measure.interval_figures("pinned_copy_speedup", measure.ratios(samples, PAGEABLE, PINNED))


def cuda_copies(nbytes: int, repeat: int = 10, device: torch.device | str = "cuda") -> tuple[list[dict], dict]:
    """Time host-to-GPU copies of `nbytes`, interleaved; return a row per way (median ms, GB/s) and the figures."""
    ways = copy_ways(torch.rand(nbytes // 4), torch.device(device))
    samples = measure.interleaved(ways, repeat=repeat, warmup=2, device=device, shuffle=True)
    rows = [{"way": name, "target": str(device), "mb": nbytes / 2**20, "ms": measure.median(s) * 1e3,
             "gb_per_s": nbytes / measure.median(s) / 1e9} for name, s in samples.items()]
    return rows, copy_figures(samples)


# the ratio's direction, checked without a GPU: pageable seconds over pinned seconds, round by round
toy = copy_figures({PAGEABLE: [2.0, 3, 2, 2, 4, 2], PINNED: [1.0, 1, 1, 2, 1, 1]})
assert toy["pinned_copy_speedup"] == 2.0 and toy["pinned_copy_speedup_ci_high"] == 4.0

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if device.type == "cuda":  # the copies follow the target: a CPU target has no host-to-device copy to time
    cuda_rows, cuda_figures = cuda_copies(cuda_mb * 2**20, repeat=rounds, device=device)  # interleaved rounds
    cuda_rows = pd.DataFrame(cuda_rows)
    print(cuda_rows.round(2).to_string(index=False))
    print(f"pinned over pageable, .to(): {cuda_figures['pinned_copy_speedup']:.2f}x (95 % interval "
          f"{cuda_figures['pinned_copy_speedup_ci_low']:.2f} to {cuda_figures['pinned_copy_speedup_ci_high']:.2f})")
else:
    cuda_rows, cuda_figures = pd.DataFrame(), {}
    print(f"the target is {device}, not a CUDA GPU: skipped the pageable/pinned/non_blocking copy timings")


# %% [markdown] slideshow={"slide_type": "-"}
# On a GPU machine, read the table above against the mechanism: the pinned rows should reach the higher rate,
# `non_blocking` on pinned memory returns before the copy is done (its time is the wait at the
# synchronisation), and the pin-then-copy row pays for the extra host copy.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures = (walker_figures(rows) | jax_figures(jax_rows) | cuda_figures
           | {"numpy_copy_gb_per_s": rate, "torch_save_predicted_us": predicted_us})
knobs = {"sides": sides, "rounds": rounds, "block_ms": block_ms, "cuda_mb": cuda_mb, "target": str(device),
         "copy_target": str(device) if len(cuda_rows) else None,
         "ways": list(ways), "statistic": "median over interleaved rounds"}
path = measure.save_results("06_device_moves", figures, rows=rows + jax_rows + cuda_rows.to_dict("records"),
                           knobs=knobs, repeats=rounds)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# Every option on the slide moves dicts of tensors, but not every one moves everything: check with a device
# that shows mistakes (meta), and never let a way that left a tensor behind count as the fastest. On a CPU target
# the walkers copy nothing and cost per call and per leaf, so their ranking is about Python overhead; on a GPU
# target each correct way also pays the same copy to the device, which dominates large leaves. `move_to` covers
# namedtuples, dataclasses and TensorDicts and names the path of anything it cannot move. Serialising through
# `torch.save` copies every byte twice: it is for checkpoints. JAX's `device_put` moves a whole tree in one call,
# but a torch batch must first be converted, and that conversion (numpy or DLPack) costs a dispatch per leaf. On
# a GPU, pin memory where it is off the critical path, then copy with `non_blocking=True`. This run's figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
print(f"target {device}; move_to over the fastest way that moved every tensor: {figures['move_to_over_fastest']:.2f}x")
print(f"torch.save + load over move_to (large leaves): {per_call.loc['torch.save + load(map_location)', 'large'] / per_call.loc['move_to (helpers)', 'large']:.0f}x")
if jax_rows:
    print(f"jax.device_put of JAX arrays: {figures['jax_device_put_us_large']:.0f} µs per call; "
          f"torch -> numpy -> device_put over move_to: {figures['jax_via_numpy_over_move_to_large']:.0f}x")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide presents the hand-written function, torch pytree, optree, tensordict, `torch.load(map_location)` and
# `jax.device_put` as ways to move the nested `xs` to a device. The compared cell below states which of the torch
# ways miss tensors (a structural fact, the same on every machine); the cell after it prints what depends on the run
# and the machine: the timing check (`move_to` within the claims registry's tolerance of the fastest way that moved
# every tensor, measured in the same run; the benchmark's target is tighter), JAX's claim (when JAX is installed)
# and the pinned-memory claim (on a CUDA target).

# %% slideshow={"slide_type": "-"}
print(f"misses tensors: {', '.join(sorted(missed))}; every other way moves every tensor")


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
_ = measure.predicted("move_to over the fastest way that moved every tensor", float("-inf"), 1.5,
                      figures["move_to_over_fastest"], "x")
claims.check("jax_device_put_moves_all", figures, why="JAX is not installed")
claims.check("pinned_copy_speedup", figures, why=f"the target is {device}, not a CUDA GPU")


# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each solution calls the ways and functions above with the notebook's defaults and changes none of its variables.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Add a `set` of tensors to `xs` (say `{torch.ones(1), torch.zeros(1)}` under a new key) and move it to
# the meta device with every way in `ways`. Look for three outcomes: which ways raise (and whether the error
# says where the set is), which pass the set through with its tensors left on the CPU, and which move them.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
import os
import tempfile

ex1_xs = {**xs, "tags": {torch.ones(1), torch.zeros(1)}}


def ex1_move(way):
    try:
        moved_xs = way(ex1_xs, torch.device("meta"))
    except Exception as err:
        return f"raises {type(err).__name__}: {str(err).splitlines()[0][:90]}"
    left = sum(t.device.type == "cpu" for t in moved_xs["tags"])
    return f"passes the set through, {left} tensors left on the CPU" if left else "moves the set's tensors"


def ex1_outcome(way):
    with tempfile.TemporaryFile() as said:  # dm-tree's C++ warns on file descriptor 2, below sys.stderr: collect it
        saved = os.dup(2)
        os.dup2(said.fileno(), 2)
        try:
            outcome = ex1_move(way)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        said.seek(0)
        warned = said.read().decode(errors="replace").strip()
    return outcome + (f"\n    after warning: {warned}" if warned else "")


ex1_found = {ex1_name: ex1_outcome(ex1_way) for ex1_name, ex1_way in ways.items()}
for ex1_name, ex1_what in ex1_found.items():
    print(f"{ex1_name}: {ex1_what}")
assert ex1_found["move_to (helpers)"].startswith("raises TypeError") and "obj['tags']" in ex1_found["move_to (helpers)"]

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Replace the list `xs["pim"]` by `torch.stack(xs["pim"])` and check every way again, as in section 2.
# Look at TensorDict's row: does it move everything now that every leaf is a tensor?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex2_xs = {**xs, "pim": torch.stack(xs["pim"])}
ex2_checks = {ex2_name: check_moved(ex2_xs, ex2_way(ex2_xs, torch.device("meta")), "meta")
              for ex2_name, ex2_way in ways.items()}
print(pd.DataFrame({"list pim": checks["moved correctly (meta)"], "stacked pim": ex2_checks}).to_string())
assert ex2_checks["TensorDict.from_dict(xs).to"] == "ok" and all(v == "ok" for v in ex2_checks.values())

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3.** Where does the time go? Time the ways with leaves of side 8 and of side 1024 (`compare_ways` onto `"cpu"`,
# whatever this machine's device, with `{"side 8": 8, "side 1024": 1024}` in place of `sides`). The large leaves hold
# (1024 / 8)^2 = 16384 times the bytes of the small ones. Look for which ways' time grows with the data and which
# stays flat, then check which ways copy the data on a CPU target (a moved tensor in new memory: compare `data_ptr()`
# with the original's): are they the same ways, and what does that say about where each way spends its time?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex3_rows = pd.DataFrame(compare_ways(ways, {"side 8": 8, "side 1024": 1024}, rounds, block_ms, "cpu",
                                     make_xs=slide_xs))
ex3 = ex3_rows.pivot(index="method", columns="leaves", values="us_per_call")
ex3["grows"] = ex3["side 1024"] / ex3["side 8"]
print(ex3.round(1).sort_values("grows").to_string())
ex3_xs = slide_xs(1024)
ex3_copies = {name: way(ex3_xs, torch.device("cpu"))["cim"].data_ptr() != ex3_xs["cim"].data_ptr()
              for name, way in ways.items()}
ex3_grows = set(ex3.index[ex3.grows > 3])
print("time grows over 3x with the data (medians of rounds):", ", ".join(sorted(ex3_grows)) or "none")
print("copies the data on a CPU target:", ", ".join(n for n, c in ex3_copies.items() if c) or "none")
print("the same ways:", ex3_grows == {n for n, c in ex3_copies.items() if c})
# the mechanism, checked without a clock: on a CPU target only the serialising way allocates new memory
assert len(ex3_copies) == len(ways) and {n for n, c in ex3_copies.items() if c} == {"torch.save + load(map_location)"}

# %% [markdown] slideshow={"slide_type": "-"}
# **4.** (Needs a CUDA target; the solution skips on any other.) Move the large `xs` to the GPU with `move_to`, once
# from ordinary memory and once from pinned memory with `non_blocking=True`, timed interleaved with the GPU
# synchronised (`measure.interleaved(..., device=device)`). Look for whether the pinned copy reaches the higher
# rate of section 5's pinned rows, and check that every tensor arrived.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
if device.type == "cuda":
    ex4_pinned = optree.tree_map(lambda t: t.pin_memory(), xs)
    ex4_t = measure.interleaved({"pageable": lambda: move_to(xs, device),
                                 "pinned, non_blocking": lambda: move_to(ex4_pinned, device, non_blocking=True)},
                                repeat=rounds, warmup=1, device=device)
    for ex4_name, ex4_seconds in ex4_t.items():
        print(f"{ex4_name}: {xs_bytes / measure.median(ex4_seconds) / 1e9:.1f} GB/s")
    ex4_moved = move_to(ex4_pinned, device, non_blocking=True)
    torch.cuda.synchronize()
    assert check_moved(xs, ex4_moved, device) == "ok"
else:
    print(f"needs a CUDA target, skipped: the target is {device} (this exercise times copies of xs to a GPU)")
