# %% [markdown] slideshow={"slide_type": "slide"}
# # 03 · A custom loader: from the slide's version to a complete one
#
# | | |
# |---|---|
# | **Question** | Can a loader that indexes whole batches keep DataLoader's sampling semantics (every index once per epoch, batch sizes, drop_last, seeds, epochs, sharding) and still be much faster? |
# | **Seeds** | 000/001, "Or A Custom DataLoader" |
# | **GPU** | optional: with CUDA the last section also runs the loader on GPU-resident data |
# | **Run time** | <!-- run-time --> workshop ~9.6 s (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# The slide ends its answer with a ten-line loader: one `randperm` per epoch, then `data[indices]` for each slice of
# it. It is fast because it does one operation per batch. Here we write it out, list what a training loop still
# needs from it, and check that `fastloops_helpers.BatchLoader` provides those without losing the speed. Both
# loaders' code is on screen before it is timed: the slide's in full, in a cell whose class is the one timed, and
# `BatchLoader`'s epoch path method by method, rendered from the package code that runs.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import numpy as np
import pandas as pd
import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler

from fastloops_helpers import BatchLoader, config, measure
from fastloops_book.source import show_code
from fastloops_helpers.experiments import loops
from fastloops_helpers.load.order import EpochOrder, epoch_order
from fastloops_helpers.measure import plots
from fastloops_helpers.teach.slide_code import FastDataloader, loader_epoch

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
num_samples = config.size("loops.samples")         # rows (the slide: 300,000): more, longer epochs, same ranking
batch_size = config.size("loops.batch_size")        # the slide's 300: smaller means more per-batch work per epoch
num_features = config.size("gather.features")      # width of the float matrix: wider rows, more bytes to copy
num_epochs = config.size("loops.epochs")            # timed epochs of the custom loaders: more, steadier
slow_epochs = config.size("loops.worker_epochs")    # timed epochs of the per-sample DataLoader (up to seconds each)


# %% [markdown] slideshow={"slide_type": "slide"}
# ## The slide's loader, written out
#
# It keeps a permutation and a cursor; `__next__` hands out the next slice of the permutation as a batch. The class
# lives in the package (`fastloops_helpers.teach.slide_code.FastDataloader`), because notebook 01 and
# `python -m fastloops_book.bench loops` time it too; the cell renders the code that runs.

# %% slideshow={"slide_type": "-"}
show_code(FastDataloader)

fdl = FastDataloader(torch.arange(10), batch_size=4)
print([len(b) for b in fdl], sorted(torch.cat(list(fdl)).tolist()) == list(range(10)))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## What it lacks
#
# A training loop needs more than batches. Each check below is one line; the slide's loader fails it or cannot
# express it.

# %% slideshow={"slide_type": "subslide"}
lacks = {}
lacks["drop_last"] = [len(b) for b in FastDataloader(torch.arange(10), 4)][-1] != 4  # a short last batch, always
lacks["seed"] = "seed" not in FastDataloader.__init__.__code__.co_varnames  # orders come from the global RNG
lacks["set_epoch"] = not hasattr(fdl, "set_epoch")
lacks["len"] = not hasattr(fdl, "__len__")
lacks["sharding (rank, world_size)"] = "rank" not in FastDataloader.__init__.__code__.co_varnames
try:
    next(iter(FastDataloader({"X": torch.rand(10, 3), "y": torch.arange(10)}, 4)))
    lacks["several fields (dict)"] = False
except (TypeError, KeyError, IndexError) as err:
    lacks["several fields (dict)"] = True
memmap_batch = next(iter(FastDataloader(np.arange(10.0), 4)))
lacks["numpy/memmap data -> tensors"] = not isinstance(memmap_batch, torch.Tensor)
pd.Series(lacks, name="missing").to_frame()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The helpers' loader
#
# `BatchLoader(data, batch_size, shuffle, drop_last, seed, generator, rank, world_size, group_size)` adds all of
# these. `data` can be a tensor (on any device), a numpy array or memmap, a [TensorDict or tensorclass](https://pytorch.org/tensordict/stable/index.html), a
# dict/tuple/list of those, or a Dataset with `__getitems__`. The order of epoch `e` depends only on `(seed, e)`;
# each new iteration moves to the next epoch, and `set_epoch(e)` chooses one, as with DistributedSampler.

# %% slideshow={"slide_type": "-"}
loader = BatchLoader({"X": np.arange(20.0).reshape(10, 2), "y": torch.arange(10)}, batch_size=4,
                     shuffle=True, drop_last=True, seed=0)
batch = next(iter(loader))
print(len(loader), "batches;", {k: (type(v).__name__, tuple(v.shape)) for k, v in batch.items()})
print("rows stay aligned:", all(torch.equal(b["X"][:, 0].long(), 2 * b["y"]) for b in loader))

# %% slideshow={"slide_type": "subslide"}
loader.set_epoch(3)
first = [b["y"].tolist() for b in loader]
loader.set_epoch(3)
print("same seed and epoch, same order:", first == [b["y"].tolist() for b in loader])
print("next epoch differs:", first != [b["y"].tolist() for b in loader])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## What an epoch of `BatchLoader` runs
#
# `BatchLoader` keeps its sampling in an `EpochOrder` (`loader.sampler`, shared with `ThreadLoader`, notebook 14):
# the epoch, seed, shuffle, `drop_last`, rank and world size. At the start of each epoch it asks for that epoch's
# indices, once, and moves on to the next epoch:

# %% slideshow={"slide_type": "subslide"}
# two methods of the sampler every BatchLoader holds
show_code(EpochOrder.indices, EpochOrder.next_epoch)

# %% [markdown] slideshow={"slide_type": "-"}
# The order itself is one `randperm` of 32-bit indices (half the memory of the slide's 64-bit one), from a
# generator seeded by `(seed, epoch)`, on the data's device, run on one thread (a second thread made it slower on a
# busy 2-core machine); `shard` then takes every `world_size`-th index, as `DistributedSampler` does.

# %% slideshow={"slide_type": "subslide"}
# the order of one epoch, the first work of every BatchLoader epoch
show_code(epoch_order)

# %% [markdown] slideshow={"slide_type": "-"}
# Then the loader picks a path: a `__getitems__` Dataset gets one call per batch, unshuffled single-process data is
# cut into views (no copy), and everything else is gathered.

# %% slideshow={"slide_type": "subslide"}
# an epoch, and the choice of path
show_code(BatchLoader.__iter__, BatchLoader._batches)

# %% [markdown] slideshow={"slide_type": "subslide"}
# The gather is where the slide's loader and `BatchLoader` differ most. The slide indexes one batch per call
# (`data[batch]`, advanced indexing); `BatchLoader` gathers a chunk of many batches (about 512 KiB of rows, so the
# chunk stays in the L2 cache) with one call, then cuts it into batches as views. On the CPU, for rows of 64 bytes
# or more, the first chunks of every epoch try both `np.take` and `index_select` (notebook 02) and the faster one
# gathers the rest.

# %% slideshow={"slide_type": "subslide"}
# the gather path, and the probe that picks its primitive
show_code(BatchLoader._iter_gathered, BatchLoader._probe)

# %% slideshow={"slide_type": "-"}
print(loader.sampler)
print("one sampler answers for the loader:", len(loader) == len(loader.sampler), loader.epoch == loader.sampler.epoch)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Same sampling semantics as DataLoader
#
# DataLoader with `shuffle=True` is a `RandomSampler` inside a `BatchSampler`. Each epoch must yield every index
# exactly once (or, with `drop_last`, all but the incomplete tail), in batches of the same sizes. With `rank` and
# `world_size`, the shards must be what `DistributedSampler` gives: same padding (repeat from the start) or dropping.
# The random orders differ (different generators); the multisets and the shapes may not.

# %% slideshow={"slide_type": "-"}
n = 1003
for drop_last in (False, True):
    ref = list(BatchSampler(RandomSampler(range(n)), batch_size, drop_last=drop_last))
    ours = [b.tolist() for b in BatchLoader(torch.arange(n), batch_size, shuffle=True, drop_last=drop_last, seed=1)]
    same_sizes = [len(b) for b in ref] == [len(b) for b in ours] and len(ours) == len(ref)
    every_once = sorted(i for b in ours for i in b) == sorted(i for b in ref for i in b) if not drop_last else \
        len({i for b in ours for i in b}) == sum(len(b) for b in ours)
    print(f"drop_last={drop_last}: same batch sizes {same_sizes}, indices as DataLoader's {every_once}")

# %% slideshow={"slide_type": "subslide"}
world_size = 3
for drop_last in (False, True):
    shards = [BatchLoader(torch.arange(10), 2, rank=r, world_size=world_size, drop_last=drop_last).indices().tolist()
              for r in range(world_size)]
    ref = [list(DistributedSampler(range(10), world_size, r, shuffle=False, drop_last=drop_last))
           for r in range(world_size)]
    print(f"drop_last={drop_last}: shards {shards}, equal to DistributedSampler's: {shards == ref}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Timing: the slide's loader, the helpers' loader, DataLoader
#
# **Prediction.** Both custom loaders do one shuffle and one operation per batch: on the index-only task, a
# shuffle of N indices (about 5-30 ns each) plus N / 300 calls of a few µs, so N x (5 to 50 ns) per epoch. The
# per-sample DataLoader pays about 2-6 µs per sample (notebook 01). So the custom loaders should be ahead by
# (2 to 6 µs) / (5 to 50 ns): between 40x and 1200x. On a 93-column float matrix every loader also copies
# N x 372 B; at a few GB/s that adds 20-50 ms per epoch to the custom loaders and less, relatively, to the
# DataLoader, so the gap shrinks to roughly (0.6 to 1.8 s) / (25 to 70 ms), 10x to 70x. `BatchLoader` shuffles
# 32-bit indices (half the memory traffic of the slide's 64-bit `randperm`) and gathers many batches with one
# call; on the matrix the gather primitive decides between the two custom loaders (notebook 02).

# %% [markdown] slideshow={"slide_type": "subslide"}
# Each epoch is drained: only the loop is timed, the batches are dropped. The two custom loaders run the code
# above. DataLoader's code is torch's; what this notebook shows of its epoch is the slide's loop over it,
# `loader_epoch` (notebook 01 explains it):

# %% slideshow={"slide_type": "-"}
show_code(loader_epoch)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
tasks = {"index-only": torch.arange(num_samples), "93 float32 columns": torch.rand(num_samples, num_features)}
results = []
for task, data in tasks.items():
    epochs = {"slide FastDataloader": measure.drain(FastDataloader(data, batch_size)),
              "BatchLoader": measure.drain(BatchLoader(data, batch_size, shuffle=True, seed=0))}
    seconds = measure.interleaved(epochs, num_epochs, warmup=1, desc=task, shuffle=True)
    seconds |= measure.interleaved({"DataLoader": loader_epoch(DataLoader(data, batch_size, shuffle=True))},
                                   slow_epochs, warmup=1, desc=f"{task}, DataLoader")
    results += [dict(r, task=task) for r in loops.table(seconds, num_samples)]
table = pd.DataFrame(results)
table.pivot(index="loop", columns="task", values="ms_per_epoch").round(2)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
ms = table.set_index(["task", "loop"])["ms_per_epoch"]
fig = plots.bars(table[table.task == "93 float32 columns"], "ms_per_epoch", "loop", baseline="BatchLoader", log=True,
                 title=f"One epoch of {num_samples:,} rows x {num_features} float32, batch {batch_size}",
                 xlabel="ms per epoch (log scale)")
plots.save(fig, "03_custom_loader-timing")
predicted = {"index-only": (40, 1200), "93 float32 columns": (10, 70)}
for task in tasks:
    print(f"{task}: BatchLoader {ms[task, 'DataLoader'] / ms[task, 'BatchLoader']:.0f}x faster than DataLoader, "
          f"{ms[task, 'slide FastDataloader'] / ms[task, 'BatchLoader']:.1f}x the slide's loader (single run)")
    _ = measure.predicted(f"{task}: DataLoader / BatchLoader", *predicted[task],
                          ms[task, "DataLoader"] / ms[task, "BatchLoader"], "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The estimates miss when the per-sample cost differs from notebook 01's range (a faster or busier CPU) or when
# the gather runs far from the copy rate (notebook 02: a probe that guesses wrong, threads that wait for a busy
# core). On the matrix the slide's `data[batch]` with an index tensor is advanced indexing, the general gather
# of notebook 02, while `BatchLoader` uses the faster of `index_select` and `np.take`, measured each epoch. The
# per-sample DataLoader pays a Python call per row and a stack of 300 rows per batch.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## On a GPU
#
# When the data already lives on the GPU, `BatchLoader` makes the permutation there too and every gather is a GPU
# kernel: no host work per batch besides launching it (the pattern of cifar10-airbench). This cell runs only
# where CUDA is available.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
device = config.device()
if device.type == "cuda":
    gpu_data = tasks["93 float32 columns"].to(device)
    gpu_loader = BatchLoader(gpu_data, batch_size, shuffle=True, seed=0)
    secs = measure.measure(measure.drain(gpu_loader), repeat=num_epochs, device=device)
    measure.show("BatchLoader epoch on GPU-resident data", measure.median(secs))
else:
    print("no CUDA device: skipping the GPU-resident loader (it runs the same code with the data on the GPU)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# The slide's ten lines already give most of the speed: one shuffle and one indexing call per batch. What they
# lack is semantics, not speed: drop_last, reproducible seeds per epoch, sharding, several fields, numpy and memmap
# data. `BatchLoader` adds those and yields exactly the index multisets and batch sizes of DataLoader and
# DistributedSampler; the ratios printed above say how far ahead of the per-sample DataLoader it stays here.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide's claim: a custom loader that indexes a whole batch at once is much faster than DataLoader. The
# claims registry holds the thresholds; nbval compares only which claims are checked and what each needs:

# %% slideshow={"slide_type": "-"}
from fastloops_book import claims

figures = {f"{t.split()[0]}_{k}_ms".replace(" ", "_").replace("-", "_"): v for (t, k), v in ms.items()}
checked = ("index_only_custom_over_dataloader", "index_only_batchloader_over_dataloader",
           "matrix_batchloader_over_dataloader", "matrix_batchloader_over_slide_loader")
for name in checked:
    print(f"{name}: {claims.get(name).claim}; needs {claims.get(name).needed()}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Each verdict is a ratio of two epoch medians from this run (a single run, not an interval). On the matrix every
# loader also copies the rows it hands over, which narrows the predicted gap to the DataLoader (the prediction above,
# against the index-only task's), and the ratio between the two custom loaders is decided by their
# gather primitives. The verdicts depend on the machine and its load, so nbval does not compare them:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
for name in checked:
    claims.check(name, figures)

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
knobs = {"samples": num_samples, "batch_size": batch_size, "features": num_features}
print("saved", measure.save_results("03_custom_loader", figures, results, knobs, num_epochs).name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each exercise is followed by a worked solution (folded); try it first.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Add `drop_last` to the slide's `FastDataloader` (a subclass whose `__next__` stops before a short batch:
# two lines) and check it against `BatchLoader(..., drop_last=True)` as in "Same sampling semantics". Look for the
# same number of batches, all full, and no index twice.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
class Ex1FastDataloader(FastDataloader):
    def __init__(self, dataset, batch_size, shuffle=True, drop_last=False):
        super().__init__(dataset, batch_size, shuffle)
        self.drop_last = drop_last

    def __next__(self):
        if self.drop_last and self.cursor + self.batch_size > len(self.data):
            raise StopIteration
        return super().__next__()


ex1_n = 1003
ex1_slide = [b.tolist() for b in Ex1FastDataloader(torch.arange(ex1_n), batch_size, drop_last=True)]
ex1_ours = [b.tolist() for b in BatchLoader(torch.arange(ex1_n), batch_size, shuffle=True, drop_last=True, seed=1)]
ex1_sizes = ([len(b) for b in ex1_slide], [len(b) for b in ex1_ours])
print("batch sizes, slide with drop_last:", ex1_sizes[0], "BatchLoader:", ex1_sizes[1])
ex1_seen = [i for b in ex1_slide for i in b]
assert ex1_sizes[0] == ex1_sizes[1] and len(set(ex1_seen)) == len(ex1_seen) == ex1_n // batch_size * batch_size

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Give `BatchLoader` a numpy memmap (`np.load(path, mmap_mode="r")` of an array saved with `np.save` to a
# temporary folder) instead of a tensor. Is the first epoch slower than the second? Why (think of the page cache:
# where are the file's pages right after `np.save` wrote them)? Check that the batches are the same rows as from the
# array in memory.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
import tempfile
from pathlib import Path

with tempfile.TemporaryDirectory() as ex2_dir:
    ex2_array = np.random.default_rng(0).random((num_samples, num_features), dtype=np.float32)
    np.save(Path(ex2_dir) / "x.npy", ex2_array)
    ex2_mm = np.load(Path(ex2_dir) / "x.npy", mmap_mode="r")
    ex2_loader = BatchLoader(ex2_mm, batch_size, shuffle=True, seed=0)
    ex2_epochs = measure.measure(measure.drain(ex2_loader), repeat=3, warmup=0)  # the first epoch is timed too
    ex2_first = next(iter(BatchLoader(ex2_mm, batch_size, shuffle=True, seed=0)))
    ex2_same = torch.equal(ex2_first, next(iter(BatchLoader(ex2_array, batch_size, shuffle=True, seed=0))))
    del ex2_loader, ex2_mm  # close the map before the folder goes
print("epoch times (ms):", [round(t * 1e3, 1) for t in ex2_epochs],
      f"first / second = {ex2_epochs[0] / ex2_epochs[1]:.2f}: the pages np.save just wrote are still in the page "
      "cache, so the first epoch reads RAM, not the disk")
print("memmap batch equals the in-memory one:", ex2_same)
assert ex2_same and ex2_first.shape == (batch_size, num_features)

# %% [markdown] slideshow={"slide_type": "-"}
# **3.** How much of an epoch is the shuffle (notebook 04)? On the index-only task at the slide's 300,000 rows,
# time `loader.indices()` (the order alone) and a whole epoch, for `shuffle=True` and `shuffle="grouped"`. Look for
# the shuffle's share of the epoch, and whether the grouped order makes that share smaller.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex3_shares(n):
    out = {}
    for shuffle in (True, "grouped"):
        loader3 = BatchLoader(torch.arange(n), batch_size, shuffle=shuffle, seed=0)
        t = measure.interleaved({"order": loader3.indices, "epoch": measure.drain(loader3)}, 5, warmup=1)
        out[shuffle] = (measure.median(t["order"]), measure.median(t["epoch"]), loader3)
    return out


ex3 = ex3_shares(300_000)
for shuffle, (order_s, epoch_s, _) in ex3.items():
    print(f"shuffle={shuffle!r}: order {order_s * 1e3:.2f} ms of a {epoch_s * 1e3:.2f} ms epoch "
          f"({order_s / epoch_s:.0%})")
ex3_grouped = ex3["grouped"][2].indices()
assert torch.equal(ex3_grouped.sort().values, torch.arange(300_000, dtype=ex3_grouped.dtype))  # still a permutation
assert len(ex3) == 2 and all(order_s < epoch_s for order_s, epoch_s, _ in ex3.values()), ex3  # the epoch draws its order first
