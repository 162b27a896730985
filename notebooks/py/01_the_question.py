# %% [markdown] slideshow={"slide_type": "slide"}
# # 01 · Which loop is fastest?
#
# | | |
# |---|---|
# | **Question** | Which is the fastest way to iterate over E epochs x N samples in batches of 300: pure Python, a PyTorch DataLoader with workers, tf.data, or numpy? |
# | **Seeds** | 000/001, "Introduction: Question" and the four loop slides |
# | **GPU** | optional: with CUDA the DataLoader also pins memory, as on the slide; nothing else changes |
# | **Run time** | <!-- run-time --> workshop ~29 s (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# The slide asks which of four loops finishes 1000 epochs over 300,000 samples, batch size 300, first. The loops
# do nothing with the batches: only the *loop* is timed (shuffle, cut into batches, hand each batch over).
# Whatever a loop costs here, it costs on top of every training step. We time each loop per epoch, add three
# more (DataLoader without workers, DataLoader over a `__getitems__` Dataset, the slide's own custom loader) and
# the helpers' `BatchLoader`, and answer the question with a table.
# The figures are computed by `experiments.loops.run()`, the same function `python -m fastloops_helpers.book.bench loops`
# calls, so this notebook and the benchmark report one measurement.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import os

import numpy as np
import pandas as pd
import torch

from fastloops_helpers import config, measure
from fastloops_helpers.measure import plots
from fastloops_helpers.experiments import loops

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"}
num_samples = config.size("loops.samples")        # the slide: 300,000; smaller runs faster, same ranking
batch_size = config.size("loops.batch_size")       # the slide's 300
num_rounds = config.size("loops.rounds")           # interleaved rounds of the vectorised loops (the slide: 1000 epochs)
slow_rounds = config.size("loops.worker_epochs")   # rounds of the slower loops (up to seconds each)
num_workers = loops.workers()                      # the slide's 10, capped by the cores here

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print(f"{num_samples:,} samples, batch {batch_size}, {num_samples // batch_size:,} batches per epoch, "
      f"{num_rounds} rounds of the vectorised loops, {slow_rounds} of the slower ones, num_workers={num_workers}")

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
# ## Measure every loop, tf.data included
#
# `experiments.loops` holds each loop as a one-epoch function written as on the slides (`python`, `numpy`,
# `dataloader_workers` with `prefetch_factor=16` and `persistent_workers=True`), plus `dataloader_nw0` (no
# workers), `dataloader_getitems` (a Dataset with `__getitems__`, notebook 02), `slide_fast_dataloader` (the
# slide's custom loader, notebook 03), `helpers` (`BatchLoader`, notebook 03) and, when TensorFlow is installed
# (the `tf` extra), `tf_data`: the slide's pipeline, a shuffle buffer as large as the data set, reshuffled every
# epoch, then `batch(300)` and `prefetch(AUTOTUNE)`.
#
# `loops.run()` times them with the one harness (`measure.interleaved`): every loop gets an untimed warm-up
# epoch (which also starts the persistent workers), then rounds of one epoch of each loop in a new random order,
# so that a noisy neighbour slows them all alike and no loop always follows the same one. The close contenders
# (numpy, the helpers, the slide's loader: a few ms each) are timed in their own group and get more rounds;
# `helpers_over_numpy` is the median over rounds of the per-round ratio. TensorFlow runs last, so that its
# thread pools never run beside the other loops (its start-up log lines go to the terminal, not here).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
result = loops.run()
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
print(f"fastest here: {table['loop'].iloc[0]}; numpy is {ms['dataloader_nw0'] / ms['numpy']:.0f}x faster than "
      f"DataLoader without workers and {ms['dataloader_workers'] / ms['numpy']:.0f}x faster than with {num_workers}")
print(f"BatchLoader / numpy (median of per-round ratios): {result.figures['helpers_over_numpy']:.2f}; "
      f"DataLoader (no workers) / BatchLoader: {result.figures['dataloader_nw0_over_helpers']:.0f}")
print(f"1000 epochs of this size would take: numpy {ms['numpy']:.0f} s, DataLoader with workers "
      f"{ms['dataloader_workers'] / 60:.0f} min")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
per_sample_ns = {loop: ms[loop] * 1e6 / num_samples for loop in ms}
_ = measure.predicted("numpy, ns per sample", 5, 50, per_sample_ns["numpy"], "ns")
_ = measure.predicted("pure Python, ns per sample", 200, 1000, per_sample_ns["python"], "ns")
_ = measure.predicted("DataLoader without workers, ns per sample", 2000, 6000, per_sample_ns["dataloader_nw0"], "ns")
_ = measure.predicted("DataLoader (no workers) / numpy", 40, 1200, ms["dataloader_nw0"] / ms["numpy"], "x")
if "tf_data" in ms:
    print(f"tf.data: {ms['tf_data'] / ms['dataloader_nw0']:.2f}x the per-sample DataLoader's epoch time, "
          f"{ms['tf_data'] / ms['numpy']:.0f}x numpy's")

# %% [markdown] slideshow={"slide_type": "-"}
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
# - **tf.data** runs the shuffle buffer and the batching in C++ threads, but one element at a time; where it
#   lands between the vectorised loops and the per-sample DataLoader depends on how many cores its threads get
#   (printed above).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# For this index-only task the loops that shuffle and batch whole arrays (numpy, `BatchLoader`, the slide's
# custom loader) pay per batch, the DataLoader pays per sample, with or without workers; pure Python pays per
# sample only in its shuffle. The cost is per-sample Python work, so the cure is one operation per batch, not
# more processes. This run's figures:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
for key in ("dataloader_nw0_over_numpy", "dataloader_workers_over_numpy", "dataloader_nw0_over_helpers",
            "helpers_over_numpy"):
    print(f"{key} = {result.figures[key]:.3g}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide's implied answer: the numpy loop is the fastest of the four and the PyTorch DataLoader, with or
# without workers, is far slower. The claims registry holds the thresholds; this cell (compared by nbval) checks
# only ratios that hold with a wide margin on any machine.

# %% slideshow={"slide_type": "-"}
from fastloops_helpers.book import claims

for name in ("dataloader_nw0_over_numpy", "dataloader_workers_over_numpy", "dataloader_nw0_over_helpers"):
    claims.check(name, result.figures)

# %% [markdown] slideshow={"slide_type": "-"}
# How close `BatchLoader` comes to numpy is a ratio of two loops that take a few ms each; a busy neighbour moves it
# by more than the margin, so its verdict is printed in a cell that nbval does not compare:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
claims.check("helpers_over_numpy", result.figures)

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
print("saved", measure.save_results("01_the_question", result.figures, result.rows, result.knobs,
                                   result.repeats).name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Time `loops.dataloader(num_samples, batch_size, w)` for `w = 0, 1, 2, 4` with
#    `measure.interleaved({w: measure.drain(...) for w in ...})`. Where does adding workers
#    stop helping on this machine, and why (count the cores)?
# 2. Change `batch_size` to 30 and to 3000. Which loops' epoch times change most, and what does that tell you about
#    their cost per batch versus per sample?
# 3. Run with `FASTLOOPS_SCALE=full` only the numpy and helpers loops (`measure.interleaved` over those two of
#    `loops.loops(...)`) for 1000 rounds: how long is the slide's whole experiment for the fastest loop?
