# %% [markdown] slideshow={"slide_type": "slide"}
# # 04 · Fast shuffling: grouped (quasi-random) permutations
#
# | | |
# |---|---|
# | **Question** | Why is a fresh permutation of a big index slow, what does shuffling groups instead of items save, and what does it cost in randomness? |
# | **Seeds** | 000/001 "Other tips": *Random number generator* and *Fast Random Number Generator*; 003: FFCV's `OrderOption.QUASI_RANDOM` |
# | **GPU** | optional: `torch.randperm` on CUDA is timed when a GPU is present |
# | **Run time** | <!-- run-time --> workshop ~1.6 min (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# A training loop that shuffles draws a new permutation of its whole index every epoch. For 10^5 samples
# nobody notices; for 10^8 (a large data set, or token positions) the permutation alone takes seconds per
# epoch. The slide's remedy: cut the index into groups, shuffle the order of the groups, and shuffle the
# items inside each group. FFCV ships a related order, `QUASI_RANDOM`. Both trade randomness for speed;
# this notebook measures both sides of the trade.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import numpy as np
import pandas as pd
import torch

from fastloops_helpers import config, measure
from fastloops_helpers.book import claims
from fastloops_helpers.measure import plots
from fastloops_helpers.load import order as samplers
from fastloops_helpers.teach.quasi_random import quasi_random_permutation
from fastloops_helpers.experiments import bandwidth, shuffle

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
SIZES = config.size("shuffle.sizes")            # N swept for the cost curve; larger shows the RAM-bound regime
N_HEADLINE = config.size("shuffle.n_headline")  # N of the headline speedup (2^26 at workshop scale)
GROUP_SIZE = config.size("shuffle.group_size")  # group size for the speed figures: larger draws fewer random numbers
GROUP_SIZES = config.size("shuffle.group_sizes")  # speed-vs-quality sweep: larger is faster but less random
QUALITY_N = config.size("shuffle.quality_n")    # samples of the class-sorted data set (10 classes)
BATCH_SIZE = 100                                # batch size of the quality experiment
EPOCHS = config.size("shuffle.train_epochs")    # epochs of the short training run per order
REPEAT = config.size("shuffle.repeat")          # timed permutations per method and N
print(f"N swept: {SIZES} + headline 2^{int(np.log2(N_HEADLINE))}; quality on {QUALITY_N} sorted samples")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. What does a full permutation cost?
#
# **Prediction.** Fisher-Yates (what `numpy` and `torch.randperm` do on the CPU) draws one random number per
# index (a generator step and a bounded integer: 2-10 ns) and swaps two entries at random places. While the
# index fits in the core's cache a swap costs a few ns more, so about 4-25 ns per entry. Once the index is far
# larger than the last-level cache almost every swap misses and waits for RAM (about 100 ns, partly overlapped
# because consecutive swaps are independent), so the cost per index should *grow* with N, to some 30-150 ns, and
# the total time should be far above what the memory bus needs just to stream the 8-byte index, which we compute
# from notebook 00's copy bandwidth.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
bw = bandwidth.copy_bandwidth(256 * 2**20)
floor = N_HEADLINE * 8 * 2 / (bw * 1e9)  # write the int64 index once, read it once: the bandwidth floor
print(f"copy bandwidth here: {bw:.1f} GB/s -> streaming 2^{int(np.log2(N_HEADLINE))} int64 indices "
      f"through memory once takes about {floor * 1e3:.0f} ms")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
result = shuffle.run()
table = result.table()
table.pivot(index="n", columns="method", values="ns_per_index").round(1)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.lines(table, x="n", y="seconds", hue="method", title="One permutation of range(N)",
                  xlabel="N (indices)", ylabel="seconds (median)")
plots.save(fig, "04_fast_shuffle-cost")
full = table[table.method.isin(shuffle.FULL)]
fastest_full = full.loc[full.n == N_HEADLINE, "seconds"].min()
ns_small, ns_big = (full.loc[full.n == n, "ns_per_index"].min() for n in (min(full.n), N_HEADLINE))
print(f"fastest full permutation at 2^{int(np.log2(N_HEADLINE))}: {fastest_full:.2f} s, "
      f"{fastest_full / floor:.0f}x the bandwidth floor")
_ = measure.predicted(f"full shuffle at N={min(full.n):,}, ns per index", 4, 25, ns_small, "ns")
_ = measure.predicted(f"full shuffle at N=2^{int(np.log2(N_HEADLINE))}, ns per index", 30, 150, ns_big, "ns")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Where the small-N estimate misses, the cache is the usual reason: 10^5 int64 indices are 800 KB, more than
# the L2 cache of many cores, so even the smallest N here swaps partly in L3; torch's `randperm` also draws from a
# Mersenne Twister, which costs more per number than numpy's PCG64. At large N the cost per index is set by how
# many cache misses the core keeps in flight at once, which differs between CPUs. The gap to the bandwidth floor
# printed above is the price of *random* access: the memory bus could stream the index many times over in the
# time one shuffle takes.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. The slide's idea: shuffle groups, then items inside groups
#
# `order.grouped_permutation(n, group_size, generator)` cuts `range(n)` into consecutive groups, shuffles the
# order of the groups, and reorders the items inside every group with one of a few (16) random inner
# permutations, picked per group. A last, partial group (when `n` is not a multiple of the group size) is
# shuffled on its own and put at a random slot. The result is a true permutation of `range(n)`:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
small = samplers.grouped_permutation(23, 5, torch.Generator().manual_seed(0))
print(small.view(-1).tolist())

# %% slideshow={"slide_type": "-"}
print("a permutation of range(23):", sorted(small.tolist()) == list(range(23)))
print("dtype:", small.dtype)

# %% [markdown] slideshow={"slide_type": "subslide"}
# Only about n / group_size + 16 x group_size random numbers are drawn instead of n, and the rest is one
# gather from a small table plus one add over the output: sequential writes at memory speed.
#
# **Prediction:** the output is written by the gather (one pass of 8 bytes per index), read and written again by
# the add (two passes), and zeroed once by the kernel when its fresh pages are first touched (one pass): four
# passes against the floor's two, so about 2x the bandwidth floor, say 1.5-3x.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
speedup = table.loc[(table.n == N_HEADLINE) & table.method.str.startswith("grouped_permutation (g="), "speedup_over_full"].iloc[0]
grouped = table.loc[(table.n == N_HEADLINE) & table.method.str.startswith("grouped_permutation (g="), "seconds"].iloc[0]
measure.show(f"grouped_permutation at 2^{int(np.log2(N_HEADLINE))}", grouped)
print(f"{speedup:.1f}x faster than the fastest full permutation (median of per-round ratios)")
_ = measure.predicted("grouped_permutation, x the bandwidth floor", 1.5, 3, grouped / floor, "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The estimate misses upwards when the page faults cost more than the zeroing pass itself (each 4 KiB page
# of a fresh allocation is a trip into the kernel, and 2^26 indices are 512 MiB: 131,072 pages), or when the copy
# rate measured in notebook 00 with both cores is not what one core's sequential writes get.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. How random is it? The class mix per batch
#
# The danger is not the permutation itself but what a *batch* sees. Take the worst case for a data set:
# stored sorted by class (10 classes here). A full shuffle gives every batch of 100 a mix of all 10 classes.
# A grouped permutation gives every batch the items of only a few consecutive groups; if a group is as large
# as a class, a whole batch comes from one class. **Prediction:** a batch of 100 holds about k = 100 / g groups, each
# from one class (a class here holds N / 10 consecutive samples, more than any group up to that size). k random
# groups cover about 10 x (1 - 0.9^k) distinct classes, so the mean entropy should be near log2 of that: close to
# log2(10) = 3.3 bits for small groups, and towards 0 once a group holds a batch or more (k <= 1).
#
# FFCV's `QUASI_RANDOM` order (seed 003) is re-implemented in `teach.quasi_random.quasi_random_permutation` from its
# description: samples are stored in pages; it shuffles inside each page and the page order, then keeps
# 2 x batch_size pages open and draws every next sample from a random open page. Here a page is a run of
# consecutive indices, of the same size as a group, for comparison.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
quality = pd.DataFrame(shuffle.quality_rows(QUALITY_N, GROUP_SIZES, BATCH_SIZE, EPOCHS))
quality.round(3)


# %% [markdown] slideshow={"slide_type": "-"}
# The entropy column is what the prediction was about; the accuracy column is what it does to training: a
# small MLP trained for a few epochs with SGD on the sorted data in each order, then tested on a held-out set.
# Batches from one class pull the model towards that class, then the next; the model forgets.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
def predicted_bits(g: int, classes: int = 10) -> float:
    k = BATCH_SIZE / g
    return float(np.log2(classes * (1 - (1 - 1 / classes) ** k))) if k > 1 else 0.0


for _, r in quality[quality.order == "grouped"].iterrows():
    guess = predicted_bits(int(r.group_size))
    _ = measure.predicted(f"grouped g={int(r.group_size)}: entropy bits", max(guess - 0.5, 1e-9), guess + 0.5,
                          r.entropy_bits, "bits", fmt=".2f")

# %% [markdown] slideshow={"slide_type": "-"}
# The count of classes is an upper estimate for the entropy (the classes in a batch are not equally
# represented), so small groups land a little below it. Groups larger than a batch miss the other way when a
# batch straddles a class boundary or a group straddles two classes (a group larger than a class always does).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
full_h = quality.loc[quality.order == "full shuffle", "entropy_bits"].iloc[0]
full_acc = quality.loc[quality.order == "full shuffle", "test_accuracy"].iloc[0]
swept = quality[quality.order != "full shuffle"]
fig = plots.lines(swept, x="group_size", y="test_accuracy", hue="order", logy=False,
                  title=f"Test accuracy after {EPOCHS} epochs on class-sorted data (full shuffle: {full_acc:.2f})",
                  xlabel="group / page size (indices)", ylabel="test accuracy")
_ = plots.save(fig, "04_fast_shuffle-quality")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Speed against quality
#
# Small groups mix well but draw more random numbers and gather more rows; large groups are cheap but mix
# badly. `shuffle.group_size_speed` times `grouped_permutation` at the headline N for each group size of the
# sweep, interleaved with the fastest full permutation, and we put the speed-up next to the class-mix entropy
# it gives.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fastest_method = full.loc[full.n == N_HEADLINE].sort_values("seconds").method.iloc[0]
speed = pd.DataFrame(shuffle.group_size_speed(N_HEADLINE, GROUP_SIZES, REPEAT, full_method=fastest_method))
grouped_q = quality[quality.order == "grouped"].set_index("group_size")
trade = speed.assign(entropy_bits=grouped_q.loc[speed.group_size, "entropy_bits"].values,
                     test_accuracy=grouped_q.loc[speed.group_size, "test_accuracy"].values)
trade.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), sharex=True)
left.plot(trade.group_size, trade.speedup_over_full, marker="o")
left.set_ylabel(f"speed-up over {fastest_method}")
right.plot(trade.group_size, trade.entropy_bits, marker="o", label="grouped")
right.axhline(full_h, ls="--", color="gray", label="full shuffle")
right.set_ylabel("class-mix entropy per batch (bits)")
right.legend()
for ax in (left, right):
    ax.set_xscale("log")
    ax.set_xlabel("group size (indices)")
    ax.grid(True, alpha=0.3)
fig.suptitle(f"Grouped permutation at 2^{int(np.log2(N_HEADLINE))}: speed (left) against quality (right)")
fig.tight_layout()
plots.save(fig, "04_fast_shuffle-tradeoff")
plt.show()

# %% [markdown] slideshow={"slide_type": "subslide"}
# Read the two panels together: a group size is useful where the speed-up on the left is already large while
# the entropy on the right is still close to the full shuffle's line. Groups several times smaller than a batch
# keep much of the class mix; once a group holds about a batch, the mix collapses (on data stored in random
# order any group size would do). FFCV avoids the collapse differently: its buffer of 2 x batch_size open pages
# interleaves many pages into every batch, so its mix stays close to a full shuffle (the quality table above).
# Its order is made by a sequential loop with one random draw per sample (compiled with numba in FFCV), so it
# does not save random numbers the way groups do; what it saves is reading: only a bounded set of pages is in
# use at any time, which suits files larger than RAM.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
quasi = quality[quality.order == "FFCV quasi-random"]
figures = dict(result.figures, full_entropy_bits=full_h, full_test_accuracy=full_acc,
               grouped_entropy_largest_over_full=grouped_q.loc[max(GROUP_SIZES), "entropy_bits"] / full_h,
               quasi_random_entropy_min_over_full=quasi.entropy_bits.min() / full_h)
figures.update({f"grouped_entropy_g{g}": h for g, h in grouped_q.entropy_bits.items()})
figures.update({f"grouped_speedup_g{g}": s for g, s in zip(trade.group_size, trade.speedup_over_full)})
path = measure.save_results("04_fast_shuffle", figures, rows=result.rows + quality.to_dict("records"),
                           knobs=dict(result.knobs, group_sizes=GROUP_SIZES, quality_n=QUALITY_N,
                                      batch_size=BATCH_SIZE, epochs=EPOCHS), repeats=REPEAT)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# A full shuffle of a large index is bound by random memory access, not by the random numbers' arithmetic,
# and costs far more than streaming the index through memory. Shuffling groups and reusing a few inner
# shuffles turns most of that into sequential writes. The price is randomness at the scale of a batch: keep
# groups well below the batch size when the data is stored in class order, or use a buffer of open pages as
# FFCV does. This run's figures:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
for key in ("grouped_speedup_headline", "fastest_full_ns_per_index", "grouped_entropy_largest_over_full",
            "quasi_random_entropy_min_over_full"):
    print(f"{key} = {figures[key]:.3g}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# Seed 000/001 claims that generating a permutation per epoch is slow for a big array and that grouping makes
# it fast. We check the speed-up at the headline N and, on the quality side, that groups as large as a class
# ruin the class mix while FFCV's quasi-random order keeps it, against the claims registry's thresholds.

# %% slideshow={"slide_type": "-"}
for name in ("grouped_speedup_headline", "grouped_entropy_largest_over_full", "quasi_random_entropy_min_over_full"):
    claims.check(name, figures)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Shuffle the data set once, on disk, before training (`X, y = X[p], y[p]` for one random `p`), then rerun the
#    quality table. Which group sizes are now safe, and why?
# 2. Change `variants` of `grouped_permutation` from 16 to 1. Does the class-mix entropy change? What else does?
#    (Hint: look at where item k of every group lands.)
# 3. Set `torch.set_num_threads(1)` and rerun section 1. Which method loses the most, and why?
