# %% [markdown] slideshow={"slide_type": "slide"}
# # 02 · What does one `__getitem__` per sample cost?
#
# | | |
# |---|---|
# | **Question** | How much slower is fetching a batch one sample at a time (`__getitem__` + collate) than fetching it with one batched index, and what do `__getitems__` and a batched gather save? |
# | **Seeds** | 000/001, "Inside PyTorch Dataset and DataLoader", "Example", "Base idea", "Custom Dataset" |
# | **GPU** | no |
# | **Run time** | <!-- run-time --> workshop ~22 s (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# Notebook 01 found the per-sample DataLoader orders of magnitude slower than a loop over whole index arrays. The
# slide explains why: a map-style Dataset answers one index per call, so a batch of 300 costs 300 Python calls plus
# a collate that stacks 300 small tensors. The slide times 100 single fetches stacked against one batched fetch of 100
# (its figures are quoted below from the claims registry). Here we measure the same on this machine, sweep the batch
# size, and follow the fix through DataLoader: the slide's `FD` Dataset with `__getitems__`, its pitfall, and the
# helpers' versions of both.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset

from fastloops_helpers import config, measure
from fastloops_book import claims
from fastloops_book.source import show_code
from fastloops_helpers.load import getitems, rows
from fastloops_helpers.load.batch_loader import BatchLoader
from fastloops_helpers.load.getitems import (BatchRowDataset, GetItemsMixin, RowDataset, SampleListDataset,
                                             collate_batch)
from fastloops_helpers.measure import plots

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
num_samples = config.size("loops.samples")        # length of the index tensor (the slide: 300,000)
batch_sizes = list(config.size("getitem.batch_sizes"))  # the sweep; 100 is the slide's example
repeat = config.size("repeat")                    # timed rounds of the short fetches (more: steadier medians)
batch_size = config.size("loops.batch_size")      # the slide's DataLoader batch of 300
num_features = config.size("getitem.features")    # columns of the float matrix (Otto's 93); wider rows copy more
loader_rows = config.size("getitem.rows")         # rows for the DataLoader comparisons (per-sample is slow)
loader_epochs = config.size("loops.worker_epochs")  # timed DataLoader epochs per variant, after a warm-up
gather_rows = config.size("gather.rows")          # rows of the matrix the gathers read (more than the caches hold)
gather_batch_size = config.size("gather.batch_size")  # rows per gathered batch: larger amortises each call
gather_rounds = config.size("gather.rounds")      # interleaved rounds of the gather epochs

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The slide's example: 100 fetches stacked, or one batched fetch
#
# The slide's two expressions, as functions: `per_sample_fetch` indexes one element per call and stacks the
# results, as DataLoader and `default_collate` do for a per-sample Dataset; `batched_fetch` makes one indexing
# call with a tensor of indices.

# %% slideshow={"slide_type": "-"}
# the slide's two fetches (the cells below time these functions)
def per_sample_fetch(x: torch.Tensor, items: list[int]) -> torch.Tensor:
    """The slide's slow fetch: one `x[i]` call per index, then a stack (what `default_collate` does)."""
    return torch.stack([x[i] for i in items])


def batched_fetch(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The slide's fast fetch: one indexing call with a tensor of indices."""
    return x[index]


# %% [markdown] slideshow={"slide_type": "subslide"}
# Both return the same tensor; only the number of Python-level calls differs. One slip in the slide: its
# `%timeit` of the batched side runs `idxs = torch.arange(100); xx[idxs]`, so its figure also pays for
# building the index tensor, which is no part of the fetch (a loader gets its indices from the sampler) and
# makes the batched side look slower than it is. Here the index tensor is built once, before any clock starts
# (below), and only `batched_fetch(xx, index)` is timed, so the batched figure
# here and the slide's are not quite the same measurement:

# %% slideshow={"slide_type": "-"}
xx, index = torch.arange(num_samples), torch.arange(100)
same = torch.equal(per_sample_fetch(xx, range(100)), batched_fetch(xx, index))
print("same batch:", same)
assert same and torch.equal(batched_fetch(xx, index), index)  # xx[i] is i

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction.** A Python call that indexes one element of a tensor costs on the order of a µs (argument parsing,
# a new tensor object): 100 of them plus `torch.stack` cost 100 x (0.5 to 2 µs), some 50-200 µs. One indexing
# call with a tensor of 100 indices pays that [overhead](https://horace.io/brrr_intro.html) once (2 to 10 µs) and copies 800 bytes. So a ratio
# between 50 / 10 = 5x and 200 / 2 = 100x. The cell below times the two functions above, interleaved,
# many calls per round; `python -m fastloops_book.bench getitem` saves the same figures.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
slide_fns = {"per_sample": lambda: per_sample_fetch(xx, range(100)), "batched": lambda: batched_fetch(xx, index)}
seconds = measure.per_call(slide_fns, repeat=repeat, block_s=0.01)
slide = {"slide_100_per_sample_us": measure.median(seconds["per_sample"]) * 1e6,
         "slide_100_batched_us": measure.median(seconds["batched"]) * 1e6,
         "slide_100_speedup": measure.ratio(seconds, "per_sample", "batched")}  # median of per-round ratios
print(f"100 single fetches stacked: {slide['slide_100_per_sample_us']:.1f} µs; one batched fetch of 100: "
      f"{slide['slide_100_batched_us']:.2f} µs; {slide['slide_100_speedup']:.0f}x "
      f"(the slide: {claims.quote('slide_100_speedup')})")
_ = measure.predicted("100 single fetches / one batched fetch", 5, 100, slide["slide_100_speedup"], "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The estimate misses on the low side when the interpreter is fast and the machine idle (the per-call overhead
# is then nearer half a µs) and on the high side when `torch.stack` of 0-d tensors costs more than a
# copy per element, which depends on the torch version.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Sweep the batch size
#
# If the per-sample path costs a fixed amount per sample and the batched path a fixed amount per call, then the
# per-sample path's µs per sample stays flat as the batch grows (say within 2x from the smallest batch to the
# largest), while the batched path's µs per sample falls until the copy itself dominates (to well under half). `fetches` below names four ways to fetch a batch of rows: `per_sample_stack`
# (`per_sample_fetch`), `per_sample_calls` (the Python calls alone, no stack), `batched_index` (`batched_fetch`)
# and `helpers_gather` (`rows.gather`, the gather `BatchLoader` uses).

# %% [markdown] slideshow={"slide_type": "-"}
# The helpers' fetch is `rows.gather`, which `BatchLoader` calls for every chunk of rows it gathers. On the CPU it
# picks `np.take` or `index_select` (the module-level switch `rows.CPU_GATHER`, whose default `"measure"` lets
# `BatchLoader` choose per epoch, as the gather section below explains), on a GPU `index_select`:

# %% slideshow={"slide_type": "subslide"}
# the helpers' fetch: BatchLoader calls it for every chunk of rows (so does `helpers_gather` in the sweep)
show_code(rows.gather)


# %% slideshow={"slide_type": "subslide"}
def fetches(x: torch.Tensor, index: torch.Tensor) -> dict[str, Callable[[], Any]]:
    """{name: fetch the rows `index` of `x` once} for each way of fetching a batch."""
    items = index.tolist()
    return {"per_sample_stack": lambda: per_sample_fetch(x, items),  # what DataLoader + default_collate do
            "per_sample_calls": lambda: [x[i] for i in items],  # the Python calls alone, no stack
            "batched_index": lambda: batched_fetch(x, index),  # the slide's one call
            "helpers_gather": lambda: rows.gather(x, index)}  # what BatchLoader uses


check = fetches(xx, torch.tensor([7, 3, 7]))
assert all(torch.equal(check[k](), torch.tensor([7, 3, 7])) for k in check if k != "per_sample_calls")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
sweep_gen, sweep = torch.Generator().manual_seed(0), []  # random row indices, the same on every run
for bs in measure.progress(batch_sizes, desc="batch sizes"):
    seconds = measure.per_call(fetches(xx, torch.randint(len(xx), (bs,), generator=sweep_gen)), repeat=repeat)
    sweep += [{"batch_size": bs, "fetch": k, "us_per_batch": measure.median(v) * 1e6} for k, v in seconds.items()]
sweep = pd.DataFrame(sweep)
sweep["us_per_sample"] = sweep.us_per_batch / sweep.batch_size
sweep.pivot(index="batch_size", columns="fetch", values="us_per_sample").round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.lines(sweep, x="batch_size", y="us_per_sample", hue="fetch", title="Fetching a batch of random indices",
                  xlabel="batch size", ylabel="µs per sample")
plots.save(fig, "02_getitem_cost-sweep")
at = sweep.set_index(["batch_size", "fetch"])["us_per_batch"]
big = batch_sizes[-1]
print(f"per-sample fetch at batch {big}: {at[big, 'per_sample_stack'] / at[big, 'batched_index']:.0f}x "
      "the batched one")
per_sample = sweep.set_index(["batch_size", "fetch"])["us_per_sample"]
small = batch_sizes[0]
for fetch, low, high in (("per_sample_stack", 0.5, 2), ("batched_index", 0, 0.5)):
    _ = measure.predicted(f"{fetch}, µs per sample at batch {big} / at batch {small}", low, high,
                          per_sample[big, fetch] / per_sample[small, fetch], "x")


# %% [markdown] slideshow={"slide_type": "slide"}
# ## Where the time goes
#
# The per-sample path has two parts: the Python calls that each return a new 0-d tensor, and the stack that
# `default_collate` does. We time them apart on the slide's batch of 100 and on the batch size of notebook 01:
# the calls alone, the stack of an already fetched list, and the one batched call.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
def part_fns(bs: int) -> dict:
    items = torch.randint(num_samples, (bs,)).tolist()
    fetched = [xx[i] for i in items]
    return {"python calls": lambda: [xx[i] for i in items], "stack (collate)": lambda: torch.stack(fetched),
            "one batched call": lambda: batched_fetch(xx, torch.tensor(items))}


parts = {bs: {k: measure.median(v) * 1e6 for k, v in measure.per_call(part_fns(bs), repeat=repeat).items()}
         for bs in (100, batch_size)}
parts = pd.DataFrame(parts).T.rename_axis("batch_size")
parts.round(1)

# %% [markdown] slideshow={"slide_type": "-"}
# Both parts of the per-sample path grow with the batch; the batched call, which includes turning the list of
# indices into a tensor, pays one call's overhead plus a small copy. This run's ratios:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for bs, row in parts.iterrows():
    print(f"batch {bs}: calls + stack = {(row['python calls'] + row['stack (collate)']) / row['one batched call']:.1f}x "
          "the one batched call")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Which gather for a matrix?
#
# Real rows are wider: Otto has 93 float32 features per row. Gathering 1024 shuffled rows from a 300,000 x 93
# matrix moves 1024 x 93 x 4 B, about 380 KB, per batch, so the limit is memory bandwidth (notebook 00 measured
# this machine's copy rate). torch offers two gathers (`index_select` and advanced indexing `x[index]`) and numpy
# one (`np.take`); the per-row stack is there for scale. The cell below defines the four candidates, and the
# measurement after it times these functions: edit one and its row of the table moves.

# %% slideshow={"slide_type": "subslide"}
# the four candidates: the table below times these functions
def index_select(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """torch's row gather; on the CPU it splits the rows across torch's threads."""
    return x.index_select(0, index)


def advanced_indexing(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The general path: any index shapes, broadcasting."""
    return x[index]


def np_take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """numpy's row gather, on one thread, over the tensor's own memory (no copy in, none out)."""
    return torch.from_numpy(np.take(x.numpy(), index.numpy(), axis=0))


def per_row_stack(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """A Python call per row, then a stack: the per-sample path, for scale."""
    return torch.stack([x[j] for j in index.tolist()])


# %% [markdown] slideshow={"slide_type": "subslide"}
# `per_batch` makes one shuffled epoch of a gather: a permutation cut into batches, one call per batch. The
# cells below time an epoch of each primitive, interleaved over rounds in a new order each round, plus `BatchLoader`
# (`python -m fastloops_book.bench gather` runs this notebook and saves the same figures). The loader cuts
# the epoch's permutation into chunks of about 512 KiB of rows and gathers each chunk with `rows.gather` (shown in
# the sweep section), which picks `np.take` or `index_select`:

# %% slideshow={"slide_type": "subslide"}
# BatchLoader's epoch: gather a chunk of rows per call, then cut it into batches (views)
show_code(BatchLoader._iter_gathered)


# %% slideshow={"slide_type": "subslide"}
def per_batch(x: torch.Tensor, batch_size: int, fetch: Callable, seed: int = 0) -> Callable[[], None]:
    """One shuffled epoch: draw a permutation and call `fetch(x, indices)` once per batch."""
    g = torch.Generator().manual_seed(seed)

    def epoch() -> None:
        for index in torch.randperm(len(x), generator=g).split(batch_size):
            fetch(x, index)

    return epoch


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
primitives = {"index_select": index_select, "advanced_indexing": advanced_indexing, "np_take": np_take}
gather_x = torch.rand(gather_rows, num_features, generator=torch.Generator().manual_seed(0))
gather_epochs = {"helpers": measure.drain(BatchLoader(gather_x, gather_batch_size, shuffle=True, seed=0))}
gather_epochs |= {k: per_batch(gather_x, gather_batch_size, f) for k, f in primitives.items()}
gather_s = measure.interleaved(gather_epochs, gather_rounds, warmup=1, desc="gather", shuffle=True)
slow = {"per_row_stack": per_batch(gather_x, gather_batch_size, per_row_stack)}  # a call per row: one epoch
gather_s |= measure.interleaved(slow, 1, warmup=0, desc="per row")
gathers = pd.DataFrame({"gather": k, "ms_per_epoch": measure.median(v) * 1e3, "p95_ms": measure.p95(v) * 1e3,
                        "gb_per_s": gather_x.nbytes / measure.median(v) / 1e9, "epochs": len(v)}
                       for k, v in gather_s.items()).sort_values("gb_per_s", ascending=False, ignore_index=True)
gathers.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
gb = dict(zip(gathers.gather, gathers.gb_per_s))
best = [min(pair) for pair in zip(gather_s["np_take"], gather_s["index_select"])]  # BatchLoader's two, per round
gather_figures = {"helpers_gb_per_s": gb["helpers"],
                  "helpers_over_best_primitive": measure.ratio(gather_s | {"best": best}, "helpers", "best"),
                  "helpers_epoch_ms": measure.median(gather_s["helpers"]) * 1e3,  # the medians behind that ratio
                  "best_primitive_epoch_ms": measure.median(best) * 1e3}
gather_figures |= {f"{k}_gb_per_s": v for k, v in gb.items() if k != "helpers"}
print(f"np.take over advanced indexing: {gb['np_take'] / gb['advanced_indexing']:.1f}x; "
      f"index_select over advanced indexing: {gb['index_select'] / gb['advanced_indexing']:.1f}x")
print(f"BatchLoader: {gb['helpers']:.2f} GB/s; its epoch takes "
      f"{gather_figures['helpers_over_best_primitive']:.2f}x the faster primitive's of the same round")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Advanced indexing is the general path (any index shapes, broadcasting); `index_select` and `np.take` are
# specialised for "rows of a matrix". On a CPU, torch splits `index_select` across its threads. That makes it
# the faster gather on an idle machine with several cores, and a slow one as soon as another process keeps a
# core busy: its threads wait for each other at every call. The single-threaded `np.take` does not wait. Which
# one wins is a property of the moment, not of the code, so `BatchLoader` measures it: by default
# (`rows.CPU_GATHER = "measure"`) it times both on the first chunks of every epoch and gathers the rest with the
# faster. The probe costs a little every epoch and can guess wrong when the machine's load changes within an
# epoch; the ratio printed above (its epoch over the faster primitive's) shows what that costs here. On a GPU it
# uses `index_select`.
#
# The loader applies the same lesson to its shuffle: `torch.randperm` fills its output with a parallel loop
# before the serial shuffle, so `BatchLoader` makes the permutation with one thread (`order.one_thread`).
# The cell below times both ways, interleaved.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
from fastloops_helpers.load.order import one_thread


def serial_randperm():
    with one_thread():
        return torch.randperm(num_samples, dtype=torch.int32)


both = measure.interleaved({"randperm, torch threads": lambda: torch.randperm(num_samples, dtype=torch.int32),
                            "randperm, one thread": serial_randperm}, repeat=repeat, shuffle=True)
for name, values in both.items():
    measure.show(name, measure.median(values))
print(f"one thread / torch threads: {measure.ratio(both, 'randperm, one thread', 'randperm, torch threads'):.2f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## `__getitems__` through DataLoader: the slide's Datasets
#
# Since PyTorch 2.1, DataLoader calls `dataset.__getitems__(list_of_indices)` once per batch when the Dataset has
# it. The slide's `D` answers one index per call; its `FD` adds `__getitems__`, which indexes the data once with
# the whole list. The code is the slide's:

# %% slideshow={"slide_type": "subslide"}
# the slide's two Datasets
class D(Dataset):
    """The slide's per-sample Dataset: DataLoader calls `__getitem__` once per index of a batch."""

    def __init__(self, data):
        self.data = data

    def __getitem__(self, idx):
        return self.data[idx]

    def __len__(self):
        return len(self.data)


class FD(D):
    """The slide's batched Dataset: DataLoader calls `__getitems__` once per batch with the list of its indices."""

    def __getitems__(self, idxs):
        return self[idxs]


# %% [markdown] slideshow={"slide_type": "subslide"}
# The pitfall: DataLoader still passes whatever `__getitems__` returns to `collate_fn`, and `default_collate`
# expects a *list of samples*. Given one batch tensor it fails, which is why the slide passes
# `collate_fn=lambda x: x`:

# %% slideshow={"slide_type": "-"}
try:
    next(iter(DataLoader(FD(torch.arange(10)), batch_size=4)))
except (TypeError, KeyError) as err:
    print("default_collate on a batch tensor fails:", type(err).__name__)
fd_batches = list(DataLoader(FD(torch.arange(10)), batch_size=4, collate_fn=lambda x: x))
print("with lambda x: x:", fd_batches[0])
d_batches = list(DataLoader(D(torch.arange(10)), batch_size=4))
assert len(fd_batches) == 3 and all(torch.equal(a, b) for a, b in zip(d_batches, fd_batches))  # the same batches


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction.** Through DataLoader, `D` pays a Python call per sample plus a stack per batch (the sweep's
# per-sample path), `FD` one call per batch; both pay DataLoader's own per-batch work (the sampler yields the
# batch's indices one by one). So `FD` should win by at least 2x, and by less than the sweep's ratio at the batch
# size nearest to the loader's. The slide builds both loaders, but its timed loop drains `dl`, the per-sample
# one, so as written it never times `fdl` and shows nothing of what `__getitems__` saves; here one epoch of
# each loader is timed, on `torch.arange(loader_rows)`:

# %% slideshow={"slide_type": "-"}
def per_epoch_ms(seconds: dict[str, list[float]]) -> pd.DataFrame:
    """ms per epoch of each loader (the median over rounds), from `measure.interleaved`'s seconds per epoch."""
    return pd.DataFrame({"loader": k, "ms_per_epoch": measure.median(v) * 1e3} for k, v in seconds.items())


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
slide_data = torch.arange(loader_rows)
slide_loaders = {
    "D, default_collate": measure.drain(DataLoader(D(slide_data), batch_size=batch_size, shuffle=True)),
    "FD, lambda x: x": measure.drain(DataLoader(FD(slide_data), batch_size=batch_size, shuffle=True,
                                                collate_fn=lambda x: x)),
}
slide_s = measure.interleaved(slide_loaders, loader_epochs, warmup=1, desc="epochs")  # after one warm-up epoch
slide_epochs = per_epoch_ms(slide_s).set_index("loader")
print(slide_epochs.round(2))
near = min(batch_sizes, key=lambda b: abs(b - batch_size))
ceiling = at[near, "per_sample_stack"] / at[near, "batched_index"]  # the sweep's ratio, without DataLoader
_ = measure.predicted(f"FD over D per epoch (ceiling: the sweep at batch {near})", 2, ceiling,
                      slide_epochs.ms_per_epoch.iloc[0] / slide_epochs.ms_per_epoch.iloc[1], "x")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The helpers' Datasets
#
# `load.getitems` generalises the slide's pair to any rows: a tensor, a numpy array (or memmap) or a dict of them.
# `RowDataset` is `D`; a batch index goes through the fast gather (`rows.take`, which applies `gather` to every
# field).

# %% slideshow={"slide_type": "subslide"}
# runs in DataLoader worker processes, so it lives in the package: one row, or a batch through rows.take
show_code(RowDataset, getitems._index)

# %% [markdown] slideshow={"slide_type": "subslide"}
# `BatchRowDataset` is `FD`. Its partner `collate_batch` does what the slide's `lambda x: x` does, but as a
# module-level function: a lambda cannot be pickled, so it breaks DataLoader workers under spawn and forkserver.
# `SampleListDataset` is the documented way out: `__getitems__` gathers the batch at once but returns a list of
# samples, and `default_collate` stacks them again (one gather, but still a stack over samples).

# %% slideshow={"slide_type": "subslide"}
# runs in DataLoader worker processes, so it lives in the package
show_code(GetItemsMixin, BatchRowDataset, SampleListDataset, collate_batch)

# %% slideshow={"slide_type": "-"}
ds = BatchRowDataset(torch.arange(10))
passed = next(iter(DataLoader(ds, batch_size=4, collate_fn=collate_batch)))
print("collate_batch:", tuple(passed.shape), "| equal to the first 4 rows:", torch.equal(passed, torch.arange(4)))


# %% [markdown] slideshow={"slide_type": "subslide"}
# `dataloader_variants` makes one shuffled epoch of DataLoader with each of them, and of `BatchLoader`
# (notebook 03), on a `loader_rows` x `num_features` float matrix:

# %% slideshow={"slide_type": "-"}
def dataloader_variants(data: Any, batch_size: int) -> dict[str, Callable[[], Any]]:
    """{name: one shuffled epoch} of DataLoader per sample, with `__getitems__`, and of BatchLoader."""

    def dl(dataset: Any, **kw: Any) -> Callable[[], Any]:
        return measure.drain(DataLoader(dataset, batch_size=batch_size, shuffle=True, **kw))

    return {"DataLoader, per-sample __getitem__": dl(RowDataset(data)),
            "DataLoader, __getitems__ -> samples + default_collate": dl(SampleListDataset(data)),
            "DataLoader, __getitems__ + collate_batch": dl(BatchRowDataset(data), collate_fn=collate_batch),
            "BatchLoader": measure.drain(BatchLoader(data, batch_size, shuffle=True, seed=0))}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
matrix = torch.rand(loader_rows, num_features)
variants = dataloader_variants(matrix, batch_size)
epochs = per_epoch_ms(measure.interleaved(variants, loader_epochs, warmup=1, desc="epochs"))
epochs["x_fastest"] = epochs["ms_per_epoch"] / epochs["ms_per_epoch"].min()
epochs.round(2)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The same for numpy arrays and dict samples
#
# A numpy array behind a per-sample Dataset makes `default_collate` convert each row to a tensor before stacking; a
# dict sample makes it collate every key separately. The batched paths handle both with one gather per field:
# `BatchLoader` wraps numpy arrays (and memmaps) as tensors without a copy, and `BatchRowDataset` indexes every
# field of a dict with the same index tensor.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
labels = torch.randint(0, 9, (loader_rows,))
kinds = {"numpy array": matrix.numpy(), "dict of tensors": {"X": matrix, "y": labels}}
by_kind = pd.concat([per_epoch_ms(measure.interleaved(dataloader_variants(data, batch_size), 1, warmup=1))
                     .assign(data=kind) for kind, data in kinds.items()])
by_kind = by_kind.pivot(index="loader", columns="data", values="ms_per_epoch")
by_kind.round(1)

# %% [markdown] slideshow={"slide_type": "-"}
# Whatever the container, every variant yields the same fields with the same batch size:

# %% slideshow={"slide_type": "subslide"}
for kind, data in kinds.items():
    per_sample = next(iter(DataLoader(RowDataset(data), batch_size=4)))
    ours = next(iter(BatchLoader(data, 4)))
    shape = lambda b: {k: tuple(v.shape) for k, v in b.items()} if isinstance(b, dict) else tuple(b.shape)
    print(f"{kind}: DataLoader {shape(per_sample)}, BatchLoader {shape(ours)}")

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
ms = dict(zip(epochs["loader"], epochs["ms_per_epoch"]))
slow, fixed = ms["DataLoader, per-sample __getitem__"], ms["DataLoader, __getitems__ + collate_batch"]
ahead = fixed / ms["BatchLoader"]
print(f"__getitems__ + collate_batch: {slow / fixed:.0f}x faster than per-sample; returning samples makes its epoch "
      f"{ms['DataLoader, __getitems__ -> samples + default_collate'] / fixed:.1f}x as long; BatchLoader "
      + (f"{ahead:.1f}x faster still" if ahead >= 1 else f"{1 / ahead:.1f}x slower than it") + " (single runs)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# A per-sample fetch costs a Python call per sample, and collate adds a stack; one batched fetch pays its overhead
# once per batch, so its cost per sample falls with the batch size while the per-sample path stays flat. Through
# DataLoader, `__getitems__` recovers much of the gap only with a collate that passes the batch through; the
# remaining cost is DataLoader's machinery around the fetch: its sampler hands out indices as Python ints, and
# `__getitems__` receives them as a list to turn back into an index; `BatchLoader` (notebook 03) slices one
# permutation tensor instead. For wide rows the gather primitive matters: advanced indexing takes the general
# path, and the best of the other two depends on the cores free at the moment. This run's figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
slide_ms = slide_epochs.ms_per_epoch
figures = dict(slide, getitems_collate_speedup=slow / fixed, dataloader_per_sample_epoch_ms=slow,
               dataloader_getitems_collate_epoch_ms=fixed, **gather_figures,  # each gather's GB/s and the ratio
               slide_fd_over_d=slide_ms.iloc[0] / slide_ms.iloc[1], slide_d_epoch_ms=slide_ms.iloc[0],
               slide_fd_epoch_ms=slide_ms.iloc[1])
for key, value in figures.items():
    print(f"{key} = {value:.3g}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide: 100 single fetches stacked take far longer than one batched fetch of 100. We check that ratio, and
# that `__getitems__` with a pass-through collate beats the per-sample DataLoader, against the thresholds in the
# claims registry; nbval compares only which claims are checked and what each needs:

# %% slideshow={"slide_type": "-"}
checked = ("slide_100_speedup", "getitems_collate_speedup")
for name in checked:
    print(f"{name}: {claims.get(name).claim}; needs {claims.get(name).needed()}")

# %% [markdown] slideshow={"slide_type": "-"}
# Both are ratios of timings from this run: the slide's pair is timed interleaved, the `__getitems__` pair in
# two DataLoader epochs whose margin over the threshold is thinner on a small, busy run. Their verdicts depend on
# the machine and its load, so nbval does not compare them:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for name in checked:
    claims.check(name, figures)

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
knobs = {"samples": num_samples, "batch_sizes": batch_sizes, "repeat": repeat, "batch_size": batch_size,
         "features": num_features, "loader_rows": loader_rows, "loader_epochs": loader_epochs,
         "gather": {"rows": gather_rows, "batch_size": gather_batch_size, "rounds": gather_rounds,
                    "dtype": "float32", "torch_threads": torch.get_num_threads()}}
saved_rows = sweep.to_dict("records") + epochs.to_dict("records") + gathers.to_dict("records")
saved = measure.save_results("02_getitem_cost", figures, saved_rows, knobs, repeat)
print("saved", saved.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Time the two parts of the per-sample path apart, as `part_fns` does, on a float matrix
# `torch.rand(num_samples, num_features)` instead of the index tensor. A row of 93 floats is 372 bytes where an
# integer is 8: does the stack (collate) take more time per sample, and a larger share of the per-sample path?
# Look at the stack's time for rows against integers, next to the ratio of their bytes: which does the stack's cost
# follow, the bytes it copies or the number of tensors it stacks?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex1_parts(data: dict[str, torch.Tensor], bs: int) -> list[dict]:
    """Return a row per kind of `data`: µs per batch of its calls and its stack, all timed in the same rounds."""
    fns = {}
    for kind, x in data.items():
        items = torch.randint(len(x), (bs,)).tolist()
        fetched = [x[i] for i in items]
        assert torch.stack(fetched).shape == (bs, *x.shape[1:])  # the batch the collate makes
        fns[kind, "calls"] = lambda x=x, items=items: [x[i] for i in items]
        fns[kind, "stack"] = lambda fetched=fetched: torch.stack(fetched)
    us = {k: measure.median(v) * 1e6 for k, v in measure.per_call(fns, repeat=repeat).items()}
    return [dict(kind=kind, batch_size=bs, calls=us[kind, "calls"], stack=us[kind, "stack"]) for kind in data]


ex1_data = {"integers": xx, "rows": torch.rand(num_samples, num_features)}
ex1 = pd.DataFrame([row for bs in (100, batch_size) for row in ex1_parts(ex1_data, bs)])
ex1 = ex1.set_index(["batch_size", "kind"])
ex1["stack_share"] = ex1["stack"] / (ex1["calls"] + ex1["stack"])
print(ex1.unstack("kind").round(2))  # µs per batch, and the stack's share of the per-sample path
ex1_bytes = num_features * ex1_data["rows"].element_size() / ex1_data["integers"].element_size()
ex1_stack = {bs: ex1.loc[(bs, "rows"), "stack"] / ex1.loc[(bs, "integers"), "stack"] for bs in (100, batch_size)}
for bs, grew in ex1_stack.items():
    print(f"batch {bs}: a row has {ex1_bytes:.0f}x an integer's bytes; stacking rows takes {grew:.2f}x the time "
          f"(single run); the stack's share of the per-sample path is {ex1.loc[(bs, 'integers'), 'stack_share']:.2f} "
          f"for integers, {ex1.loc[(bs, 'rows'), 'stack_share']:.2f} for rows: "
          + ("larger" if ex1.loc[(bs, "rows"), "stack_share"] > ex1.loc[(bs, "integers"), "stack_share"] else "smaller"))
print("the stack's time follows the number of tensors, not their bytes: each of the batch's tensors is checked "
      "and its header read, while the bytes are a few hundred kB at most, a fraction of a cache")
assert max(ex1_stack.values()) < ex1_bytes / 4  # per tensor, not per byte: the stack grows far less than the bytes

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Run the slide's `D` and `FD` loops with `batch_size=30` and with `batch_size=3000` (in place of the
# slide's 300). Which of the two epochs changes with the batch size, and why? Time DataLoader's sampler alone
# too (`BatchSampler(RandomSampler(slide_data), bs, drop_last=False)`, what DataLoader iterates for the indices):
# how much of `FD`'s epoch is it?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
from torch.utils.data import BatchSampler, RandomSampler


def ex2_epochs(bs: int) -> tuple[dict, dict]:
    loaders = {"D": DataLoader(D(slide_data), batch_size=bs, shuffle=True),
               "FD": DataLoader(FD(slide_data), batch_size=bs, shuffle=True, collate_fn=lambda x: x),
               "sampler alone": BatchSampler(RandomSampler(slide_data), bs, drop_last=False)}
    seconds = measure.interleaved({k: measure.drain(v) for k, v in loaders.items()}, repeat, warmup=1, desc="epochs")
    table = per_epoch_ms(seconds)
    ms = dict(zip(table.loader, table.ms_per_epoch))
    print(f"batch {bs}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items()) + " per epoch; "
          f"the sampler is {ms['sampler alone'] / ms['FD']:.0%} of FD's epoch")
    return loaders, ms


ex2 = {bs: ex2_epochs(bs) for bs in (30, 3000)}
for name in ("D", "FD"):
    print(f"{name}: an epoch in batches of 3000 takes {ex2[3000][1][name] / ex2[30][1][name]:.2f}x "
          "one in batches of 30")
print("D's epoch is mostly per-sample work (a Python call per index), which no batch size removes; FD's is "
      "per-batch work (DataLoader's fetch machinery), which larger batches amortise, plus turning each list of "
      "Python ints back into an index, which they do not")
assert len(ex2) == 2 and all(sum(len(b) for b in loader) == loader_rows
                            for loaders, _ in ex2.values() for loader in loaders.values())  # every row, once per epoch
assert all(ms["sampler alone"] < ms["FD"] for _, ms in ex2.values()), ex2  # FD's epoch iterates that sampler

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3.** Replace `collate_batch` with `lambda b: b` and start a DataLoader with one worker under
# `multiprocessing_context="spawn"`, then under `"fork"`. What error do you get, when, and why does a module-level
# function such as `collate_batch` avoid it? Think about how each start method gives the worker its Dataset and
# its collate function.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
import pickle
import warnings


def ex3_first_batch(context: str, collate: Callable) -> Any:
    loader = DataLoader(BatchRowDataset(torch.arange(10)), batch_size=4, collate_fn=collate, num_workers=1,
                        multiprocessing_context=context)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DataLoader adds a hint about the start method to the error
        return next(iter(loader))


try:
    ex3_first_batch("spawn", lambda b: b)
    ex3_spawn_error = None
except (pickle.PicklingError, AttributeError, TypeError) as ex3_err:
    ex3_spawn_error = f"{type(ex3_err).__name__} - {ex3_err}"  # its text: the error's frames would keep the loader
print("spawn + lambda:", ex3_spawn_error)
ex3_fork = ex3_first_batch("fork", lambda b: b)
print("fork + lambda:", ex3_fork.tolist(), "(the child inherits the lambda: nothing is pickled)")
print("collate_batch pickles by reference:", pickle.loads(pickle.dumps(collate_batch)) is collate_batch)
assert ex3_spawn_error is not None and torch.equal(ex3_fork, torch.arange(4))
assert pickle.loads(pickle.dumps(collate_batch)) is collate_batch

# %% [markdown] slideshow={"slide_type": "-"}
# **4.** `rows.gather` takes a `primitive` ("numpy", "index_select" or "advanced"). Time a shuffled epoch of a
# `gather_rows` x `num_features` matrix with each, using `per_batch` and `measure.interleaved`. Which
# is fastest here, and does it match the gather table above? Do all three return the same rows?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex4_x = torch.rand(gather_rows, num_features)
ex4 = measure.interleaved({p: per_batch(ex4_x, gather_batch_size, lambda x, i, p=p: rows.gather(x, i, p))
                           for p in ("numpy", "index_select", "advanced")}, repeat=gather_rounds, shuffle=True)
for ex4_name, ex4_seconds in sorted(ex4.items(), key=lambda kv: measure.median(kv[1])):
    print(f"{ex4_name:>12}: {ex4_x.nbytes / measure.median(ex4_seconds) / 1e9:.2f} GB/s")
ex4_index = torch.randperm(gather_rows)[:gather_batch_size]
ex4_batches = [rows.gather(ex4_x, ex4_index, p) for p in ("numpy", "index_select", "advanced")]
assert all(torch.equal(b, ex4_batches[0]) for b in ex4_batches)  # the same rows, whichever primitive
# rows gathered through memory: above 100 kB/s even when a thread is starved of its core (torch's threaded
# gathers can fall a hundredfold beside a busy process, as the table above warns), below a TB/s, more than any
# memory moves
ex4_rates = [ex4_x.nbytes / measure.median(v) for v in ex4.values()]
assert 1e5 < min(ex4_rates) and max(ex4_rates) < 1e12, ex4_rates
