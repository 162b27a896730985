# %% [markdown] slideshow={"slide_type": "slide"}
# # 04 · Fast shuffling: grouped (quasi-random) permutations
#
# | | |
# |---|---|
# | **Question** | Why is a fresh permutation of a big index slow, what does shuffling groups instead of items save, and what does it cost in randomness? |
# | **Seeds** | 000/001 "Other tips": *Random number generator* and *Fast Random Number Generator*; 003: FFCV's `OrderOption.QUASI_RANDOM` |
# | **GPU** | optional: `torch.randperm` on CUDA is timed when a GPU is present |
# | **Run time** | smoke ~30 s · workshop ~3 min (N up to 2^26) · full ~10 min (N up to 10^8) |
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
# index and swaps two entries at random places. While the index fits in cache that is a few nanoseconds per
# entry; once it is far larger than the last-level cache, almost every swap misses cache and waits for RAM
# (on the order of 100 ns). So the cost per index should *grow* with N, and the total time should be far
# above what the memory bus needs just to write 8 bytes per index, which we can compute from notebook 00's
# copy bandwidth.

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
fastest_full = min(table.loc[(table.n == N_HEADLINE) & table.method.isin(shuffle.FULL), "seconds"])
print(f"fastest full permutation at 2^{int(np.log2(N_HEADLINE))}: {fastest_full:.2f} s, "
      f"{fastest_full / floor:.0f}x the bandwidth floor")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The nanoseconds per index of the full shuffles grow once N leaves the cache: the work per index is the
# same, but each random swap now waits for RAM. That is the slide's "slow for a big array". The gap to the
# bandwidth floor printed above is the price of *random* access: the memory bus could write the index many
# times over in the time one shuffle takes.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. The slide's idea: shuffle groups, then items inside groups
#
# `samplers.grouped_permutation(n, group_size, generator)` cuts `range(n)` into consecutive groups, shuffles the
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
# **Prediction:** two passes over the 8-byte output, so close to the bandwidth floor above, and many times
# faster than a full shuffle at large N (the cost curve above has it as the `grouped_permutation` line).

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
grouped = table.loc[(table.n == N_HEADLINE) & table.method.str.startswith("grouped_permutation (g="), "seconds"].iloc[0]
measure.show(f"grouped_permutation at 2^{int(np.log2(N_HEADLINE))}", grouped)
print(f"{grouped / floor:.1f}x the bandwidth floor; "
      f"{fastest_full / grouped:.1f}x faster than the fastest full permutation")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. How random is it? The class mix per batch
#
# The danger is not the permutation itself but what a *batch* sees. Take the worst case for a data set:
# stored sorted by class (10 classes here). A full shuffle gives every batch of 100 a mix of all 10 classes.
# A grouped permutation gives every batch the items of only a few consecutive groups; if a group is as large
# as a class, a whole batch comes from one class. **Prediction:** the mean entropy of the class mix per batch
# stays near log2(10) = 3.3 bits while several groups fit in a batch, and falls towards 0 once a group holds
# a batch or more of one class.
#
# FFCV's `QUASI_RANDOM` order (seed 003) is re-implemented in `samplers.quasi_random_permutation` from its
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
# badly. We time `grouped_permutation` at the headline N for each group size of the sweep and put it next to
# the class-mix entropy it gives.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
speed = {g: float(np.median(measure.measure(lambda g=g: samplers.grouped_permutation(N_HEADLINE, g), repeat=REPEAT)))
         for g in GROUP_SIZES}
grouped_q = quality[quality.order == "grouped"].set_index("group_size")
trade = pd.DataFrame({"group_size": list(speed), "speedup_over_full": [fastest_full / s for s in speed.values()],
                      "entropy_bits": grouped_q.loc[list(speed), "entropy_bits"].values,
                      "test_accuracy": grouped_q.loc[list(speed), "test_accuracy"].values})
trade.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(trade.entropy_bits, trade.speedup_over_full, marker="o")
for _, r in trade.iterrows():
    ax.annotate(f"g={int(r.group_size)}", (r.entropy_bits, r.speedup_over_full), xytext=(4, 4), textcoords="offset points")
ax.axvline(full_h, ls="--", color="gray", label="full shuffle's class mix")
ax.set_xlabel("class-mix entropy per batch (bits; higher is more random)")
ax.set_ylabel(f"speedup over the fastest full shuffle at 2^{int(np.log2(N_HEADLINE))}")
ax.set_title("Grouped permutation: speed against quality")
ax.legend()
fig.tight_layout()
plots.save(fig, "04_fast_shuffle-tradeoff")
plt.show()

# %% [markdown] slideshow={"slide_type": "subslide"}
# The useful region is the upper right: groups several times smaller than a batch keep much of the class mix
# of a full shuffle, and here its accuracy (on data stored in random order any group size would do), and are
# already much faster than a full shuffle. Once a group holds about a batch, the mix collapses. FFCV avoids the collapse differently:
# its buffer of 2 x batch_size open pages interleaves many pages into every batch, so its mix stays close to
# a full shuffle at every page size here. Its order is made by a sequential loop with one random draw per
# sample (compiled with numba in FFCV), so it does not save random numbers the way groups do; what it saves
# is reading: only a bounded set of pages is in use at any time, which suits files larger than RAM.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures = dict(result.figures, full_entropy_bits=full_h, full_test_accuracy=full_acc)
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
# shuffles turns most of that into sequential writes and is several times faster at tens of millions of
# indices. The price is randomness at the scale of a batch: keep groups well below the batch size when the
# data is stored in class order, or use a buffer of open pages as FFCV does.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# Seed 000/001 claims that generating a permutation per epoch is slow for a big array and that grouping makes
# it fast. We check that `grouped_permutation` is at least 2x faster than the fastest full permutation at the
# largest N measured, and, on the quality side, that groups as large as a class ruin the class mix (less than
# half a full shuffle's entropy) while FFCV's quasi-random order keeps at least 90 % of it at every page size.

# %% slideshow={"slide_type": "-"}
print("grouped at least 2x faster than a full permutation at the largest N:", fastest_full / grouped >= 2)
biggest = max(GROUP_SIZES)
print("class-sized groups ruin the class mix:", grouped_q.loc[biggest, "entropy_bits"] < 0.5 * full_h)
quasi = quality[quality.order == "FFCV quasi-random"]
print("FFCV quasi-random keeps the class mix:", bool((quasi.entropy_bits >= 0.9 * full_h).all()))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Shuffle the data set once, on disk, before training (`X, y = X[p], y[p]` for one random `p`), then rerun the
#    quality table. Which group sizes are now safe, and why?
# 2. Change `variants` of `grouped_permutation` from 16 to 1. Does the class-mix entropy change? What else does?
#    (Hint: look at where item k of every group lands.)
# 3. Set `torch.set_num_threads(1)` and rerun section 1. Which method loses the most, and why?
