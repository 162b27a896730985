# %% [markdown] slideshow={"slide_type": "slide"}
# # 06 · Moving nested data to a device
#
# | | |
# |---|---|
# | **Question** | How do you move a dict of lists/tuples/dicts of tensors to a device, which way is correct and which is fastest, and when do pinned memory and `non_blocking` help? |
# | **Seeds** | 000/001 "Other tips": *To Devices Problem*, *General Solution*, *PyTree*, *Tensordict*, *optree*, *IO*, *JAX*; 002: `pin_memory` and `non_blocking` |
# | **GPU** | optional: the pinned-memory section runs only with CUDA and says so otherwise |
# | **Run time** | smoke ~20 s · workshop ~40 s · full ~1 min |
#
# A batch is rarely one tensor: images, labels, masks and metadata arrive as a nested structure. The slide
# lists six ways to move such a structure to a device. This notebook checks that each one really moves every
# tensor, times them on the same structure, and compares them with `fastloops_helpers.devices.move_to`.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import collections
import dataclasses
import inspect

import pandas as pd
import torch

from fastloops_helpers import config, measure
from fastloops_helpers.experiments import devices
from fastloops_helpers.measure import plots
from fastloops_helpers.experiments import devices as bench_devices

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

# %% [markdown] slideshow={"slide_type": "-"}
# TensorDict stores the list `pim` as a non-tensor stack, and `.to(device)` leaves its tensors where they were:
# code written against it must turn lists into stacked tensors (or a nested TensorDict) first. JAX's
# `device_put` (the slide's last option) takes JAX arrays, not torch tensors; it is timed only where JAX is
# installed.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. How long does each take?
#
# **Prediction.** On a CPU target, `.to("cpu")` returns the tensor itself, so every method's time is pure
# Python overhead: walking the structure and calling `.to` five times. A plain recursive function does
# little besides that, optree walks in C++ but calls back into Python per leaf, torch's pytree and dm-tree
# build and rebuild tree specifications, TensorDict builds a new object with checks, and `torch.save` +
# `torch.load` serialise and copy every byte, so it should be the slowest by orders of magnitude for large
# leaves. Methods are timed in interleaved rounds, so that a busy machine slows them alike.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
result = bench_devices.run()
table = result.table()
table.pivot(index="method", columns="leaves", values="us_per_call").round(1).sort_values("large")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
large = table[table.leaves == "large"].sort_values("us_per_call")
fig = plots.bars(large, "us_per_call", "method", baseline="move_to (helpers)", log=True, unit="µs",
                 title="Moving the slide's xs to the CPU (ratio to move_to)")
plots.save(fig, "06_device_moves-methods")
for key, value in result.figures.items():
    print(f"{key}: {value:.2f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The plain recursion is the fastest way here, with optree close behind; `move_to` pays a few exact-type
# checks for its wider coverage and stays with the recursion (its ratio to the fastest is printed above).
# torch's pytree and dm-tree cost several times more per call, TensorDict more again, and serialising
# through `torch.save` is the slowest by far: fine for checkpoints, not for every batch.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. On a GPU: pinned memory and `non_blocking`
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
    cuda_rows = pd.DataFrame(bench_devices.cuda_copy_rows(CUDA_MB * 2**20))
    print(cuda_rows.round(2).to_string(index=False))
else:
    cuda_rows = pd.DataFrame()
    print("no CUDA GPU here: skipped the pageable/pinned/non_blocking copy timings (they need a GPU)")

# %% [markdown] slideshow={"slide_type": "-"}
# With a GPU, the table above shows pinned copies reaching a higher rate than pageable ones, `non_blocking`
# on pinned memory returning before the copy is done (its time counts the wait at the synchronisation), and
# the pin-then-copy row paying for the extra host copy.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
path = measure.save_results("06_device_moves", result.figures, rows=result.rows + cuda_rows.to_dict("records"),
                           knobs=dict(result.knobs, cuda_mb=CUDA_MB), repeats=result.repeats)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# Every option on the slide moves dicts of tensors, but not every one moves everything: check with a device
# that shows mistakes (meta). For speed per batch, a small recursive function or optree is as fast as it gets;
# `devices.move_to` keeps that speed while covering namedtuples, dataclasses and TensorDicts and naming the
# path of anything it cannot move. Serialising through `torch.save` is for checkpoints. On a GPU, pin memory
# where it is off the critical path, then copy with `non_blocking=True`.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide presents the hand-written function, torch pytree, optree, tensordict and `torch.load(map_location)`
# as ways to move the nested `xs` to a device. We check which of them move every tensor, and that
# `move_to` is within 1.5x of the fastest method measured in the same run (the benchmark's target is 1.1x;
# the looser threshold here survives a busy machine).

# %% slideshow={"slide_type": "subslide"}
for name, verdict in checks["moved correctly (meta)"].items():
    print(f"{name}: {'moves every tensor' if verdict == 'ok' else 'misses tensors'}")
print("move_to within 1.5x of the fastest:", result.figures["move_to_over_fastest"] <= 1.5)
print("pinned-memory claims:", "measured above" if torch.cuda.is_available() else "need a GPU, not checked here")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Add a `set` of tensors to `xs`. Which methods raise, which pass it through unmoved, and which move it?
# 2. Replace the list `xs["pim"]` by `torch.stack(xs["pim"])` and rerun section 2. Does TensorDict move it now?
# 3. Time the methods with `SIDE = 8`. Which ones got faster, and what does that say about where their time goes?
