# %% [markdown] slideshow={"slide_type": "slide"}
# # 02 · What does one `__getitem__` per sample cost?
#
# | | |
# |---|---|
# | **Question** | How much slower is fetching a batch one sample at a time (`__getitem__` + collate) than fetching it with one batched index, and what do `__getitems__` and a batched gather save? |
# | **Seeds** | 000/001, "Inside PyTorch Dataset and DataLoader", "Example", "Base idea", "Custom Dataset" |
# | **GPU** | no |
# | **Run time** | <!-- run-time --> workshop ~20 s (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# Notebook 01 found the per-sample DataLoader orders of magnitude slower than a loop over whole index arrays. The
# slide explains why: a map-style Dataset answers one index per call, so a batch of 300 costs 300 Python calls plus
# a collate that stacks 300 small tensors. The slide times 100 single fetches stacked against one batched fetch of 100
# (its figures are quoted below from the claims registry). Here we measure the same on this machine, sweep the batch size, and follow the fix
# through DataLoader (`__getitems__`), including its pitfall.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader

from fastloops_helpers import config, measure
from fastloops_helpers.measure import plots
from fastloops_helpers.load import rows
from fastloops_helpers.experiments import gather, getitem
from fastloops_helpers.load.batch_loader import BatchLoader
from fastloops_helpers.load.getitems import BatchRowDataset, RowDataset, collate_batch

from fastloops_helpers.book import claims

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"}
num_samples = config.size("loops.samples")        # rows of the index tensor (the slide: 300,000)
num_features = config.size("getitem.features")    # columns of the float matrix (Otto's 93)
batch_sizes = list(config.size("getitem.batch_sizes"))  # the sweep; 100 is the slide's example
loader_rows = config.size("getitem.rows")         # rows for the DataLoader comparison (per-sample is slow)
batch_size = config.size("loops.batch_size")      # the slide's 300

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The slide's example: 100 fetches stacked, or one batched fetch
#
# **Prediction.** A Python call that indexes one element of a tensor costs on the order of a µs (argument parsing,
# a new tensor object): 100 of them plus `torch.stack` cost 100 x (0.5 to 2 µs), some 50-200 µs. One indexing
# call with a tensor of 100 indices pays that overhead once (2 to 10 µs) and copies 800 bytes. So a ratio
# between 50 / 10 = 5x and 200 / 2 = 100x. `getitem.slide_example` times both, interleaved, many calls per round;
# `python -m fastloops_helpers.book.bench getitem` saves the same figures.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
slide = getitem.slide_example(num_samples)
print(f"100 single fetches stacked: {slide['slide_100_per_sample_us']:.1f} µs; one batched fetch of 100: "
      f"{slide['slide_100_batched_us']:.2f} µs; {slide['slide_100_speedup']:.0f}x "
      f"(the slide: {claims.quote('slide_100_speedup')})")
_ = measure.predicted("100 single fetches / one batched fetch", 5, 100, slide["slide_100_speedup"], "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The estimate misses on the low side when the interpreter is fast and the machine idle (the per-call overhead
# is then nearer half a µs) and on the high side when `torch.stack` of 0-d tensors costs more than a
# copy per element, which depends on the torch version.

# %% [markdown] slideshow={"slide_type": "-"}
# Both results are the same tensor; only the number of Python-level calls differs:

# %% slideshow={"slide_type": "-"}
xx, index = torch.arange(num_samples), torch.arange(100)
assert torch.equal(torch.stack([xx[i] for i in range(100)]), xx[index])
print("same batch:", torch.equal(torch.stack([xx[i] for i in range(100)]), xx[index]))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Sweep the batch size
#
# If the per-sample path costs a fixed amount per sample and the batched path a fixed amount per call, then the
# per-sample path's µs per sample stays flat as the batch grows, while the batched path's µs per sample falls
# until the copy itself dominates. We time four ways to fetch random rows: `per_sample_stack` (what DataLoader and
# `default_collate` do), `per_sample_calls` (the Python calls alone, no stack), `batched_index` (`x[index]`, the
# slide) and `helpers_gather` (the gather `BatchLoader` uses).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
sweep = pd.DataFrame(getitem.sweep(xx, batch_sizes))
sweep.pivot(index="batch_size", columns="fetch", values="us_per_sample").round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.lines(sweep, x="batch_size", y="us_per_sample", hue="fetch", title="Fetching a batch of random indices",
                  xlabel="batch size", ylabel="µs per sample")
plots.save(fig, "02_getitem_cost-sweep")
at = sweep.set_index(["batch_size", "fetch"])["us_per_batch"]
big = batch_sizes[-1]
print(f"per-sample fetch at batch {big}: {at[big, 'per_sample_stack'] / at[big, 'batched_index']:.0f}x "
      "the batched one")


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
            "one batched call": lambda: xx[torch.tensor(items)]}


parts = {bs: {k: measure.median(v) * 1e6 for k, v in measure.per_call(part_fns(bs)).items()}
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
# one (`np.take`); `experiments.gather.run()`, the function behind `python -m fastloops_helpers.book.bench gather`,
# times a shuffled epoch of each, interleaved over rounds in a new order each round, plus `BatchLoader` (which
# picks between `np.take` and `index_select`) and the per-row stack for scale.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
gathers = gather.run()
gathers.table().round(3)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
gb = {r["gather"]: r["gb_per_s"] for r in gathers.rows}
print(f"np.take over advanced indexing: {gb['np_take'] / gb['advanced_indexing']:.1f}x; "
      f"index_select over advanced indexing: {gb['index_select'] / gb['advanced_indexing']:.1f}x")
print(f"BatchLoader: {gathers.figures['helpers_gb_per_s']:.2f} GB/s; its epoch takes "
      f"{gathers.figures['helpers_over_best_primitive']:.2f}x the faster primitive's of the same round")

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
                            "randperm, one thread": serial_randperm}, shuffle=True)
for name, values in both.items():
    measure.show(name, measure.median(values))
print(f"one thread / torch threads: {measure.ratio(both, 'randperm, one thread', 'randperm, torch threads'):.2f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## `__getitems__` through DataLoader, and its pitfall
#
# Since PyTorch 2.1, DataLoader calls `dataset.__getitems__(list_of_indices)` once per batch when the Dataset has
# it. `BatchRowDataset` adds it to the slide's per-sample Dataset (`load.getitems`) and returns the batch as one
# tensor. But DataLoader still passes whatever `__getitems__` returns to `collate_fn`, and `default_collate`
# expects a *list of samples*: given one batch tensor (or a dict of them) it fails.

# %% slideshow={"slide_type": "-"}
try:
    next(iter(DataLoader(BatchRowDataset(torch.arange(10)), batch_size=4)))
except (TypeError, KeyError) as err:
    print("default_collate on a batch tensor fails:", type(err).__name__)

# %% [markdown] slideshow={"slide_type": "subslide"}
# There are two ways out. The documented one: `__getitems__` gathers the batch at once but returns a list of samples
# (`load.getitems.SampleListDataset`), and `default_collate` stacks them again: one gather, but still a stack over
# samples. The slide's: keep the batch and pass it through with a collate that returns it unchanged
# (`load.getitems.collate_batch`; the slide writes `lambda x: x`, which breaks with workers under spawn because a lambda
# cannot be pickled).

# %% slideshow={"slide_type": "-"}
ds = BatchRowDataset(torch.arange(10))
passed = next(iter(DataLoader(ds, batch_size=4, collate_fn=collate_batch)))
print("collate_batch:", tuple(passed.shape), "| equal to the first 4 rows:", torch.equal(passed, torch.arange(4)))

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
matrix = torch.rand(loader_rows, num_features)
variants = getitem.dataloader_variants(matrix, batch_size)
epochs = pd.DataFrame(getitem.epoch_table(variants, repeat=config.size("loops.worker_epochs")))
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
by_kind = []
for kind, data in kinds.items():
    for row in getitem.epoch_table(getitem.dataloader_variants(data, batch_size), repeat=1):
        by_kind.append(dict(row, data=kind))
by_kind = pd.DataFrame(by_kind).pivot(index="loader", columns="data", values="ms_per_epoch")
by_kind.round(1)

# %% [markdown] slideshow={"slide_type": "subslide"}
# Whatever the container, every variant yields the same fields with the same batch size:

# %% slideshow={"slide_type": "-"}
for kind, data in kinds.items():
    per_sample = next(iter(DataLoader(RowDataset(data), batch_size=4)))
    ours = next(iter(BatchLoader(data, 4)))
    shape = lambda b: {k: tuple(v.shape) for k, v in b.items()} if isinstance(b, dict) else tuple(b.shape)
    print(f"{kind}: DataLoader {shape(per_sample)}, BatchLoader {shape(ours)}")

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
ms = dict(zip(epochs["loader"], epochs["ms_per_epoch"]))
slow, fixed = ms["DataLoader, per-sample __getitem__"], ms["DataLoader, __getitems__ + collate_batch"]
print(f"__getitems__ + collate_batch: {slow / fixed:.0f}x faster than per-sample; returning samples keeps "
      f"{ms['DataLoader, __getitems__ -> samples + default_collate'] / fixed:.1f}x of the cost; BatchLoader "
      f"{fixed / ms['BatchLoader']:.1f}x faster still")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# A per-sample fetch costs a Python call per sample, and collate adds a stack; one batched fetch pays its overhead
# once per batch, so its cost per sample falls with the batch size while the per-sample path stays flat. Through
# DataLoader, `__getitems__` recovers much of the gap only with a collate that passes the batch through; the
# remaining cost is DataLoader's per-index sampler, which `BatchLoader` (notebook 03) removes. For wide rows the
# gather primitive matters: advanced indexing takes the general path, and the best of the other two depends on
# the cores free at the moment. This run's figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
figures = dict(slide, getitems_collate_speedup=slow / fixed, helpers_gb_per_s=gathers.figures["helpers_gb_per_s"],
               helpers_over_best_primitive=gathers.figures["helpers_over_best_primitive"])
for key, value in figures.items():
    print(f"{key} = {value:.3g}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide: 100 single fetches stacked take far longer than one batched fetch of 100. We check that ratio, and
# that `__getitems__` with a pass-through collate beats the per-sample DataLoader, against the thresholds in the
# claims registry.

# %% slideshow={"slide_type": "-"}
claims.check("slide_100_speedup", figures)

# %% [markdown] slideshow={"slide_type": "-"}
# The `__getitems__` ratio compares two DataLoader epochs whose margin over the threshold is thinner on a small,
# busy run, so nbval does not compare its verdict:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
claims.check("getitems_collate_speedup", figures)

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
knobs = {"samples": num_samples, "features": num_features, "loader_rows": loader_rows, "batch_size": batch_size}
saved = measure.save_results("02_getitem_cost", figures, sweep.to_dict("records") + epochs.to_dict("records"),
                            knobs, config.size("repeat"))
print("saved", saved.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Repeat the sweep on `torch.rand(num_samples, 93)` instead of the index tensor. Does the stack take a larger
#    share of the per-sample path when each sample is a row of 93 floats?
# 2. Replace `collate_batch` with `lambda b: b` and run the DataLoader with `num_workers=2` and
#    `multiprocessing_context="spawn"`. What error do you get, and why does a module-level function avoid it?
# 3. Set `rows.CPU_GATHER = "index_select"`, then `"numpy"`, and run `gather.run()` each time, once as it is and
#    once while another process keeps a core busy (`python -c "while True: pass" &`). Which gather wins when?
