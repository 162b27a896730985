# %% [markdown] slideshow={"slide_type": "slide"}
# # 01 · Which loop is fastest?
#
# | | |
# |---|---|
# | **Question** | Which is the fastest way to iterate over E epochs x N samples in batches of 300: pure Python, a PyTorch DataLoader with workers, tf.data, or numpy? |
# | **Seeds** | 000/001, "Introduction: Question" and the four loop slides |
# | **GPU** | optional: with CUDA the DataLoader also pins memory, as on the slide; nothing else changes |
# | **Run time** | smoke ~20 s · workshop ~1 min · full: hours (1000 epochs of the slow loops) |
#
# The slide asks which of four loops finishes 1000 epochs over 300,000 samples, batch size 300, first. The loops
# do nothing with the batches: only the *loop* is timed (shuffle, cut into batches, hand each batch over).
# Whatever a loop costs here, it costs on top of every training step. We time each loop per epoch, add three
# more (DataLoader without workers, DataLoader over a `__getitems__` Dataset, the slide's own custom loader) and
# the helpers' `BatchLoader`, and answer the question with a table.

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
num_epochs = config.size("loops.epochs")           # timed epochs of the fast loops (the slide: 1000)
slow_epochs = config.size("loops.worker_epochs")   # timed epochs of the per-sample loops (seconds each)
num_workers = loops.workers()                      # the slide's 10, capped by the cores here

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print(f"{num_samples:,} samples, batch {batch_size}, {num_samples // batch_size:,} batches per epoch, "
      f"{num_epochs} timed epochs (slow loops: {slow_epochs}), num_workers={num_workers}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Predict first
#
# Each loop does the same work: make a random order of N indices, then hand over N / 300 batches. What differs is
# how many *Python-level operations* happen per sample:
#
# - **numpy**: one `permutation` (a C loop over N, a few ns per element) and N / 300 row views. A few ms per epoch.
# - **pure Python**: `random.sample` draws N random numbers in Python-called C code (tens of ns each) and builds a
#   list; slicing 1,000 times is cheap. Tens to a hundred ms.
# - **DataLoader**: its sampler yields N Python ints, the Dataset's `__getitem__` runs N times (about a µs each)
#   and `default_collate` stacks 300 zero-dimensional tensors per batch. About a second per epoch.
#   Workers run the same per-sample code in other processes and add pickling of every batch; on a machine with
#   few cores they cannot win much back.
# - **tf.data**: the shuffle buffer and batching run in C++, but still one element at a time. In between.
#
# So the prediction is numpy (and any loader that works on whole index arrays) first, by one to three orders of
# magnitude over the per-sample DataLoader.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Measure the loops that need only torch and numpy
#
# `fastloops_helpers.bench.loops` holds each loop as a one-epoch function written as on the slides (`python`,
# `numpy`, `dataloader_workers` with `prefetch_factor=16` and `persistent_workers=True`), plus
# `dataloader_nw0` (no workers), `dataloader_getitems` (a Dataset with `__getitems__`, notebook 02),
# `slide_fast_dataloader` (the slide's custom loader, notebook 03) and `helpers` (`BatchLoader`, notebook 03).
# The fast loops are timed one epoch each in turn, so that a noisy neighbour slows them all alike;
# every loop gets one untimed warm-up epoch (which also starts the persistent workers).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
epochs = loops.loops(num_samples, batch_size)
slow = {k: epochs.pop(k) for k in loops.SLOW}
seconds = loops.time_epochs(epochs, num_epochs, desc="fast loops")
seconds |= loops.time_epochs(slow, slow_epochs, desc="slow loops")
for name, values in seconds.items():
    measure.show(f"{name} (median epoch)", float(np.median(values)))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## tf.data, as on the slide
#
# TensorFlow is optional (the `tf` extra). The pipeline is the slide's: a shuffle buffer as large as the data set,
# reshuffled every epoch, then `batch(300)` and `prefetch(AUTOTUNE)`. TensorFlow prints a few log lines to the
# terminal when it starts; they do not appear here.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
try:
    import tensorflow as tf
except ImportError:
    tf = None
    print("tensorflow is not installed: skipping the tf.data loop (pip install -e '.[tf]' to add it)")

if tf is not None:
    tf_data = tf.data.Dataset.range(num_samples)
    tf_loader = (tf_data.shuffle(buffer_size=tf_data.cardinality(), reshuffle_each_iteration=True)
                 .batch(batch_size).prefetch(tf.data.AUTOTUNE))
    seconds |= loops.time_epochs({"tf_data": loops.iterate(tf_loader)}, slow_epochs, desc="tf.data")
    measure.show("tf_data (median epoch)", float(np.median(seconds["tf_data"])))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The answer, as a table and a chart
#
# Milliseconds per epoch (median), samples per second, and how many times slower than the fastest loop.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
table = pd.DataFrame(loops.table(seconds, num_samples))
table.round({"ms_per_epoch": 2, "p95_ms": 2, "samples_per_s": 0, "x_fastest": 1})

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.bars(table, "ms_per_epoch", "loop", baseline=table["loop"].iloc[0], log=True,
                 title=f"One epoch of {num_samples:,} samples, batch {batch_size}", unit="ms, log scale")
plots.save(fig, "01_the_question-loops")
ms = dict(zip(table["loop"], table["ms_per_epoch"]))
print(f"fastest here: {table['loop'].iloc[0]}; numpy is {ms['dataloader_nw0'] / ms['numpy']:.0f}x faster than "
      f"DataLoader without workers and {ms['dataloader_workers'] / ms['numpy']:.0f}x faster than with {num_workers}")
print(f"BatchLoader / numpy: {ms['helpers'] / ms['numpy']:.2f}; DataLoader (no workers) / BatchLoader: "
      f"{ms['dataloader_nw0'] / ms['helpers']:.0f}")
print(f"1000 epochs of this size would take: numpy {ms['numpy']:.0f} s, DataLoader with workers "
      f"{ms['dataloader_workers'] / 60:.0f} min")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Why each loop is fast or slow
#
# - **numpy, the helpers' `BatchLoader` and the slide's custom loader** touch the indices as whole arrays: one
#   shuffle in C, then one operation per *batch*. What remains is the shuffle itself (notebook 04 makes it
#   cheaper) and a few µs of Python per batch. `BatchLoader` also gathers many batches with one call; the ratio
#   printed above shows how close that brings it to bare numpy, although it yields torch tensors and does a
#   gather that the numpy loop does not.
# - **pure Python** pays a Python-level operation per *sample* in `random.sample`, but nothing per sample after it.
# - **DataLoader without workers** pays per sample three times: the sampler yields an int, `__getitem__` returns a
#   0-d tensor, and `default_collate` stacks 300 of them. Its `__getitems__` variant (notebook 02) makes one call
#   per batch and recovers most of the gap: the slowness is the per-sample protocol, not DataLoader itself.
# - **DataLoader with workers** does the same per-sample work in other processes and adds pickling every batch
#   through a queue. Workers help when `__getitem__` does real work (decoding a JPEG, notebook 07); when each
#   sample costs a µs, the transport costs more than it saves, and this machine has few cores to share.
# - **tf.data** runs the shuffle buffer and the batching in C++ threads, per element; faster than the per-sample
#   DataLoader, far slower than a vectorised shuffle.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# For this index-only task the loops that shuffle and batch whole arrays (numpy, `BatchLoader`, the slide's
# custom loader) are orders of magnitude faster than the per-sample DataLoader, with or without workers;
# pure Python sits in between, and tf.data, whose per-element pipeline is C++ but still one element at a time, lands near the per-sample DataLoader on this 2-core machine (the table above). The cost is per sample Python work, so the cure is to do one
# operation per batch, not more processes.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide's implied answer: the numpy loop is the fastest of the four and the PyTorch DataLoader with workers is
# far slower. We check that numpy beats the DataLoader (with and without workers) by more than 10x, and that the
# helpers' loader does too. (How close `BatchLoader` comes to numpy is printed above and saved; on a busy machine
# that ratio moves too much for a pass/fail line.)

# %% slideshow={"slide_type": "-"}
print("numpy over 10x faster than DataLoader (no workers):", ms["dataloader_nw0"] / ms["numpy"] > 10)
print("numpy over 10x faster than DataLoader (workers):", ms["dataloader_workers"] / ms["numpy"] > 10)
print("BatchLoader over 10x faster than DataLoader (no workers):", ms["dataloader_nw0"] / ms["helpers"] > 10)

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures = {"helpers_over_numpy": ms["helpers"] / ms["numpy"],
           "dataloader_nw0_over_helpers": ms["dataloader_nw0"] / ms["helpers"]}
figures |= {f"ms_per_epoch_{k}": v for k, v in ms.items()}
knobs = {"samples": num_samples, "batch_size": batch_size, "num_workers": num_workers}
print("saved", measure.save_results("01_the_question", figures, table.to_dict("records"), knobs, num_epochs).name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Set `num_workers = 0, 1, 2, 4` in `loops.dataloader(...)` and time one epoch each. Where does adding workers
#    stop helping on this machine, and why (count the cores)?
# 2. Change `batch_size` to 30 and to 3000. Which loops' epoch times change most, and what does that tell you about
#    their cost per batch versus per sample?
# 3. Run with `FASTLOOPS_SCALE=full` only the numpy and helpers loops (`loops.time_epochs` with those two) for
#    1000 epochs: how long is the slide's whole experiment for the fastest loop?
