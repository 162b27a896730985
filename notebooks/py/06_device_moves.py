# %% [markdown] slideshow={"slide_type": "slide"}
# # 06 · Moving nested data to a device
#
# | | |
# |---|---|
# | **Question** | How do you move a dict of lists/tuples/dicts of tensors to a device, which way is correct and which is fastest, and when do pinned memory and `non_blocking` help? |
# | **Seeds** | 000/001 "Other tips": *To Devices Problem*, *General Solution*, *PyTree*, *Tensordict*, *optree*, *IO*, *JAX*; 002: `pin_memory` and `non_blocking` |
# | **GPU** | optional: the pinned-memory section runs only with CUDA and says so otherwise |
# | **Run time** | <!-- run-time --> workshop ~12 s (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# A batch is rarely one tensor: images, labels, masks and metadata arrive as a nested structure. The slide
# lists six ways to move such a structure to a device. This notebook checks that each one really moves every
# tensor, times them on the same structure, compares them with `fastloops_helpers.move_to`, and measures what
# JAX's `device_put` costs when the data starts as torch tensors.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import collections
import dataclasses

import pandas as pd
import torch

from fastloops_helpers import config, measure
from fastloops_helpers.book import claims
from fastloops_helpers.experiments import bandwidth, devices
from fastloops_helpers.measure import plots

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"}
SIDE = 224            # the slide's image side; leaves of 8 x 8 show the pure per-call overhead instead
CUDA_MB = 64          # buffer for the pinned-memory section: larger shows bandwidth, smaller shows latency
xs = devices.slide_xs(SIDE)
print({k: (tuple(v.shape) if torch.is_tensor(v) else type(v).__name__) for k, v in xs.items()})


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. The slide's hand-written `move_to`, fixed
#
# The slide's function has a stray colon after `return obj.to(device)` (a syntax error), and it raises on
# tuples, which is what a DataLoader's default collate gives for `(image, label)` pairs. Here it is with both
# fixed; it is `devices.slide_move_to`:

# %% slideshow={"slide_type": "subslide"}
def slide_move_to(obj, device):
    if torch.is_tensor(obj):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: slide_move_to(v, device) for k, v in obj.items()}
    if isinstance(obj, list):
        return [slide_move_to(v, device) for v in obj]
    if isinstance(obj, tuple):
        return tuple(slide_move_to(v, device) for v in obj)
    raise TypeError(f"slide_move_to cannot move a {type(obj).__name__}")


moved = slide_move_to(xs, "meta")
print(devices.check_moved(xs, moved, "meta"))

# %% [markdown] slideshow={"slide_type": "subslide"}
# We check correctness on the **meta** device: it exists on every machine, holds shapes but no data, and a
# tensor that was not moved stays visibly on the CPU. `devices.check_moved` compares the structure, the
# device of every tensor and (on a real device) the values.
#
# It still has limits: a namedtuple comes back as a plain tuple, a dataclass or an `int` in the batch raises,
# and the error does not say *where* in the structure the problem is. `devices.move_to` handles dicts and
# other mappings, lists, tuples, namedtuples, dataclasses (frozen too), TensorDicts and tensorclasses, passes
# other leaves through, and names the path of what it cannot move:

# %% slideshow={"slide_type": "subslide"}
Pair = collections.namedtuple("Pair", "image label")


@dataclasses.dataclass
class Sample:
    pair: Pair
    index: int


batch = {"xs": xs, "sample": Sample(Pair(torch.ones(2), torch.zeros(1)), index=7)}
out = devices.move_to(batch, "meta")
print(type(out["sample"]).__name__, type(out["sample"].pair).__name__, out["sample"].index, out["sample"].pair.image.device)
try:
    devices.move_to({"xs": xs, "tags": [torch.ones(1), {"cat", "dog"}]}, "meta")
except TypeError as err:
    print(err)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Do all of the slide's ways really move everything?
#
# **Prediction:** the tree-mapping libraries (`torch.utils._pytree`, optree, dm-tree) and `torch.load` with
# `map_location` know dicts and lists, so they move every tensor. `TensorDict.from_dict` is built for
# dicts of tensors; a list of tensors is not a tensor field, so it may be kept as a non-tensor value.

# %% slideshow={"slide_type": "-"}
found, skipped = devices.methods()
checks = pd.DataFrame({"moved correctly (meta)": {name: devices.check_moved(xs, fn(xs, torch.device("meta")), "meta")
                                                  for name, fn in found.items()}})
checks

# %% slideshow={"slide_type": "subslide"}
for name, why in skipped.items():
    print(f"skipped {name}: {why}")
print(f"{len(found)} ways found, {len(skipped)} skipped")

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
# does) two copies add 2 x 2 x 2.6 MB / `r` on top of what the small leaves cost. Methods are timed in
# interleaved rounds, so that a busy machine slows them alike.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
result = devices.run()
table = result.table()
torch_rows = table[table.input == "torch tensors"]
torch_rows[~torch_rows.method.str.contains("->")].pivot(index="method", columns="leaves", values="us_per_call").round(1).sort_values("large")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
large = table[(table.leaves == "large") & (table.input == "torch tensors") & ~table.method.str.contains("->")]
fig = plots.bars(large.sort_values("us_per_call"), "us_per_call", "method", baseline="move_to (helpers)", log=True,
                 unit="µs per call, log scale", title="Moving the slide's xs to the CPU (ratio to move_to)")
fig.axes[0].set_xlabel("time per call (µs, log scale)")
plots.save(fig, "06_device_moves-methods")
per_call = table.pivot(index="method", columns="leaves", values="us_per_call")
order = per_call["large"].drop([m for m in per_call.index if "->" in m or "jax" in m]).sort_values()
print("fastest to slowest (large leaves):", " < ".join(order.index))
print(f"move_to over the fastest method: {result.figures['move_to_over_fastest']:.2f}x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Now the prediction for `torch.save`, with this machine's copy rate for a buffer of the size of `xs` (notebook
# 00's measurement, repeated here with numpy's single-threaded copy, the kind `torch.save` and `torch.load` do):

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
xs_bytes = sum(t.numel() * t.element_size() for t in [xs["cim"], *xs["pim"], *xs["im"].values()])
rate = bandwidth.copy_bandwidth(xs_bytes, "numpy")  # GB/s, read + write counted; one thread, as torch.save copies
save = per_call.loc["torch.save + load(map_location)"]
predicted_us = save["small"] + 2 * 2 * xs_bytes / (rate * 1e9) * 1e6
verdict = "within" if 0.5 <= save["large"] / predicted_us <= 2 else "missed (outside 2x)"
print(f"xs: {xs_bytes / 1e6:.1f} MB; copy rate {rate:.1f} GB/s")
print(f"torch.save + load, large leaves: predicted {predicted_us:.0f} µs (small-leaf time + two copies), "
      f"measured {save['large']:.0f} µs: {verdict}")
print(f"walkers, large over small leaves: " + ", ".join(f"{m} {per_call.loc[m, 'large'] / per_call.loc[m, 'small']:.2f}x"
                                                       for m in ["move_to (helpers)", "optree.tree_map"]))

# %% [markdown] slideshow={"slide_type": "subslide"}
# The walkers copy no data on a CPU target, so their time should not depend on the leaf size (the large/small
# ratios printed above): their cost is per call and per leaf. `move_to` checks exact types first and
# covers more containers than the slide's function at about its cost; optree's C++ walk pays a Python
# callback per leaf; torch's pytree and dm-tree build tree specifications in Python. `torch.save` is the only
# method whose time grows with the data. What makes its prediction miss: pickling and the zip container of
# `torch.save` add a fixed cost per tensor, `torch.load` allocates fresh memory for every tensor (the first
# write to a new page faults it in, which can cost as much as the copy), and the copy rate of a buffer
# already in cache is higher than that of one read once. It is for checkpoints, not for every batch.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. JAX: `device_put`, and what leaving torch costs
#
# JAX places arrays itself and needs no `move_to`; `jax.device_put(tree, device)` moves a whole nested
# structure in one call. But JAX works on its own arrays: a batch that comes from a torch loader must first be
# converted, through numpy (`np.asarray(t)`, then `device_put`) or through DLPack (`jax.dlpack.from_dlpack(t)`,
# a zero-copy handover of the buffer). **Prediction:** on a CPU target neither conversion needs to copy a
# byte (numpy and DLPack can alias torch's memory, and `device_put` onto the device where the data already
# lies can keep it), so every JAX row is a fixed cost per call and per leaf, like the walkers: large and small
# leaves should take the same time (a ratio near one). Had they copied, the large `xs` would add at least
# 2 x 2.6 MB / `r` per call (printed below).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
jax_rows = table[table.method.isin(devices.JAX_INPUT)]
if len(jax_rows):
    jax_table = jax_rows.pivot(index=["method", "input"], columns="leaves", values="us_per_call")
    jax_table["large / small"] = jax_table["large"] / jax_table["small"]
    jax_table["over move_to (large)"] = jax_table["large"] / per_call.loc["move_to (helpers)", "large"]
    copy_us = 2 * xs_bytes / (rate * 1e9) * 1e6
    print(f"a copy of the large xs would add about {copy_us:.0f} µs per call")
    for (name, _), ratio in jax_table["large / small"].items():
        print(f"{name}: predicted large/small ~1x (no copy), measured {ratio:.2f}x: "
              f"{'within' if ratio < 1.5 else 'missed'}")
else:
    jax_table = pd.DataFrame()
    print("JAX is not installed (pip install 'fastloops-helpers[jax]'): the JAX rows were skipped")
jax_table.round(2)

# %% slideshow={"slide_type": "subslide"}
if len(jax_rows):
    print("every JAX way moves every leaf with equal values:", (jax_rows.correct_cpu == "ok").all())
    for way, shared in devices.jax_shares_memory().items():
        print(f"{way}: {'aliases the torch tensor' if shared else 'copies'}")

# %% [markdown] slideshow={"slide_type": "-"}
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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if torch.cuda.is_available():
    cuda_rows = pd.DataFrame(devices.cuda_copy_rows(CUDA_MB * 2**20))
    print(cuda_rows.round(2).to_string(index=False))
else:
    cuda_rows = pd.DataFrame()
    print("no CUDA GPU here: skipped the pageable/pinned/non_blocking copy timings (they need a GPU)")

# %% [markdown] slideshow={"slide_type": "-"}
# On a GPU machine, read the table above against the mechanism: the pinned rows should reach the higher rate,
# `non_blocking` on pinned memory returns before the copy is done (its time is the wait at the
# synchronisation), and the pin-then-copy row pays for the extra host copy.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures = dict(result.figures, numpy_copy_gb_per_s=rate, torch_save_predicted_us=predicted_us)
if len(jax_rows):  # a yes/no figure: 1.0 when every JAX way moved every leaf with equal values
    figures["jax_device_put_moves_all"] = float((jax_rows.correct_cpu == "ok").all())
path = measure.save_results("06_device_moves", figures, rows=result.rows + cuda_rows.to_dict("records"),
                           knobs=dict(result.knobs, cuda_mb=CUDA_MB), repeats=result.repeats)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# Every option on the slide moves dicts of tensors, but not every one moves everything: check with a device
# that shows mistakes (meta). On a CPU target the walkers copy nothing and cost per call and per leaf, so
# their ranking is about Python overhead; `move_to` covers namedtuples, dataclasses and TensorDicts and names
# the path of anything it cannot move. Serialising through `torch.save` copies every byte twice: it is for
# checkpoints. JAX's `device_put` moves a whole tree in one call, but a torch batch must first be converted, and
# that conversion (numpy or DLPack) costs a dispatch per leaf. On a GPU, pin memory where it is off the
# critical path, then copy with `non_blocking=True`. This run's figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
print(f"move_to over the fastest walker: {result.figures['move_to_over_fastest']:.2f}x")
print(f"torch.save + load over move_to (large leaves): {per_call.loc['torch.save + load(map_location)', 'large'] / per_call.loc['move_to (helpers)', 'large']:.0f}x")
if len(jax_rows):
    print(f"jax.device_put of JAX arrays: {result.figures['jax_device_put_us_large']:.0f} µs per call; "
          f"torch -> numpy -> device_put over move_to: {result.figures['jax_via_numpy_over_move_to_large']:.0f}x")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide presents the hand-written function, torch pytree, optree, tensordict, `torch.load(map_location)` and
# `jax.device_put` as ways to move the nested `xs` to a device. The compared cell below states which of them move
# every tensor (a structural fact); the timing check (`move_to` within the claims registry's tolerance of the fastest walker
# measured in the same run; the benchmark's target is tighter) is printed in the cell after it, whose output depends on the run.

# %% slideshow={"slide_type": "subslide"}
for name, verdict in checks["moved correctly (meta)"].items():
    print(f"{name}: {'moves every tensor' if verdict == 'ok' else 'misses tensors'}")
claims.check("jax_device_put_moves_all", figures, why="JAX is not installed")
print("pinned-memory claims:", "measured above" if torch.cuda.is_available() else "need a GPU, not checked here")

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print("move_to within 1.5x of the fastest walker:", result.figures["move_to_over_fastest"] <= 1.5)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Add a `set` of tensors to `xs`. Which methods raise, which pass it through unmoved, and which move it?
# 2. Replace the list `xs["pim"]` by `torch.stack(xs["pim"])` and rerun section 2. Does TensorDict move it now?
# 3. Time the methods with `SIDE = 8`. Which ones got faster, and what does that say about where their time goes?
# 4. Time `jax.device_put(jax_xs, jax.devices()[0])` on a GPU machine with JAX's CUDA wheels. How does the time grow
#    with `SIDE` now, and what rate does it reach compared with section 5's pinned copies?
