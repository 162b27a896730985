# %% [markdown] slideshow={"slide_type": "slide"}
# # 01 · Which loop is fastest?
#
# | | |
# |---|---|
# | **Question** | Which is the fastest way to iterate over E epochs x N samples in batches of 300: pure Python, a PyTorch DataLoader with workers, tf.data, or numpy? |
# | **Seeds** | 000/001, "Introduction: Question" and the four loop slides |
# | **GPU** | optional: with CUDA the DataLoader also pins memory, as on the slide; nothing else changes |
# | **Optional** | tensorflow: the `tf.data` loop is left out without it |
# | **Run time** | <!-- run-time --> workshop ~1.1 min (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# The slide asks which of four loops finishes 1000 epochs over 300,000 samples, batch size 300, first. The loops
# do nothing with the batches: only the *loop* is timed (shuffle, cut into batches, hand each batch over).
# Whatever a loop costs here, it costs on top of every training step. We time each loop per epoch, add three
# more (DataLoader without workers, DataLoader over a `__getitems__` Dataset, the slide's own custom loader) and
# the helpers' `BatchLoader`, and answer the question with a table. Every loop is on screen before it is timed.
# The figures are computed by `experiments.loops.measure_loops(...)`, called with this notebook's defaults and the
# loops its cells define; the benchmark `python -m fastloops_book.bench loops` calls the same function with
# the scale's sizes and the package's copy of those cells, so this notebook and the benchmark report one measurement.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import os
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from fastloops_helpers import BatchLoader, config, measure
from fastloops_book.source import show_code
from fastloops_helpers.experiments import loops
from fastloops_helpers.load.getitems import BatchRowDataset, GetItemsMixin, RowDataset, collate_batch
from fastloops_helpers.measure import plots
from fastloops_helpers.teach import slide_code
from fastloops_helpers.teach.slide_code import loader_epoch

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
num_samples = config.size("loops.samples")        # the slide: 300,000; smaller runs faster, same ranking
batch_size = config.size("loops.batch_size")       # the slide's 300: smaller means more per-batch work per epoch
num_rounds = config.size("loops.rounds")           # rounds of the vectorised loops: more, steadier (the slide: 1000)
slow_rounds = config.size("loops.worker_epochs")   # rounds of the slower loops (up to seconds each): more, slower
pair_rounds = config.size("loops.pair_rounds")     # rounds of DataLoader (no workers) vs helpers: 9+ leave an outlier out
num_workers = loops.workers()                      # the slide's 10, capped by the cores here; 0 drops that loop

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print(f"{num_samples:,} samples, batch {batch_size}, {num_samples // batch_size:,} batches per epoch, "
      f"{num_rounds} rounds of the vectorised loops, {pair_rounds} of the per-sample DataLoader beside them, "
      f"{slow_rounds} of the slower ones, num_workers={num_workers}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Predict first
#
# Each loop does the same work: make a random order of N indices, then hand over N / 300 batches. What differs is
# how many *Python-level operations* happen per sample, and that sets the cost per sample.
#
# **Estimate** of the cost per sample, from typical per-operation costs:
# - **numpy**: one `permutation`, a C loop over N (a random draw and a swap: about 5-50 ns per element), and
#   N / 300 row views. So N x (5 to 50 ns) per epoch.
# - **pure Python**: `random.sample` runs a Python-level loop over N (about 0.2-1 µs per element) and builds a
#   list; slicing N / 300 times is cheap. So N x (0.2 to 1 µs).
# - **DataLoader**: its sampler yields N Python ints, the Dataset's `__getitem__` runs N times and
#   `default_collate` stacks 300 zero-dimensional tensors per batch: about 2-6 µs per sample in all.
#   Workers run the same per-sample code in other processes and add pickling of every batch; with few cores
#   they cannot win much back.
# - **tf.data**: the shuffle buffer and batching run in C++, but still one element at a time.
#
# **Prediction:** the loops that work on whole index arrays should beat the per-sample DataLoader by the ratio of those
# per-sample costs: (2 to 6 µs) / (5 to 50 ns), between 40x and 1200x. The cell after the measurement sets
# these predictions beside the measured times.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The four loops of the slide
#
# Each loop is written as a function that makes *one epoch* and returns how many batches it handed over, so that
# the harness can time epochs. The code is the slide's, and the measurement below receives these cells' functions:
# edit one, and the edit is what gets timed. These cells are the loops' only home: the benchmark (`bench loops`)
# executes this notebook. Pure Python: `random.sample` shuffles a list of ints, then slices of it are the batches.

# %% slideshow={"slide_type": "subslide"}
def python_epoch(n: int, batch_size: int) -> Callable[[], int]:
    """Return one epoch of the slide's pure-Python loop (`random.sample` of a list, then slices); it counts batches."""
    dataset = list(range(n))

    def epoch() -> int:
        batches = 0
        order = random.sample(dataset, k=len(dataset))
        for start in range(0, len(order), batch_size):
            order[start:start + batch_size]
            batches += 1
        return batches
    return epoch

# %% [markdown] slideshow={"slide_type": "-"}
# PyTorch: a `DataLoader` over `torch.arange(n)` with `shuffle=True`. It samples one index at a time, fetches one
# 0-d tensor per index and collates `batch_size` of them. The slide adds 10 workers, `prefetch_factor=16`,
# persistent workers and [pinned memory](https://developer.nvidia.com/blog/how-optimize-data-transfers-cuda-cc/) (pinned only where CUDA exists here).

# %% slideshow={"slide_type": "subslide"}
def slide_dataloader(n: int, batch_size: int, num_workers: int) -> DataLoader:
    """Return the slide's DataLoader over `torch.arange(n)`; with workers, prefetch_factor=16 and persistent."""
    extra = dict(prefetch_factor=16, persistent_workers=True) if num_workers else {}
    return DataLoader(torch.arange(n), batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available(), **extra)

# %% [markdown] slideshow={"slide_type": "-"}
# TensorFlow: `tf.data` with a shuffle buffer as large as the data set, reshuffled every epoch, then `batch` and
# `prefetch(AUTOTUNE)`. TensorFlow is optional here (the `tf` extra); without it the loop is skipped.

# %% slideshow={"slide_type": "-"}
def tf_data_pipeline(n: int, batch_size: int) -> Any:
    """Return the slide's tf.data pipeline (shuffle buffer of n, batch, prefetch), or None without TensorFlow."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    dataset = tf.data.Dataset.range(n)
    return (dataset.shuffle(buffer_size=dataset.cardinality(), reshuffle_each_iteration=True)
            .batch(batch_size).prefetch(tf.data.AUTOTUNE))

# %% [markdown] slideshow={"slide_type": "subslide"}
# numpy: one `permutation` of the whole index, `reshape(-1, batch_size)`, and each row is a batch (so `n` must be a
# multiple of `batch_size`, as on the slide).

# %% slideshow={"slide_type": "-"}
def numpy_epoch(n: int, batch_size: int, seed: int = 0) -> Callable[[], int]:
    """Return one epoch of the slide's numpy loop (`permutation`, `reshape(-1, batch_size)`); it counts batches."""
    dataset, rng = np.arange(n), np.random.default_rng(seed)

    def epoch() -> int:
        batches = 0
        for _ in rng.permutation(dataset).reshape(-1, batch_size):
            batches += 1
        return batches
    return epoch

# %% [markdown] slideshow={"slide_type": "-"}
# The DataLoader and the tf.data pipeline are looped over as on the slide, `for batch in loader`; one epoch of
# that loop, counting the batches, is a function too:

# %% slideshow={"slide_type": "subslide"}
show_code(loader_epoch)  # in the package: notebook 03 times it too

# %% slideshow={"slide_type": "-"}
print("batches per epoch of 3,000 indices in batches of 300:", python_epoch(3000, 300)(), numpy_epoch(3000, 300)(),
      loader_epoch(slide_dataloader(3000, 300, 0))())

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Four more loops
#
# - **DataLoader without workers** (`dataloader_nw0`): `slide_dataloader(n, batch_size, 0)`, the per-sample
#   protocol alone, without the transport between processes.
# - **DataLoader over a `__getitems__` Dataset** (`dataloader_getitems`, notebook 02): the Dataset fetches a whole
#   batch with one call, and `collate_batch` passes it on unchanged. A Dataset may run in worker processes, which
#   import it, so it lives in the package; the cell below renders the package's code, the code that runs.

# %% slideshow={"slide_type": "subslide"}
# Datasets run in DataLoader worker processes, which must import them from the package
show_code(RowDataset, GetItemsMixin, BatchRowDataset, collate_batch)

# %% slideshow={"slide_type": "-"}
getitems_batch = next(iter(DataLoader(BatchRowDataset(torch.arange(10)), batch_size=4, collate_fn=collate_batch)))
print("one __getitems__ call per batch:", getitems_batch.tolist())

# %% [markdown] slideshow={"slide_type": "subslide"}
# - **The slide's custom loader** (`slide_fast_dataloader`): one `randperm` per epoch, then `data[indices]` for
#   each slice of it. Notebook 03 explains it; here it is rendered from the package, whose class is timed:

# %% slideshow={"slide_type": "-"}
show_code(slide_code.FastDataloader)

# %% [markdown] slideshow={"slide_type": "subslide"}
# - **The helpers' `BatchLoader`** (`helpers`, notebook 03): an epoch takes this epoch's order from its sampler
#   (one shuffle of 32-bit indices), then gathers many batches per call and cuts them into batches. Its epoch, as
#   the package has it (notebook 03 shows the gather):

# %% slideshow={"slide_type": "-"}
show_code(BatchLoader.__iter__, BatchLoader._batches)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Measure every loop, tf.data included
#
# `loops.slide_loops` builds one epoch function of each loop from the code above, with this notebook's
# `num_samples`, `batch_size` and `num_workers`. The slide's code comes in `slide` ({name: object}), every name
# required: this notebook passes its cells' functions, and the benchmark executes this notebook:

# %% slideshow={"slide_type": "subslide"}
show_code(loops.slide_loops)

# %% [markdown] slideshow={"slide_type": "subslide"}
# `loops.measure_loops(num_samples, batch_size, num_workers, num_rounds, slow_rounds, pair_rounds, slide=slide)` times them
# with the one harness (`measure.interleaved`): every loop gets an untimed warm-up epoch (which also starts the
# persistent workers and counts the batches), then rounds of one epoch of each loop in a new random order, so
# that a noisy neighbour slows them all alike and no loop always follows the same one.
# - The close contenders (numpy, the helpers, the slide's loader: the three that pay per batch, not per sample)
#   run in their own group over
#   `num_rounds`, then over more rounds while the 95-percent interval of `helpers_over_numpy` is wider than
#   +-5 percent of its median, up to twice that time (`measure.interleaved_until_steady`: it stops on the
#   interval's width, never on the verdict).
# - The per-sample DataLoader without workers runs beside the helpers and numpy over `pair_rounds`, so that
#   `dataloader_nw0_over_helpers` is per round too; the other slower loops run over `slow_rounds`.
# - TensorFlow runs last, so that its thread pools never run beside the other loops (its start-up log lines go
#   to the terminal, not here).
#
# A ratio of two loops timed in the same rounds is the median of the per-round ratios, with the 95-percent
# interval of that median.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
slide = {"python_epoch": python_epoch, "numpy_epoch": numpy_epoch, "slide_dataloader": slide_dataloader,
         "tf_data_pipeline": tf_data_pipeline, "loader_epoch": loader_epoch}  # this notebook's cells: what is timed
result, per_round = loops.measure_loops(num_samples, batch_size, num_workers, num_rounds, slow_rounds, pair_rounds,
                                        slide=slide)
seconds_per_epoch = {r["loop"]: r["ms_per_epoch"] / 1e3 for r in result.rows}
for name, seconds in seconds_per_epoch.items():
    measure.show(f"{name} (median epoch)", seconds)

# %% [markdown] slideshow={"slide_type": "-"}
# TensorFlow is optional; the next cell says whether `tf_data` was measured here.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print("tf.data measured:", "yes" if result.knobs["tf_data"] else "no (pip install -e '.[tf]' to add it)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The answer, as a table and a chart
#
# Milliseconds per epoch (median and p95), samples per second, and how many times slower than the fastest loop.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
table = result.table()
table.round({"ms_per_epoch": 2, "p95_ms": 2, "samples_per_s": 0, "x_fastest": 1})

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.bars(table, "ms_per_epoch", "loop", baseline=table["loop"].iloc[0], log=True,
                 title=f"One epoch of {num_samples:,} samples, batch {batch_size}", xlabel="ms per epoch (log scale)")
plots.save(fig, "01_the_question-loops")
ms = dict(zip(table["loop"], table["ms_per_epoch"]))
print(f"fastest here: {table['loop'].iloc[0]}; numpy is {result.figures['dataloader_nw0_over_numpy']:.0f}x faster "
      f"than DataLoader without workers (median of per-round ratios)", end="")
print(f" and {ms['dataloader_workers'] / ms['numpy']:.0f}x faster than with {num_workers} (single run)" if num_workers else "")
print(f"BatchLoader / numpy (median of {len(per_round['helpers_over_numpy'])} per-round ratios): "
      f"{result.figures['helpers_over_numpy']:.2f}; DataLoader (no workers) / BatchLoader (median of "
      f"{len(per_round['dataloader_nw0_over_helpers'])}): {result.figures['dataloader_nw0_over_helpers']:.0f}")
print(f"1000 epochs of this size would take: numpy {ms['numpy']:.1f} s, DataLoader without workers "
      f"{ms['dataloader_nw0'] / 60:.0f} min")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
per_sample_ns = {loop: ms[loop] * 1e6 / num_samples for loop in ms}
_ = measure.predicted("numpy, ns per sample", 5, 50, per_sample_ns["numpy"], "ns")
_ = measure.predicted("pure Python, ns per sample", 200, 1000, per_sample_ns["python"], "ns")
_ = measure.predicted("DataLoader without workers, ns per sample", 2000, 6000, per_sample_ns["dataloader_nw0"], "ns")
_ = measure.predicted("DataLoader (no workers) / numpy", 40, 1200, per_round["dataloader_nw0_over_numpy"], "x")
if "tf_data" in ms:
    where = ("between numpy and the per-sample DataLoader" if ms["numpy"] < ms["tf_data"] < ms["dataloader_nw0"]
             else "slower than the per-sample DataLoader" if ms["tf_data"] >= ms["dataloader_nw0"] else "ahead of numpy")
    print(f"tf.data: {ms['tf_data'] / ms['dataloader_nw0']:.2f}x the per-sample DataLoader's epoch time, "
          f"{ms['tf_data'] / ms['numpy']:.0f}x numpy's: {where} (single run)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The per-sample estimates are rough on purpose: they miss when the CPU is much faster or slower than a
# typical laptop or cloud core, when another process shares the cores (the per-sample loops suffer most: they
# hold the interpreter for the whole epoch), or, for numpy, when the index no longer fits in the caches
# (notebook 04: each random swap then waits for RAM).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Why each loop is fast or slow
#
# - **numpy, the helpers' `BatchLoader` and the slide's custom loader** touch the indices as whole arrays: one
#   shuffle in C, then one operation per *batch*. What remains is the shuffle itself (notebook 04 makes it
#   cheaper) and a few µs of Python per batch. `BatchLoader` shuffles 32-bit indices on one thread and gathers
#   many batches with one call, but it also yields torch tensors (a tensor view costs more to make than a numpy
#   row view) and does a gather that the numpy loop does not; the ratio printed above shows where that leaves it.
# - **pure Python** pays a Python-level operation per *sample* in `random.sample`, but nothing per sample after it.
# - **DataLoader without workers** pays per sample three times: the sampler yields an int, `__getitem__` returns a
#   0-d tensor, and `default_collate` stacks 300 of them. Its `__getitems__` variant (notebook 02) makes one call
#   per batch; what it recovers is printed in the table: the slowness is the per-sample protocol, not
#   DataLoader itself.
# - **DataLoader with workers** does the same per-sample work in other processes and adds pickling every batch
#   through a queue. Workers help when `__getitem__` does real work (decoding a JPEG, notebook 07); when each
#   sample costs a µs, the transport can cost more than it saves, and the workers share the machine's cores.
# - **tf.data** runs the shuffle buffer and the batching in C++ threads, but one element at a time, so it pays
#   per sample as the DataLoader does, only in C++; where it lands against numpy and the per-sample DataLoader
#   depends on how many cores its threads get (printed above).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# For this index-only task the loops that shuffle and batch whole arrays (numpy, `BatchLoader`, the slide's
# custom loader) pay per batch, the DataLoader pays per sample, with or without workers; pure Python pays per
# sample only in its shuffle. The cost is per-sample Python work, so the cure is one operation per batch, not
# more processes. This run's figures:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
for key in ("dataloader_nw0_over_numpy", "dataloader_nw0_over_helpers", "helpers_over_numpy"):
    low, high = result.figures[f"{key}_ci_low"], result.figures[f"{key}_ci_high"]
    print(f"{key} = {result.figures[key]:.3g} (95 % interval {low:.3g} to {high:.3g}, {len(per_round[key])} rounds)")
if "dataloader_workers_over_numpy" in result.figures:
    print(f"dataloader_workers_over_numpy = {result.figures['dataloader_workers_over_numpy']:.3g} "
          "(single run: the medians of two groups, not per round)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide's implied answer: the numpy loop is the fastest of the four and the PyTorch DataLoader, with or
# without workers, is far slower. The claims registry holds the thresholds; nbval compares only which claims are
# checked and what each needs:

# %% slideshow={"slide_type": "-"}
from fastloops_book import claims

checked = ("dataloader_nw0_over_numpy", "dataloader_workers_over_numpy", "dataloader_nw0_over_helpers",
           "helpers_over_numpy")
for name in checked:
    print(f"{name}: {claims.get(name).claim}; needs {claims.get(name).needed()}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The ratios timed together in each round are judged by the 95-percent interval of their median: "met" or
# "missed" only when the whole interval lies on one side of the threshold, otherwise a tie on this machine. How
# close `BatchLoader` comes to numpy is a ratio of two loops that both pay per batch, so a tie is a fair outcome;
# the half-width says how narrow an interval this scale's rounds afford (fewer than 6 rounds cannot bound it at
# all). The two ratios of group medians are single runs. These verdicts depend on the run, so nbval does not compare
# this cell:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for name in checked[2:]:
    claim, ratios = claims.get(name), per_round[name]
    low, high = measure.median_interval(ratios)
    half = (high - low) / 2 / measure.median(ratios)  # the interval's half-width, as a share of the median
    threshold = claim.at_least if claim.at_least is not None else claim.at_most
    print(f"{name}: {measure.verdict(ratios, threshold, higher_is_better=claim.at_least is not None)}; "
          + (f"half-width +-{half:.0%} of the median" if np.isfinite(half) else "unbounded: fewer than 6 rounds"))
for name in checked:
    claims.check(name, result.figures)

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
print("saved", measure.save_results("01_the_question", result.figures, result.rows, result.knobs,
                                   result.repeats).name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each exercise is followed by a worked solution (folded); try it first.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Time `slide_dataloader(num_samples, batch_size, w)` for `w = 0, 1, 2, 4` workers with
# `measure.interleaved({...: loader_epoch(...)})`. Where does adding workers stop helping on this machine, and
# why (count the cores)? Look for the speedup over `w = 0` to level off near the number of cores, or to drop
# below 1 when each sample costs a µs and the workers' transport costs more than it saves.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
import warnings


def ex1_epoch_seconds(counts):
    with warnings.catch_warnings():  # torch warns when the workers outnumber the cores: that is the point here
        warnings.simplefilter("ignore", UserWarning)
        epochs = {f"{w} workers": loader_epoch(slide_dataloader(num_samples, batch_size, w)) for w in counts}
        batches = {name: epoch() for name, epoch in epochs.items()}  # the warm-up epoch: starts the workers
    seconds = measure.interleaved(epochs, 2, warmup=0, shuffle=True)
    return {name: measure.median(s) for name, s in seconds.items()}, batches


ex1_seconds, ex1_batches = ex1_epoch_seconds([0, 1, 2, 4])
ex1_cores = os.cpu_count() or 1
for name, sec in ex1_seconds.items():
    print(f"{name}: {sec * 1e3:.0f} ms per epoch, {ex1_seconds['0 workers'] / sec:.2f}x the speed of 0 workers")
ex1_best = min(ex1_seconds, key=ex1_seconds.get)
ex1_gain = ex1_seconds["0 workers"] / ex1_seconds[ex1_best]
print(f"fastest: {ex1_best} on {ex1_cores} cores, {ex1_gain:.2f}x the speed of 0 workers (single run): "
      + ("no worker count helps here: each sample costs about a µs, and moving it between processes costs more"
         if ex1_best == "0 workers" else "workers help up to this count; beyond the cores they only share them"))
assert set(ex1_batches.values()) == {-(-num_samples // batch_size)}  # every worker count hands over every batch
# w workers and this process: at most w + 1 processes at work, on at most the cores (a quarter's room for noise)
assert all(ex1_seconds["0 workers"] / sec <= 1.25 * min(int(name.split()[0]) + 1, ex1_cores)
           for name, sec in ex1_seconds.items()), ex1_seconds

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Change `batch_size` to 30 and to 3000. Which loops' epoch times change most, and what does that tell you
# about their cost per batch versus per sample? Call `loops.measure_loops` with each batch size and `slide=slide`
# (`num_workers=0` and `with_tf=False` keep it short) and compare the two tables: a loop that pays per batch gets
# much cheaper with fewer, larger batches; one that pays per sample barely moves.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex2_results = {bs: loops.measure_loops(num_samples, bs, 0, num_rounds, slow_rounds, pair_rounds, with_tf=False,
                                      slide=slide)[0]
               for bs in (30, 3000)}
ex2_ms = {bs: {r["loop"]: r["ms_per_epoch"] for r in res.rows} for bs, res in ex2_results.items()}
ex2_change = {loop: ex2_ms[30][loop] / ex2_ms[3000][loop] for loop in ex2_ms[30]}  # batch 30's epoch over 3000's
for loop in sorted(ex2_change, key=ex2_change.get, reverse=True):
    print(f"{loop:>22}: {ex2_ms[30][loop]:9.2f} ms at batch 30, {ex2_ms[3000][loop]:9.2f} ms at batch 3000, "
          f"{ex2_change[loop]:6.1f}x")
ex2_batches = {bs: {r["loop"]: r["batches_per_epoch"] for r in res.rows} for bs, res in ex2_results.items()}
print("batches per epoch:", {bs: sorted(set(b.values())) for bs, b in ex2_batches.items()})
assert all(set(ex2_batches[bs].values()) == {-(-num_samples // bs)} for bs in (30, 3000))  # the measurement moved
# a hundred times fewer batches: a loop that pays per batch gets several times cheaper, one that pays per sample not
assert max(ex2_change.values()) > 3 and min(ex2_change.values()) < 2, ex2_change

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3.** How long would the slide's whole experiment (1000 epochs of 300,000 samples) take for the fastest loop?
# Time numpy, the helpers and the per-sample DataLoader at the slide's 300,000 samples (`loops.slide_loops(300_000,
# batch_size, 0, with_tf=False, slide=slide)`, a few rounds of `measure.interleaved` over those three) and multiply
# by 1000. Look for seconds against minutes.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex3_loops = loops.slide_loops(300_000, batch_size, 0, with_tf=False, slide=slide)
ex3_names = ("numpy", "helpers", "dataloader_nw0")
ex3_seconds = measure.interleaved({k: ex3_loops[k] for k in ex3_names}, 3, warmup=1, shuffle=True)
ex3_total = {k: measure.median(v) * 1000 for k, v in ex3_seconds.items()}
for k, total in ex3_total.items():
    print(f"{k}: 1000 epochs of 300,000 samples take about {total:.1f} s ({total / 60:.1f} min, single run)")
ex3_fast = min(ex3_total[k] for k in ex3_names[:2])
print(f"the per-sample DataLoader takes {ex3_total['dataloader_nw0'] / ex3_fast:.0f}x the fastest loop's time")
assert ex3_loops["numpy"]() == 300_000 // batch_size  # the slide's 1000 batches per epoch
assert ex3_fast < ex3_total["dataloader_nw0"] / 3  # per batch against per sample: a margin of tens of x
