# %% [markdown] slideshow={"slide_type": "slide"}
# # 04 · Fast shuffling: grouped (quasi-random) permutations
#
# | | |
# |---|---|
# | **Question** | Why is a fresh permutation of a big index slow, what does shuffling groups instead of items save, and what does it cost in randomness? |
# | **Seeds** | 000/001 "Other tips": *Random number generator* and *Fast Random Number Generator*; 003: FFCV's `OrderOption.QUASI_RANDOM` |
# | **GPU** | optional: `torch.randperm` on CUDA is timed when a GPU is present |
# | **Optional** | ffcv: the comparison with FFCV's own QUASI_RANDOM Loader is skipped without it |
# | **Run time** | <!-- run-time --> workshop ~1.5 min (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# A training loop that shuffles draws a new permutation of its whole index every epoch. For 10^5 samples
# nobody notices; for 10^8 (a large data set, or token positions) the permutation alone takes seconds per
# epoch. The slide's remedy: cut the index into groups, shuffle the order of the groups, and shuffle the
# items inside each group. FFCV ships a related order, `QUASI_RANDOM`. Both trade randomness for speed;
# this notebook shows the code of each, then measures both sides of the trade.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import inspect
import math
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from fastloops_helpers import BatchLoader, config, measure
from fastloops_book import claims
from fastloops_book.source import show_code
from fastloops_helpers.data import ffcv_io
from fastloops_helpers.experiments import bandwidth
# VARIANTS: the inner shuffles grouped_permutation reuses (16); _check: the argument check the orders share
from fastloops_helpers.load.order import VARIANTS, _check, _fill_groups, grouped_permutation
from fastloops_helpers.measure import plots
from fastloops_helpers.teach.quasi_random import batch_class_entropy

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output", "defaults"]
SIZES = config.size("shuffle.sizes")            # N swept for the cost curve; larger shows the RAM-bound regime
N_HEADLINE = config.size("shuffle.n_headline")  # N of the headline speedup (2^26 at workshop scale)
GROUP_SIZE = config.size("shuffle.group_size")  # group size for the speed figures: larger draws fewer random numbers
GROUP_SIZES = config.size("shuffle.group_sizes")  # speed-vs-quality sweep: larger is faster but less random
QUALITY_N = config.size("shuffle.quality_n")    # samples of the class-sorted data set (10 classes)
BATCH_SIZE = 100                                # batch size of the quality experiment
EPOCHS = config.size("shuffle.train_epochs")    # epochs of the short training run per order
REPEAT = config.size("shuffle.repeat")          # timed permutations per method and N
FFCV_ROWS = 4096                                # rows of the .beton read with FFCV's own Loader (10 sorted classes)
FFCV_ROW_BYTES = 16 * 2**10                     # bytes per row: fewer rows per storage page, more pages (and MiB)
FFCV_SMALL_BATCH = 2                            # a batch size whose 2 x batch_size open pages are fewer than the file's
FFCV_EPOCHS = 3                                 # epochs of FFCV's order (seeds of the replica's) averaged
print(f"N swept: {SIZES} + headline 2^{int(np.log2(N_HEADLINE))}; quality on {QUALITY_N} sorted samples")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. The code being timed: full shuffles and grouped ones
#
# A full shuffle is Fisher-Yates: `numpy`'s `permutation` and `shuffle` and `torch.randperm` walk the index
# once, and swap every entry with one at a random place, drawing one random number per index. These three are the
# full shuffles timed below:

# %% slideshow={"slide_type": "-"}
def numpy_permutation(n: int, rng: np.random.Generator) -> np.ndarray:
    """numpy's full shuffle into a new array: Fisher-Yates, one random draw and one swap per index."""
    return rng.permutation(n)


def numpy_shuffle(index: np.ndarray, rng: np.random.Generator) -> None:
    """The same Fisher-Yates in place, over an index array made once."""
    rng.shuffle(index)


def torch_randperm(n: int, generator: torch.Generator) -> torch.Tensor:
    """torch's full shuffle, on the generator's device (a CUDA generator: the GPU's randperm)."""
    return torch.randperm(n, generator=generator, device=generator.device)


# %% [markdown] slideshow={"slide_type": "subslide"}
# The slide's remedy, as it reads: cut `range(n)` into consecutive groups, shuffle the order of the groups, then
# the indices inside every group.

# %% slideshow={"slide_type": "-"}
def slide_grouped_permutation(n: int, group_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """The slide's fast shuffle as it reads: shuffle the order of the groups, then the indices inside each group."""
    groups = torch.arange(n).split(group_size)
    order = torch.randperm(len(groups), generator=generator).tolist()
    return torch.cat([groups[g][torch.randperm(len(groups[g]), generator=generator)] for g in order])


# every block of the output is one whole group, the groups' order is shuffled, each group draws its own inner order
check_perm = slide_grouped_permutation(64 * 20, 64, torch.Generator().manual_seed(4)).view(-1, 64)
assert sorted(check_perm.flatten().tolist()) == list(range(64 * 20)) and check_perm.dtype == torch.int64
assert (check_perm // 64 == check_perm[:, :1] // 64).all() and not torch.equal(check_perm[:, 0] // 64, torch.arange(20))
assert len(torch.unique(check_perm % 64, dim=0)) > 1
assert sorted(slide_grouped_permutation(23, 5).tolist()) == list(range(23))  # a last, shorter group too

# %% [markdown] slideshow={"slide_type": "subslide"}
# It still draws n random numbers (one `randperm` per group), but every swap stays inside a group small enough
# for the cache, and it makes one Python call per group. The helpers' `grouped_permutation` (in `load.order`,
# what `BatchLoader(shuffle="grouped")` uses) draws far fewer: it shuffles the order of the groups, then reorders
# the items inside every group with one of `VARIANTS` (16) random inner permutations, picked per group. That is
# about n / group_size + 16 x group_size random numbers instead of n, and the rest is one gather from a small
# table plus one add over the output (`_fill_groups`): sequential writes at memory speed. A last, partial group
# (when `n` is not a multiple of the group size) is shuffled on its own and put at a random slot.

# %% slideshow={"slide_type": "subslide"}
# the loader's own shuffle (BatchLoader(shuffle="grouped")); the notebook times this object
show_code(grouped_permutation, _fill_groups)

# %% [markdown] slideshow={"slide_type": "-"}
# Both results are true permutations of `range(n)`, groups of 5 here:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
small = {"slide's": slide_grouped_permutation(23, 5, torch.Generator().manual_seed(0)),
         "helpers'": grouped_permutation(23, 5, torch.Generator().manual_seed(0))}
for name, perm in small.items():
    print(f"{name:>8}: {perm.tolist()}")

# %% slideshow={"slide_type": "-"}
for name, perm in small.items():
    print(f"{name} is a permutation of range(23): {sorted(perm.tolist()) == list(range(23))}, dtype {perm.dtype}")

# %% [markdown] slideshow={"slide_type": "-"}
# Section 2 times these contenders at every N, interleaved: the three full shuffles, the slide's grouped shuffle and
# the helpers'. `permuters` makes one permutation per call of each. It calls the functions above by name when it runs,
# so a cell that is edited and re-run is what gets timed:

# %% slideshow={"slide_type": "subslide"}
FULL = ("numpy permutation", "numpy shuffle (in place)", "torch randperm")  # the full shuffles


def permuters(n: int, group_size: int, seed: int = 0) -> dict[str, Callable[[], Any]]:
    """Return {method: fn()} making one permutation of range(n) per call (on the GPU too, when there is one)."""
    rng, gen, index = np.random.default_rng(seed), torch.Generator().manual_seed(seed), np.arange(n)
    fns = {"numpy permutation": lambda: numpy_permutation(n, rng),
           "numpy shuffle (in place)": lambda: numpy_shuffle(index, rng),
           "torch randperm": lambda: torch_randperm(n, gen),
           f"slide's grouped (g={group_size})": lambda: slide_grouped_permutation(n, group_size, gen),
           f"grouped_permutation (g={group_size})": lambda: grouped_permutation(n, group_size, gen)}
    if config.device().type == "cuda":
        cuda_gen = torch.Generator("cuda").manual_seed(seed)
        fns["torch randperm (cuda)"] = lambda: torch_randperm(n, cuda_gen)
        fns["grouped_permutation (cuda)"] = lambda: grouped_permutation(n, group_size, cuda_gen)
    return fns


# %% slideshow={"slide_type": "subslide"}
for name, make in permuters(1000, 64).items():
    found = make()  # numpy's in-place shuffle returns None
    assert found is None or sorted(torch.as_tensor(found).tolist()) == list(range(1000)), name
print("every contender makes a permutation of range(1000), the last group partial (1000 = 15 x 64 + 40)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. What does a permutation cost?
#
# **Prediction, full shuffles.** Fisher-Yates draws one random number per index (a generator step and a bounded
# integer: 2-10 ns) and swaps two entries at random places. While the index fits in the core's cache a swap costs
# a few ns more, so about 4-25 ns per entry. Once the index is far larger than the last-level cache almost every
# swap misses and waits for RAM (about 100 ns, partly overlapped because consecutive swaps are independent), so
# the cost per index should *grow* with N, to some 30-150 ns, and the total time should be far above what the
# memory bus needs just to stream the 8-byte index, which the next cell computes from this machine's copy rate, measured there with notebook 00's
# `bandwidth.copy_bandwidth`.
#
# **Prediction, `grouped_permutation`.** The output is written by the gather (one pass of 8 bytes per index), read
# and written again by the add (two passes), and zeroed once by the kernel when its fresh pages are first touched
# (one pass): four passes against the floor's two, so about 2x the bandwidth floor, say 1.5-3x. The slide's
# version sits between the two: n cache-friendly draws plus a Python call per group.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
bw = bandwidth.copy_bandwidth(256 * 2**20)
floor = N_HEADLINE * 8 * 2 / (bw * 1e9)  # write the int64 index once, read it once: the bandwidth floor
print(f"copy bandwidth here: {bw:.1f} GB/s -> streaming 2^{int(np.log2(N_HEADLINE))} int64 indices "
      f"through memory once takes about {floor * 1e3:.0f} ms")


# %% [markdown] slideshow={"slide_type": "-"}
# **Measure.** `time_permutations` times every contender at one N, interleaved: one permutation of each per round,
# in a fresh random order every round, after one warm-up call each. Each row holds a method's median and, as
# `speedup_over_full`, the median over rounds of the fastest full shuffle's time over its own in the same round:

# %% slideshow={"slide_type": "subslide"}
def time_permutations(n: int, group_size: int, repeat: int) -> list[dict[str, Any]]:
    """Time every permuter at size `n`, interleaved; one row per method with median seconds and ns per index."""
    seconds = measure.interleaved(permuters(n, group_size), repeat=repeat, warmup=1, shuffle=True)
    fastest = min(FULL, key=lambda m: measure.median(seconds[m]))
    rows = []
    for name, values in seconds.items():
        t = measure.median(values)
        rows.append({"n": n, "method": name, "seconds": t, "p95_s": measure.p95(values), "ns_per_index": t / n * 1e9,
                     "gb_per_s_written": n * 8 / t / 1e9, "speedup_over_full": measure.ratio(seconds, fastest, name)})
    return rows


def cost_curve(sizes: Iterable[int], n_headline: int, group_size: int, repeat: int) -> list[dict[str, Any]]:
    """Time full and grouped permutations at every N of `sizes` and at `n_headline`: one row per method and N."""
    sizes = sorted(set(sizes) | {n_headline})
    return [row for n in measure.progress(sizes, desc="N") for row in time_permutations(n, group_size, repeat)]


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
cost_rows = cost_curve(SIZES, N_HEADLINE, GROUP_SIZE, REPEAT)
table = pd.DataFrame(cost_rows)
table.pivot(index="n", columns="method", values="ns_per_index").round(1)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.lines(table, x="n", y="seconds", hue="method", title="One permutation of range(N)",
                  xlabel="N (indices)", ylabel="seconds (median)")
plots.save(fig, "04_fast_shuffle-cost")
full = table[table.method.isin(FULL)]
fastest_full = full.loc[full.n == N_HEADLINE, "seconds"].min()
ns_small, ns_big = (full.loc[full.n == n, "ns_per_index"].min() for n in (min(full.n), N_HEADLINE))
print(f"fastest full permutation at 2^{int(np.log2(N_HEADLINE))}: {fastest_full:.2f} s, "
      f"{fastest_full / floor:.0f}x the bandwidth floor")
_ = measure.predicted(f"full shuffle at N={min(full.n):,}, ns per index", 4, 25, ns_small, "ns")
_ = measure.predicted(f"full shuffle at N=2^{int(np.log2(N_HEADLINE))}, ns per index", 30, 150, ns_big, "ns")
print(f"cost per index from N={min(full.n):,} to 2^{int(np.log2(N_HEADLINE))}: {ns_small:.1f} -> {ns_big:.1f} ns, "
      f"{ns_big / ns_small:.1f}x: " + ("grows, as predicted" if ns_big > ns_small else "does not grow") + " (single run)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Where the small-N estimate misses, the cache is the usual reason: 10^5 int64 indices are 800 KB, more than
# the L2 cache of many cores, so even the smallest N here swaps partly in L3; torch's `randperm` also draws from a
# Mersenne Twister, which costs more per number than numpy's PCG64. At large N the cost per index is set by how
# many cache misses the core keeps in flight at once, which differs between CPUs. The gap to the bandwidth floor
# printed above is the price of *random* access: the memory bus could stream the index many times over in the
# time one shuffle takes.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
at_head = table[table.n == N_HEADLINE].set_index("method")
for name in at_head.index:
    if "grouped" in name:
        measure.show(f"{name} at 2^{int(np.log2(N_HEADLINE))}", at_head.loc[name, "seconds"])
        print(f"  {at_head.loc[name, 'speedup_over_full']:.1f}x faster than the fastest full permutation "
              "(median of per-round ratios)")
grouped = at_head.loc[f"grouped_permutation (g={GROUP_SIZE})", "seconds"]
_ = measure.predicted("grouped_permutation, x the bandwidth floor", 1.5, 3, grouped / floor, "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The estimate misses upwards when the page faults cost more than the zeroing pass itself (each 4 KiB page
# of a fresh allocation is a trip into the kernel, and 2^26 indices are 512 MiB: 131,072 pages), or when the copy
# rate measured above with all of torch's threads is not what one core's sequential writes get. The slide's version
# keeps n random draws and adds a Python call per group, so it gains on the full shuffles only where their swaps
# miss the cache.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. How random is it? The class mix per batch
#
# The danger is not the permutation itself but what a *batch* sees. Take the worst case for a data set:
# stored sorted by class (10 classes here). A full shuffle gives every batch of 100 a mix of all 10 classes.
# A grouped permutation gives every batch the items of only a few consecutive groups; if a group is as large
# as a class, a whole batch comes from one class. We measure the mix as the mean entropy of the class counts
# per batch:

# %% slideshow={"slide_type": "subslide"}
show_code(batch_class_entropy)  # in the package: notebook 16 measures its shuffle buffers with it

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction:** a batch of 100 holds about k = 100 / g groups, each from one class (a class here holds N / 10
# consecutive samples, more than any group up to that size). k random groups cover about 10 x (1 - 0.9^k) distinct
# classes, so the mean entropy should be near log2 of that: close to log2(10) = 3.3 bits for small groups, and
# towards 0 once a group holds a batch or more (k <= 1).
#
# FFCV's `QUASI_RANDOM` order (seed 003), re-implemented here from its source (section 5 checks it against the
# installed Loader): samples are stored in pages;
# it shuffles inside each page and the page order, then keeps `buffer_size` pages open (FFCV: 2 x batch_size)
# and draws every next sample from a random open page. Here a page is a run of consecutive indices, of the same
# size as a group, for comparison (FFCV's pages are storage pages of its file: section 5).

# %% slideshow={"slide_type": "subslide"}
def quasi_random_permutation(n: int, page_size: int, buffer_size: int,
                             generator: np.random.Generator | None = None) -> np.ndarray:
    """Return FFCV's QUASI_RANDOM traversal order over `n` samples stored in pages of `page_size`."""
    _check(n, page_size)
    if buffer_size < 1:
        raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
    rng = generator if generator is not None else np.random.default_rng()
    starts = np.arange(0, n, page_size)
    pages = [start + rng.permutation(min(page_size, n - start)) for start in starts]
    page_order = list(rng.permutation(len(pages))[::-1])  # popped from the end
    picks = rng.random(n)
    open_pages: list[np.ndarray] = []
    consumed: list[int] = []
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        while page_order and len(open_pages) < buffer_size:
            open_pages.append(pages[page_order.pop()])
            consumed.append(0)
        j = int(picks[i] * len(open_pages))
        out[i] = open_pages[j][consumed[j]]
        consumed[j] += 1
        if consumed[j] == len(open_pages[j]):  # close it: move the last open page into its slot
            open_pages[j], consumed[j] = open_pages[-1], consumed[-1]
            open_pages.pop()
            consumed.pop()
    return out


# a true permutation at any size; with one page open it reads the pages whole, in a shuffled order; the first
# page-size samples come from the first `buffer_size` pages opened
for check_n, check_page, check_buffer in [(0, 4, 2), (1, 4, 2), (100, 7, 3), (64, 8, 100), (50, 1, 1)]:
    check_order = quasi_random_permutation(check_n, check_page, check_buffer, np.random.default_rng(0))
    assert check_order.dtype == np.int64 and np.array_equal(np.sort(check_order), np.arange(check_n))
check_order = quasi_random_permutation(40, 8, 1, np.random.default_rng(1)).reshape(5, 8)
assert (check_order // 8 == check_order[:, :1] // 8).all() and sorted(check_order[:, 0] // 8) == [0, 1, 2, 3, 4]
check_order = quasi_random_permutation(1000, 10, 3, np.random.default_rng(2))
assert len(set(check_order[:10] // 10)) <= 3
assert not np.array_equal(check_order, quasi_random_permutation(1000, 10, 3, np.random.default_rng(3)))


# %% [markdown] slideshow={"slide_type": "subslide"}
# With two pages of 6 open, the order interleaves them and opens the next page when one runs out:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print(quasi_random_permutation(24, 6, 2, np.random.default_rng(0)).tolist())


# %% [markdown] slideshow={"slide_type": "-"}
# The data: overlapping Gaussian blobs, one per class, stored sorted by class (labels in blocks of N / 10), the worst
# case for groups. A second draw around the same centres is the test set:

# %% slideshow={"slide_type": "-"}
def sorted_blobs(n: int, classes: int = 10, features: int = 32, seed: int = 0,
                 split: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (X, y): overlapping Gaussian blobs, one per class, sorted by class (the worst case for groups).

    The class centres depend on `seed` only; `split` draws other samples around the same centres (a test set).
    """
    centres = torch.randn(classes, features, generator=torch.Generator().manual_seed(seed)) * 0.6
    y = torch.arange(n) * classes // n
    X = centres[y] + torch.randn(n, features, generator=torch.Generator().manual_seed(seed * 1000 + split + 1))
    return X, y


assert torch.equal(sorted_blobs(50)[1], torch.arange(50) // 5)  # 10 classes in sorted blocks of 5


# %% [markdown] slideshow={"slide_type": "subslide"}
# What an order does to training: a small MLP trained with SGD for a few epochs on the batches in that order, then
# tested on the held-out set. One torch thread, since for a model this small more threads only add synchronisation
# (badly so on a busy machine):

# %% slideshow={"slide_type": "subslide"}
def train_accuracy(batches: Callable[[int], Iterable[tuple[torch.Tensor, torch.Tensor]]], epochs: int,
                   test: tuple[torch.Tensor, torch.Tensor], classes: int = 10, seed: int = 0) -> float:
    """Train a small MLP with SGD on `batches(epoch)` for `epochs`; return its test accuracy."""
    torch.manual_seed(seed)
    X_test, y_test = test
    with measure.torch_threads(1):
        model = torch.nn.Sequential(torch.nn.Linear(X_test.shape[1], 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, classes))
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for epoch in range(epochs):
            for xb, yb in batches(epoch):
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
        with torch.no_grad():
            return float((model(X_test).argmax(1) == y_test).float().mean())


# %% [markdown] slideshow={"slide_type": "-"}
# The orders, as `epoch -> batches`: the helpers' `BatchLoader` makes the full and the grouped shuffles (a new one per
# epoch after `set_epoch`); FFCV's order comes from the replica above, with 2 x batch_size pages open:

# %% slideshow={"slide_type": "subslide"}
def epochs_of(loader: BatchLoader) -> Callable[[int], Iterable[Any]]:
    """Return epoch -> `loader` set to that epoch (a BatchLoader reshuffles per epoch)."""
    return lambda epoch: (loader.set_epoch(epoch), loader)[1]


def quasi_batches(X: torch.Tensor, y: torch.Tensor, batch_size: int, page_size: int,
                  seed: int) -> Callable[[int], Iterator[tuple[torch.Tensor, torch.Tensor]]]:
    """Return epoch -> batches in FFCV's QUASI_RANDOM order (pages of `page_size`, 2 x batch_size open)."""
    def epoch_batches(epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        rng = np.random.default_rng([seed, epoch])
        order = torch.from_numpy(quasi_random_permutation(len(y), page_size, 2 * batch_size, rng))
        for index in order.split(batch_size):
            yield X[index], y[index]
    return epoch_batches


# %% slideshow={"slide_type": "-"}
seen = [xb[:, 0] for xb, _ in quasi_batches(torch.arange(50)[:, None], torch.zeros(50), 10, 5, seed=0)(0)]
assert sorted(torch.cat(seen).tolist()) == list(range(50)) and [len(s) for s in seen] == [10] * 5
assert not torch.equal(torch.cat(seen), torch.arange(50))  # shuffled
print("one quasi-random epoch: 5 batches of 10, every sample once, not in stored order")


# %% [markdown] slideshow={"slide_type": "subslide"}
# `quality_rows` measures the class mix of each order on the sorted data, and trains on the data in that order:

# %% slideshow={"slide_type": "-"}
def quality_rows(n: int, group_sizes: Iterable[int], batch_size: int = 100, epochs: int = 2, classes: int = 10,
                 seed: int = 0) -> list[dict[str, Any]]:
    """Class mix per batch (entropy, bits) and test accuracy after a short run, per order and group size."""
    X, y = sorted_blobs(n, classes, seed=seed)
    test = sorted_blobs(n // 5, classes, seed=seed, split=1)
    gen = torch.Generator().manual_seed(seed)
    full = BatchLoader((X, y), batch_size, shuffle=True, seed=seed)
    orders = [("full shuffle", n, epochs_of(full), partial(torch.randperm, n, generator=gen))]
    for g in group_sizes:
        grouped = BatchLoader((X, y), batch_size, shuffle="grouped", seed=seed, group_size=g)
        orders.append(("grouped", g, epochs_of(grouped), partial(grouped_permutation, n, g, gen)))
        orders.append(("FFCV quasi-random", g, quasi_batches(X, y, batch_size, g, seed), partial(
            quasi_random_permutation, n, g, 2 * batch_size, np.random.default_rng(seed))))
    return [{"order": name, "group_size": g, "entropy_bits": batch_class_entropy(y, order(), batch_size, classes),
             "test_accuracy": train_accuracy(batches, epochs, test, classes, seed)}
            for name, g, batches, order in measure.progress(orders, desc="orders")]


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
quality = pd.DataFrame(quality_rows(QUALITY_N, GROUP_SIZES, BATCH_SIZE, EPOCHS))
quality.round(3)


# %% [markdown] slideshow={"slide_type": "-"}
# The entropy column is what the prediction was about; the accuracy column is what it does to training.
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
# badly. `group_size_speed` times `grouped_permutation` at the headline N for each group size of the
# sweep, interleaved with the fastest full permutation, and we put the speed-up next to the class-mix entropy
# it gives.

# %% slideshow={"slide_type": "subslide"}
def group_size_speed(n: int, group_sizes: Iterable[int], repeat: int, full_method: str = "torch randperm",
                     seed: int = 0) -> list[dict[str, Any]]:
    """Time the grouped permutation at size `n` per group size, interleaved with the full permutation `full_method`."""
    if full_method not in FULL:
        raise ValueError(f"full_method must be one of {FULL}, got {full_method!r}")
    gen = torch.Generator().manual_seed(seed)
    fns: dict[str | int, Callable[[], Any]] = {full_method: permuters(n, 1, seed)[full_method]}
    fns |= {g: partial(grouped_permutation, n, g, gen) for g in group_sizes}
    seconds = measure.interleaved(fns, repeat=repeat, warmup=1, desc="group sizes", shuffle=True)
    return [{"group_size": g, "seconds": measure.median(seconds[g]), "full_method": full_method,
             "full_seconds": measure.median(seconds[full_method]),
             "speedup_over_full": measure.ratio(seconds, full_method, g)} for g in group_sizes]


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fastest_method = full.loc[full.n == N_HEADLINE].sort_values("seconds").method.iloc[0]
speed = pd.DataFrame(group_size_speed(N_HEADLINE, GROUP_SIZES, REPEAT, full_method=fastest_method))
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

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. FFCV's own `QUASI_RANDOM` against the replica
#
# Section 3's FFCV rows come from `quasi_random_permutation`, a replica. Here the installed
# [FFCV](https://github.com/libffcv/ffcv) `Loader` makes its own order over a real `.beton`, and we compare. Upstream's
# order is `generate_order_inner` in
# [ffcv/traversal_order/quasi_random.py](https://github.com/libffcv/ffcv/blob/main/ffcv/traversal_order/quasi_random.py),
# compiled with numba; the next cell prints the installed copy's source. Read it against the replica above:
#
# - **The same steps**: shuffle the samples inside every page, shuffle the page order, keep `2 x batch_size` pages open,
#   draw each next sample from an open page picked uniformly at random, close a page when it runs out and open the next.
# - A closed page leaves the open list by `list.remove` (the others keep their places); the replica moves the last open
#   page into its slot. The pick is uniform over the open pages, so this changes which slot holds a page, not the odds.
# - FFCV seeds numba's global generator with `seed * 912300 + epoch`; the replica takes a numpy `Generator`. The
#   two never make the same order, only orders from the same distribution, so we compare statistics over a few epochs.
# - **The pages differ.** Upstream's pages are the storage pages of the `.beton` (the writer's `page_size`, 8 MiB by
#   default; a sample never spans two pages), and which samples share a page comes from the file's allocation table. How
#   many samples a page holds follows from their size: a row of 93 float32 (Otto, 372 bytes) puts about 22,000 rows on a
#   page, a raw 32x32 RGB image (3 KiB) about 2,700. The replica's pages are runs of `page_size` consecutive indices, a
#   knob: section 3 set it to each group size, with 200 pages open, far more pages than a small file has. The two
#   layouts coincide only for a file written in index order by one writer worker (with several, each fills its own
#   pages).
# - A file of fixed-size fields only (`IntField`, `FloatField`) has no data pages, and FFCV refuses `QUASI_RANDOM`
#   for it.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
HAVE_FFCV = ffcv_io.have_ffcv()
why = "" if HAVE_FFCV else "ffcv is not importable here (see notebook 00 to add it)"
if HAVE_FFCV:
    from ffcv.traversal_order import quasi_random as upstream

    print(inspect.getsource(upstream.generate_order_inner.py_func))  # the installed code, not a copy
else:
    print(f"skipped the comparison with FFCV's own QUASI_RANDOM order: {why}")


# %% [markdown] slideshow={"slide_type": "subslide"}
# The file: `FFCV_ROWS` rows sorted by class in 10 blocks, as in section 3, each `FFCV_ROW_BYTES` of float32 with the
# row's index in its first column, so that the order is read back from the batches FFCV yields, not re-derived:

# %% slideshow={"slide_type": "-"}
def write_sorted_beton(path: Path, n: int, row_bytes: int, classes: int = 10) -> tuple[Path, np.ndarray]:
    """Write `n` rows of `row_bytes` (float32, each row's index in its first column) and labels sorted in `classes`
    blocks, as `sorted_blobs`' are, as a table `.beton`; return its path and labels. An existing file is kept."""
    labels = np.arange(n) * classes // n
    if not path.exists():
        X = np.zeros((n, row_bytes // 4), dtype=np.float32)
        X[:, 0] = np.arange(n)
        ffcv_io.write_table_beton(path, X, labels)
    return path, labels


# %% [markdown] slideshow={"slide_type": "-"}
# The helpers' `ffcv_io.loader_orders` runs FFCV's `Loader` over the file with `QUASI_RANDOM` and reads each epoch's
# order back from the first column, with each row's storage page from the file's allocation table:

# %% slideshow={"slide_type": "subslide"}
show_code(ffcv_io.loader_orders)


# %% [markdown] slideshow={"slide_type": "-"}
# Each order is summed up by its class mix, the storage pages a batch touches, and the pages read in the first quarter
# of the epoch; `ffcv_order_rows` averages these over epochs for FFCV's own order, for the replica on the file's pages
# and for a full shuffle:

# %% slideshow={"slide_type": "subslide"}
def order_stats(order: np.ndarray, labels: np.ndarray, pages: np.ndarray, batch_size: int) -> dict[str, float]:
    """Return the class mix of `order`'s batches, the pages per batch and the pages its first quarter reads."""
    batches = order[: len(order) // batch_size * batch_size].reshape(-1, batch_size)
    return {"entropy_bits": batch_class_entropy(labels, order, batch_size),
            "pages_per_batch": float(np.mean([len(np.unique(pages[b])) for b in batches])),
            "pages_in_first_quarter": len(np.unique(pages[order[: len(order) // 4]]))}


# %% slideshow={"slide_type": "subslide"}
def ffcv_order_rows(path: Path, labels: np.ndarray, batch_sizes: Iterable[int], epochs: int) -> list[dict[str, Any]]:
    """Mean `order_stats` over `epochs` of FFCV's QUASI_RANDOM order over `path`, of the replica on the same pages
    (rows per storage page, 2 x batch_size open) and of a full shuffle; `labels` in row order."""
    rows = []
    for b in batch_sizes:
        real, pages = ffcv_io.loader_orders(path, b, epochs)
        page_size = int(np.bincount(pages).max())
        if not np.array_equal(pages - pages.min(), np.arange(len(pages)) // page_size):
            raise ValueError(f"{path} does not store its rows in runs of {page_size}, the replica's pages")
        orders = {"FFCV Loader, QUASI_RANDOM": real,
                  "replica": [quasi_random_permutation(len(labels), page_size, 2 * b, np.random.default_rng(s))
                              for s in range(epochs)],
                  "full shuffle": [np.random.default_rng(s).permutation(len(labels)) for s in range(epochs)]}
        for name, found in orders.items():
            stats = pd.DataFrame([order_stats(o, labels, pages, b) for o in found]).mean()
            rows.append({"order": name, "batch_size": b, "open_pages": 2 * b, "page_size": page_size, **stats})
    return rows


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction.** 8 MiB / 16 KiB = 512 rows per page, so 4,096 rows fill 8 pages. At a batch of 100, up to 200 pages
# may be open: all 8 are open from the first sample, and the order draws from all of them, so the class mix should
# match a full shuffle's, with a batch of 100 over 8 pages touching nearly all 8 (8 x (1 - (7/8)^100)). At a batch of 2,
# 4 pages are open: a batch's two samples share a page with probability 1/4 (1 + 3/4 = 1.75 pages per batch), and the
# first quarter of the epoch (1,024 samples, about 256 draws per open page) should read those 4 pages only, since none
# of them runs out before 512 draws; a full shuffle reads all 8. The replica, given the file's pages, should give the
# same figures.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if HAVE_FFCV:
    beton, ffcv_labels = write_sorted_beton(config.data_dir() / f"sorted-{FFCV_ROWS}x{FFCV_ROW_BYTES}B.beton",
                                            FFCV_ROWS, FFCV_ROW_BYTES)  # written once, then reused
    beton_written = beton.stat().st_mtime_ns
    assert write_sorted_beton(beton, FFCV_ROWS, FFCV_ROW_BYTES)[0].stat().st_mtime_ns == beton_written  # kept
    assert (np.diff(ffcv_labels) >= 0).all() and len(np.unique(ffcv_labels)) == 10  # sorted in 10 blocks
    ffcv_order = pd.DataFrame(ffcv_order_rows(beton, ffcv_labels, (BATCH_SIZE, FFCV_SMALL_BATCH), FFCV_EPOCHS))
else:
    ffcv_order = pd.DataFrame()
    print(f"skipped: {why}")
ffcv_order.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
ffcv_figures: dict[str, float] = {}
names = {"FFCV Loader, QUASI_RANDOM": "ffcv", "replica": "replica", "full shuffle": "full"}
for b, suffix in ((BATCH_SIZE, ""), (FFCV_SMALL_BATCH, "_small_batch")) if HAVE_FFCV else ():
    row = ffcv_order[ffcv_order.batch_size == b].set_index("order").rename(index=names)
    ffcv_figures |= {f"quasi_{o}_{k}{suffix}": float(row.loc[o, k]) for o in row.index
                     for k in ("entropy_bits", "pages_per_batch", "pages_in_first_quarter")}
    pages = FFCV_ROWS // int(row.page_size.iloc[0])
    k = min(2 * b, pages)  # pages open at once
    expected = k * (1 - (1 - 1 / k) ** b)  # distinct pages among b uniform picks of k
    _ = measure.predicted(f"FFCV, pages per batch of {b} ({k} of {pages} pages open)", 0.95 * expected,
                          expected + 0.01, row.loc["ffcv", "pages_per_batch"], fmt=".2f")
    if k < pages <= 2 * k:  # a quarter epoch draws about half of each open page: none runs out, no other opens
        assert row.loc["ffcv", "pages_in_first_quarter"] == row.loc["replica", "pages_in_first_quarter"] == k
        assert row.loc["full", "pages_in_first_quarter"] == pages
    print("  FFCV / replica / full shuffle: class mix " + " / ".join(f"{h:.2f}" for h in row.entropy_bits)
          + " bits; the first quarter reads " + " / ".join(f"{p:.0f}" for p in row.pages_in_first_quarter) + " pages")
if not HAVE_FFCV:
    print(f"skipped: {why}")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if HAVE_FFCV:
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    for ax, stat in zip(axes, ("entropy_bits", "pages_per_batch", "pages_in_first_quarter")):
        ffcv_order.pivot(index="batch_size", columns="order", values=stat).plot.bar(ax=ax, rot=0, legend=False)
        ax.set_ylabel(stat.replace("_", " "))
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3)
    fig.suptitle(f"FFCV's own QUASI_RANDOM against the replica ({FFCV_ROWS} sorted rows, {FFCV_EPOCHS} epochs)")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    plots.save(fig, "04_fast_shuffle-ffcv-order")
    plt.show()
else:
    print(f"no figure: {why}")


# %% [markdown] slideshow={"slide_type": "subslide"}
# Where FFCV is installed, the printed lines set its order beside the replica's on the same pages. The algorithm is the
# same, so where they part it is the pages that differ, not the steps: a real file's pages hold as many samples as fit
# in 8 MiB, which sets how many pages a data set has and whether `2 x batch_size` of them cover the whole file (then
# every batch draws from every page) or only part of it (then the epoch reads a few pages at a time, the point of the
# order: a file larger than RAM is read a page at a time). Section 3's small pages, 200 of them open, are the second
# regime; a small `.beton` of small rows is always the first. The class mix on sorted data stays close to a full
# shuffle's in both, because the open pages are a random draw of the file's pages and each is shuffled inside.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
def headline(rows: list[dict[str, Any]], n: int, method: str = "grouped_permutation (g=") -> float:
    """Return how many times faster `method` (a name's start) is than the fastest full CPU permutation at `n`."""
    return next(r["speedup_over_full"] for r in rows if r["n"] == n and r["method"].startswith(method))


def cost_figures(rows: list[dict[str, Any]], n: int) -> dict[str, float]:
    """Return the cost curve's figures: the speed-ups at `n` (the headline N), the medians behind them in ns per
    index, and the fastest full shuffle's ns per index at the smallest N."""
    ns = {r["method"]: r["ns_per_index"] for r in rows if r["n"] == n}
    smallest = {r["method"]: r["ns_per_index"] for r in rows if r["n"] == min(r["n"] for r in rows)}
    grouped, slide = (next(v for m, v in ns.items() if m.startswith(s)) for s in ("grouped_perm", "slide's"))
    return {f"grouped_speedup_2p{round(math.log2(n))}": headline(rows, n), "grouped_speedup_headline": headline(rows, n),
            "slide_grouped_speedup_headline": headline(rows, n, "slide's grouped (g="),
            "fastest_full_ns_per_index": min(ns[m] for m in FULL), "grouped_ns_per_index": grouped,
            "slide_grouped_ns_per_index": slide, "fastest_full_ns_per_index_smallest": min(smallest[m] for m in FULL)}


# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
quasi = quality[quality.order == "FFCV quasi-random"]
figures = dict(cost_figures(cost_rows, N_HEADLINE), **ffcv_figures, full_entropy_bits=full_h, full_test_accuracy=full_acc,
               grouped_entropy_largest_over_full=grouped_q.loc[max(GROUP_SIZES), "entropy_bits"] / full_h,
               quasi_random_entropy_min_over_full=quasi.entropy_bits.min() / full_h)
figures.update({f"grouped_entropy_g{g}": h for g, h in grouped_q.entropy_bits.items()})
figures.update({f"grouped_speedup_g{g}": s for g, s in zip(trade.group_size, trade.speedup_over_full)})
# the medians behind those speed-ups, from the same rounds
figures.update({f"grouped_ns_per_index_g{g}": t / N_HEADLINE * 1e9 for g, t in zip(trade.group_size, trade.seconds)})
figures["group_sweep_full_ns_per_index"] = trade.full_seconds.iloc[0] / N_HEADLINE * 1e9
path = measure.save_results("04_fast_shuffle", figures, rows=cost_rows + quality.to_dict("records"),
                           knobs=dict(group_size=GROUP_SIZE, sizes=sorted(set(SIZES) | {N_HEADLINE}),
                                      n_headline=N_HEADLINE, threads=torch.get_num_threads(), group_sizes=GROUP_SIZES, quality_n=QUALITY_N,
                                      batch_size=BATCH_SIZE, epochs=EPOCHS), repeats=REPEAT)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# A full shuffle of a large index is bound by random memory access, not by the random numbers' arithmetic,
# and costs far more than streaming the index through memory. Shuffling groups keeps the swaps in the cache;
# reusing a few inner shuffles, as the helpers' version does, also saves most of the random numbers and turns
# the rest into sequential writes. The price is randomness at the scale of a batch: keep groups well below the
# batch size when the data is stored in class order, or use a buffer of open pages as FFCV does. This run's
# figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for key in ("grouped_speedup_headline", "slide_grouped_speedup_headline", "fastest_full_ns_per_index",
            "grouped_entropy_largest_over_full", "quasi_random_entropy_min_over_full"):
    print(f"{key} = {figures[key]:.3g}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# Seed 000/001 claims that generating a permutation per epoch is slow for a big array and that grouping makes
# it fast. We check that claim on the slide's grouped shuffle as written (its speed-up at the headline N over the
# fastest full shuffle); the helpers' `grouped_permutation`, which also shares a few inner shuffles between the
# groups, is the project's variant and gets a claim of its own. On the quality side we check that groups as large as
# a class ruin the class mix while FFCV's quasi-random order keeps it, against the claims registry's thresholds. The
# quality figures come from seeded orders, so nbval compares them:

# %% slideshow={"slide_type": "-"}
for name in ("grouped_entropy_largest_over_full", "quasi_random_entropy_min_over_full"):
    claims.check(name, figures)

# %% [markdown] slideshow={"slide_type": "-"}
# The speed-ups are ratios of this run's timings (the median of per-round ratios at the headline N) and depend on
# the machine and its load, so nbval does not compare their verdicts:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for name in ("slide_grouped_speedup_headline", "grouped_speedup_headline"):
    claims.check(name, figures)

# %% [markdown] slideshow={"slide_type": "-"}
# The check of the replica against FFCV's own Loader runs only where ffcv is installed, so nbval does not
# compare its line either:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
claims.check("quasi_random_replica_matches_ffcv", figures, why=why)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Shuffle the data set once, on disk, before training (`y = y[p]` for one random permutation `p`), then
# measure the class mix of `grouped_permutation` at each group size of `GROUP_SIZES` again. Which group sizes are
# now safe, and why?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex1_y = sorted_blobs(QUALITY_N)[1]  # the class-sorted labels of section 3
ex1_p = torch.randperm(QUALITY_N, generator=torch.Generator().manual_seed(1))
ex1 = pd.DataFrame([{"group_size": g,
                     "sorted data": batch_class_entropy(ex1_y, ex1_perm, BATCH_SIZE, 10),
                     "shuffled once": batch_class_entropy(ex1_y[ex1_p], ex1_perm, BATCH_SIZE, 10)}
                    for g in GROUP_SIZES
                    for ex1_perm in [grouped_permutation(QUALITY_N, g, torch.Generator().manual_seed(g))]])
print(ex1.set_index("group_size").round(2))
print(f"full shuffle of the sorted data: {full_h:.2f} bits; on shuffled data every group is already a random "
      "sample of the classes, so any group size mixes as well as a full shuffle")
assert (ex1["shuffled once"] > 0.9 * full_h).all()

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Call `grouped_permutation` with `variants=1` instead of the default 16. Does the class-mix entropy
# change? What else does? (Hint: look at where item k of every group lands, `perm.view(-1, g) % g`.)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex2_g, ex2_labels = 64, np.arange(64 * 100) * 10 // (64 * 100)  # 100 groups, sorted into 10 classes
ex2 = {v: grouped_permutation(64 * 100, ex2_g, torch.Generator().manual_seed(3), variants=v) for v in (1, VARIANTS)}
for v, perm in ex2.items():
    inner = perm.view(-1, ex2_g) % ex2_g  # each row: the offsets of one group's items, in output order
    print(f"variants={v:>2}: entropy {batch_class_entropy(ex2_labels, perm, BATCH_SIZE, 10):.2f} bits, "
          f"{len(torch.unique(inner, dim=0))} distinct inner orders among {len(inner)} groups")
print("the entropy depends on which groups share a batch, not on the order inside them; with one variant, "
      "item k of every group lands at the same offset of its group's slot")
assert len(torch.unique(ex2[1].view(-1, ex2_g) % ex2_g, dim=0)) == 1
assert len(torch.unique(ex2[VARIANTS].view(-1, ex2_g) % ex2_g, dim=0)) > 1

# %% [markdown] slideshow={"slide_type": "-"}
# **3.** Time every permuter (`permuters`) with one torch thread and with all of them, in the same interleaved
# rounds, at the middle N of `SIZES` (`measure.torch_threads` sets the count and restores it). Which method's time
# changes the most, and is the change clear of the noise by its interval? Predict first: which of the methods can
# use more than one thread at all?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex3_contenders(n: int, counts: list[int]) -> dict[tuple[str, int], Any]:
    """Return {(method, threads): a call of that permuter with that many torch threads} at size `n`."""
    def with_threads(fn, t):
        def run():
            with measure.torch_threads(t):  # sets the count, and restores it after the call
                fn()
        return run
    return {(m, t): with_threads(fn, t) for m, fn in permuters(n, GROUP_SIZE).items() for t in counts}


ex3_all = torch.get_num_threads()
ex3_n = sorted(SIZES)[len(SIZES) // 2]
ex3_t = measure.interleaved(ex3_contenders(ex3_n, sorted({1, ex3_all})), repeat=6, warmup=1, shuffle=True)
ex3_change = {m: measure.ratios(ex3_t, (m, 1), (m, ex3_all)) for m, _ in ex3_t if ex3_all > 1}  # 1 thread / all
for ex3_m, ex3_r in ex3_change.items():
    print(f"{ex3_m:>30}, time with one thread over {ex3_all}: {measure.verdict(ex3_r, (0.9, 1.1))}")
if ex3_change:
    ex3_most = max(ex3_change, key=lambda m: abs(np.log(measure.median(ex3_change[m]))))
    ex3_v = measure.verdict(ex3_change[ex3_most], (0.9, 1.1))  # "missed" the 10 % band: a change the interval shows
    print(f"changed the most with one thread, N = {ex3_n:,}: {ex3_most} ({ex3_v.median:.2f}x its time): "
          + {"missed": "a clear change", "met": "within 10 %: no method changes clearly"}.get(ex3_v.word,
                                                                                            "a tie with the noise"))
    # with all the threads, a method's time can fall at most to 1 / threads of its one-thread time (a quarter's room)
    assert max(measure.median(r) for r in ex3_change.values()) <= 1.25 * ex3_all, ex3_change
else:
    print("one torch thread is all this machine has: nothing to compare")
print("numpy's shuffles run on one thread anyway; torch's ops may split work across threads, which helps on an "
      "idle machine and costs a synchronisation when another process holds a core")
assert torch.get_num_threads() == ex3_all  # the thread count is restored after every call
assert {m for m, _ in ex3_t} >= set(FULL) and {len(v) for v in ex3_t.values()} == {6}  # every method, every round

# %% [markdown] slideshow={"slide_type": "subslide"}
# **4.** FFCV keeps 2 x batch_size pages open. Make the quasi-random order of the sorted labels with pages as
# large as the largest group size and `buffer_size=1`, then with `2 * BATCH_SIZE`. What does the buffer do for
# the class mix?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex4_page, ex4_y = max(GROUP_SIZES), np.arange(QUALITY_N) * 10 // QUALITY_N  # the sorted labels of section 3
ex4 = {b: batch_class_entropy(ex4_y, quasi_random_permutation(QUALITY_N, ex4_page, b, np.random.default_rng(0)),
                              BATCH_SIZE, 10) for b in (1, 2 * BATCH_SIZE)}
for b, h in ex4.items():
    print(f"pages of {ex4_page}, {b:>3} open: {h:.2f} bits (full shuffle: {full_h:.2f})")
print("with one page open, a batch reads consecutive samples of one page, mostly one class; many open pages "
      "interleave into every batch")
assert ex4[2 * BATCH_SIZE] > ex4[1] + 1  # a wide margin: one class against several per batch
