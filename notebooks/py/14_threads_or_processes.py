# %% [markdown] slideshow={"slide_type": "slide"}
# # 14 · Threads or processes?
#
# | | |
# |---|---|
# | **Question** | On decode-every-epoch work, do threads in one process load images as fast as DataLoader's worker processes, with less CPU and memory, and how close do they get to what the cores can decode? |
# | **Seeds** | beyond the seeds: SPDL's thread pipelines (arXiv 2504.20067), torchdata.nodes, the helpers' `ThreadLoader` |
# | **GPU** | optional: where one is, the device-decode pipeline decodes its JPEGs on it (nvJPEG); everything else here is CPU work |
# | **Optional** | simplejpeg, libjpeg-turbo: exercise 2's simplejpeg decode is skipped without it; without libjpeg-turbo Pillow decodes more slowly |
# | **Run time** | <!-- run-time --> workshop ~2.2 min (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# The DataLoader parallelises `__getitem__` over worker *processes*: each worker starts (fork, forkserver or
# spawn), gets a copy of the dataset, and ships every batch back through shared memory. Threads avoid all three
# costs, but only run in parallel where the work releases the GIL. JPEG decoding and Pillow's resize are C code
# that can release it. This notebook measures, in one run on this machine:
#
# 1. how much of each sample's time holds the GIL, and what that predicts for more cores,
# 2. the physical limit: one thread's per-image rate times the cores,
# 3. every pipeline on the same synthetic ImageFolder (decode, resize, center crop, uint8 tensor, every epoch):
#    images/s, CPU seconds per image, first-batch latency and the PSS of all its processes; then the thread
#    loader head to head with the best DataLoader configuration and [SPDL](https://github.com/facebookresearch/spdl), in interleaved rounds,
# 4. the DataLoader's start-up under fork, forkserver and spawn,
# 5. a timeline of the thread loader against the DataLoader,
# 6. what free-threaded Python and Python 3.14's forkserver default would change.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import gc
import json
import multiprocessing
import os
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pandas as pd
import psutil
import torch
from torch.utils.data import DataLoader

from fastloops_helpers import ThreadLoader, config, measure
from fastloops_book import claims
from fastloops_book.source import show_code
from fastloops_helpers.data.jpeg_folder import ImageFolder, pil_loader, synthetic_imagefolder
from fastloops_helpers.experiments import imagefolder as imf
from fastloops_helpers.load import transforms as T
from fastloops_helpers.data.device_decode import device_jpeg_loader
from fastloops_helpers.measure import timeline
from fastloops_helpers.measure.stats import HIGH, LOW

cores = os.cpu_count()  # the most CPU work that can run at once
print(config.describe().split(", data=")[0])
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
batch_size = config.size("threads.batch_size")      # images per batch: larger amortises the collate, delays batch 1
epochs = config.size("threads.epochs")              # timed epochs per pipeline of the sweep (passes in section 2)
n_threads = config.size("threads.threads_per_core") * cores  # every thread pipeline's threads: > cores overlaps reads
n_workers = cores                                   # worker processes: DataLoader tries 0 to this many
limit_images = config.size("threads.limit_images")  # images one thread decodes for the limit: more covers the sizes
rounds = config.size("threads.rounds")              # head-to-head rounds (one epoch each): more, narrower intervals
gil_images = config.size("threads.gil_images")      # images per GIL-share round and contender: more, less noise
step_ms = config.size("anatomy.step_ms")            # section 5's stand-in GPU step per batch (it sleeps: CPU is free)
timeline_batches = 12                               # batches section 5 records per loader: more, longer timelines
gil_n = 2                                           # section 1's threads and processes: the fewest that contend
sweep_s = config.size("threads.sweep_s")            # seconds section 3's sweep may take: sizes its epoch

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
RESIZE, CROP = 256, 224                 # the shorter side after the resize, then the centre crop (ImageNet's)
decode = T.ValSampleTransform(RESIZE, CROP).precompute  # PIL image -> resize, centre crop, uint8 CHW tensor
ds = ImageFolder(synthetic_imagefolder() / "train", transform=decode)  # decoded at every access
torch.set_num_threads(1)                # as DataLoader does in each worker, for the whole notebook (exercise 4)


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
def has(module):
    """Return whether the optional `module` imports here (not if missing, or if its native library is broken)."""
    try:
        __import__(module)
        return True
    except Exception:
        return False


skipped = {"spdl.io decoders": "spdl.io's decoders need FFmpeg 6+ (Debian 12 ships 5.1): SPDL runs the same Pillow "
                               "function here"}
for module, extra in (("spdl.pipeline", "spdl-core"), ("torchdata.nodes", "torchdata")):
    if not has(module):
        skipped[module] = f"not installed: pip install '.[threads]' (needs {extra})"
for what, why in skipped.items():
    print(f"skipped {what}: {why}")

# %% slideshow={"slide_type": "subslide"}
print("ThreadLoader batches per epoch == ceil(images / batch size):",
      len(ThreadLoader(ds, batch_size, threads=n_threads)) == -(-len(ds) // batch_size))
print("sample shape and dtype:", tuple(ds[0][0].shape), ds[0][0].dtype)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The code being timed
#
# Every pipeline in this notebook runs the same per-sample function: open one JPEG, decode it with Pillow
# (`pil_loader`), resize the shorter side to 256, cut the centre 224 x 224, return a uint8 CHW tensor. The
# DataLoader and torchdata.nodes run it in worker processes, so it lives in the package, where a worker can import
# it; the cell below renders the package's code from the objects that run (the `ImageFolder` calls
# `pil_loader`, then the transform's `precompute`).

# %% slideshow={"slide_type": "subslide"}
show_code(pil_loader, T.ValSampleTransform.precompute)  # what every pipeline runs per sample

# %% [markdown] slideshow={"slide_type": "subslide"}
# The helpers' `ThreadLoader` runs that `__getitem__` on a pool of threads in this process. Its `__iter__` takes
# the epoch's order of indices from the same sampler as `BatchLoader` (shuffle, seed, shards) and hands it to
# `_run`, the loop below: it keeps `prefetch` batches in flight as one future per sample, so any free thread
# decodes the next image, and the main thread waits for the oldest batch's samples, in order, and collates them.
# Nothing is pickled and nothing is copied between processes; what runs in parallel is what releases the GIL.

# %% slideshow={"slide_type": "subslide"}
show_code(ThreadLoader._load, ThreadLoader._run)  # the call each thread makes, and the loop that batches

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. How much of a sample holds the GIL?
#
# Threads run in parallel only while the work releases the GIL. If a share s of one sample's time on one thread
# holds it, Amdahl's law gives n threads a speed-up of 1 / (s + (1 - s) / n), and never more than 1 / s however
# many cores there are. Decoding a JPEG releases the GIL; opening the file, building the PIL image, converting it
# to a tensor and the loader's own Python do not, and only the whole sample tells how much that adds up to.
#
# **The measurement.** The same per-sample work, `ds[i]` over the same images, runs on one thread, on 2 threads and
# on 2 forked processes, which keep nothing: processes and threads then differ only in the GIL. Where 2 processes
# speed up 2-fold, 2 threads speed up 1 / (s + (1 - s) / 2), so
#
# processes / threads = 2 (s + (1 - s) / 2) = 1 + s, and s = processes / threads - 1.
#
# Dividing by the processes, not by one thread, cancels what both pay alike (a busy core, memory bandwidth). A
# 2-worker DataLoader runs in the same rounds: processes / DataLoader - 1 is o, what a DataLoader pays per sample
# to ship it back (pickling, shared memory, the collate).
#
# **Prediction:** s = 0.1 reads as a ratio of 1.1, no more than a shared machine moves a single timing, so each
# contender is timed once per round, in a new order each round, and s is taken per round with the interval of
# its median. The Python around a decode is tens of µs against a decode of 1 to 2 ms: s between 0 and 0.2.

# %% [markdown] slideshow={"slide_type": "subslide"}
# The protocol, in the cells below. `picks` spreads the timed images over the folder and `fetch` is one thread's
# work; a forked process runs the same `ds[i]` on the dataset it inherited (`pool_fetch`) and sends back only a
# count, so that nothing is pickled but the indices.

# %% slideshow={"slide_type": "-"}
ONE_THREAD = "one thread"  # the contender that fetches alone: the reference of every speed-up


def picks(ds, images):
    """Return `images` indices spread evenly over `ds`."""
    return range(0, len(ds), max(1, len(ds) // images))[:images]


def fetch(ds, indices):
    """Fetch the samples `indices` of `ds` on this thread (read, decode, resize, crop)."""
    return [ds[i] for i in indices]


# %% slideshow={"slide_type": "subslide"}
pool_ds = None  # the dataset of a GIL-round process, inherited through fork


def pool_start(ds):
    """Set up a GIL-round process: keep `ds`, and run torch on one thread, as a DataLoader worker does."""
    global pool_ds
    pool_ds = ds
    torch.set_num_threads(1)


def pool_fetch(chunk):
    """Fetch the samples `chunk` of the inherited dataset and keep nothing: only the count goes back."""
    for i in chunk:
        pool_ds[i]
    return len(chunk)


# %% slideshow={"slide_type": "subslide"}
def gil_rounds(ds, images, rounds, n):
    """Time one thread, `n` threads, `n` forked processes and an `n`-worker DataLoader on the same samples,
    interleaved over `rounds`; return {contender: images/s per round}."""
    indices = list(picks(ds, images))
    size = max(1, len(indices) // (4 * n))  # 4 chunks per thread or process: none waits long for the last one
    chunks = [indices[i:i + size] for i in range(0, len(indices), size)]
    fork = multiprocessing.get_context("fork")
    with ThreadPoolExecutor(n) as pool, fork.Pool(n, pool_start, (ds,)) as procs:
        loader = DataLoader(torch.utils.data.Subset(ds, indices), 8, num_workers=n, persistent_workers=True)
        seconds = measure.interleaved({
            ONE_THREAD: partial(fetch, ds, indices),
            f"{n} threads": lambda: list(pool.map(partial(fetch, ds), chunks)),
            f"{n} processes": lambda: procs.map(pool_fetch, chunks, chunksize=1),
            f"DataLoader, {n} workers": measure.drain(loader),
        }, repeat=rounds, warmup=1, shuffle=True)
        del loader  # its workers stop before the pool's
    return {name: [len(indices) / s for s in values] for name, values in seconds.items()}


# %% [markdown] slideshow={"slide_type": "subslide"}
# Per round, the arithmetic above turns the rates into s and o. With n threads and n processes in general,
# processes / threads = 1 + (n - 1) s. Amdahl's law and the crossover turn them into predictions; the asserts check
# each formula on numbers worked by hand.

# %% slideshow={"slide_type": "-"}
def gil_shares(rates, n):
    """Return, per round of `gil_rounds`, the GIL-held share s of a sample and the DataLoader's overhead o."""
    procs, thr, dl = rates[f"{n} processes"], rates[f"{n} threads"], rates[f"DataLoader, {n} workers"]
    return {"gil_share": [(p / t - 1) / (n - 1) for p, t in zip(procs, thr)],  # processes / threads = 1 + (n-1) s
            "dataloader_overhead": [p / d - 1 for p, d in zip(procs, dl)]}


# s = 0.25: 2 threads speed up 1 / (0.25 + 0.75 / 2) = 1.6x where 2 processes speed up 2x
assert gil_shares({"2 processes": [200.0], "2 threads": [160.0], "DataLoader, 2 workers": [160.0]}, 2) == {
    "gil_share": [0.25], "dataloader_overhead": [0.25]}
assert abs(gil_shares({"4 processes": [400.0], "4 threads": [100 / (0.25 + 0.75 / 4)],
                       "DataLoader, 4 workers": [320.0]}, 4)["gil_share"][0] - 0.25) < 1e-12


# %% slideshow={"slide_type": "subslide"}
def amdahl(share, n):
    """Return the speed-up of `n` threads when `share` of each sample's time holds the GIL (1 / share at most)."""
    return 1 / (max(share, 0.0) + (1 - max(share, 0.0)) / n)


def crossover_cores(share, overhead):
    """Return the cores above which processes (C / (1 + o)) beat threads (`amdahl`): C > 1 + o / s.

    Infinite at s <= 0 (nothing holds the GIL: threads never lose), 1 at o <= 0 (processes never lose)."""
    return float("inf") if share <= 0 else 1 + max(overhead, 0.0) / share


assert abs(amdahl(0.25, 2) - 1.6) < 1e-12 and abs(amdahl(0.25, 10**9) - 4) < 1e-6 and amdahl(-0.1, 4) == 4
assert abs(crossover_cores(0.1, 0.3) - 4) < 1e-12 and abs(4 / 1.3 - amdahl(0.1, 4)) < 1e-12  # equal speed-ups there
assert crossover_cores(0.0, 0.3) == float("inf") and crossover_cores(0.1, -0.2) == 1


# %% [markdown] slideshow={"slide_type": "-"}
# The prediction takes the median of the per-round values; its interval maps the 95-percent interval of s (and of
# o) through the same formula. A larger s gives a lower cap and speed-up, so the high end of s gives their low end.

# %% slideshow={"slide_type": "subslide"}
def gil_prediction(shares, cores):
    """Return s and o with their intervals, the thread cap 1 / s, the speed-up on `cores` and the crossover."""
    s, o = shares["gil_share"], shares["dataloader_overhead"]
    (s_lo, s_hi), (o_lo, o_hi) = measure.median_interval(s), measure.median_interval(o)
    sm, om = measure.median(s), measure.median(o)
    out = measure.interval_figures("gil_share", s) | measure.interval_figures("dataloader_overhead", o)
    cap = {"": sm, LOW: s_hi, HIGH: s_lo}  # the share's high end gives the cap's low end
    out |= {f"threads_cap_speedup{k}": 1 / v if v > 0 else float("inf") for k, v in cap.items()}
    out |= {f"threads_predicted_speedup{k}": amdahl(v, cores) for k, v in cap.items()}
    return out | {"processes_overtake_cores": crossover_cores(sm, om),
                  "processes_overtake_cores" + LOW: crossover_cores(s_hi, o_lo),
                  "processes_overtake_cores" + HIGH: crossover_cores(s_lo, o_hi)}


check = gil_prediction({"gil_share": [0.1, 0.2, 0.2, 0.2, 0.2, 0.4], "dataloader_overhead": [0.3] * 6}, 16)
assert (check["gil_share_ci_low"], check["gil_share_ci_high"]) == (0.1, 0.4)
assert abs(check["threads_cap_speedup_ci_low"] - 2.5) < 1e-9 and abs(check["threads_cap_speedup_ci_high"] - 10) < 1e-9
assert abs(check["processes_overtake_cores_ci_high"] - 4) < 1e-9  # 1 + 0.3 / 0.1: the share's low end

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
gil_rates = gil_rounds(ds, gil_images, rounds, gil_n)  # images/s per round of each of the four contenders
assert set(gil_rates) == {ONE_THREAD, f"{gil_n} threads", f"{gil_n} processes", f"DataLoader, {gil_n} workers"}
assert all(len(r) == rounds for r in gil_rates.values()), "every contender runs once per round"
shares = gil_shares(gil_rates, gil_n)                   # per round: s and the DataLoader's overhead o
gil = gil_prediction(shares, cores)                     # their medians and intervals, and what they predict
print(pd.DataFrame(gil_rates).median().rename("median img/s over the rounds").round(1).to_string())
share = gil["gil_share"]
for key, what in (("gil_share", "GIL-held share of a sample, s"), ("dataloader_overhead", "DataLoader overhead, o"),
                  ("threads_cap_speedup", "thread cap, 1 / s"),
                  ("threads_predicted_speedup", f"threads' speed-up on {cores} cores, 1 / (s + (1 - s) / {cores})"),
                  ("processes_overtake_cores", "cores above which processes beat threads, 1 + o / s")):
    print(f"{what}: {gil[key]:.3g} (95 % interval {gil[key + '_ci_low']:.3g} to {gil[key + '_ci_high']:.3g})")
_ = measure.predicted("GIL-held share of a sample, s", float("-inf"), 0.2, shares["gil_share"])


# %% [markdown] slideshow={"slide_type": "subslide"}
# An interval of s that reaches 0 leaves the cap open (inf): nothing measured here rules out that threads
# scale with every core. The crossover says where processes win in spite of their per-sample overhead: from
# C / (1 + o) > 1 / (s + (1 - s) / C), which holds once C > 1 + o / s. Section 3 checks the predicted speed-up
# against the `ThreadLoader`'s, and the cores of this machine against the crossover.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. The physical limit
#
# **Prediction:** a 500-pixel JPEG has about 0.2 megapixels; libjpeg-turbo decodes about 100 to 200 megapixels
# per second per core, so 1 to 2 ms per image, plus about 1 ms for the antialiased resize to 256 and the crop:
# one thread does roughly 300 to 700 images per second (200 to 1000 allowing for the image sizes and the
# file read). The limit is that rate times the cores, if nothing else runs.

# %% slideshow={"slide_type": "-"}
def one_thread_rate(ds, images, repeat):
    """Return one thread's images/s (read, decode, resize, crop) over `images` samples spread over `ds`: the
    median of `repeat` timed passes after one warm-up."""
    indices = picks(ds, images)
    seconds = measure.measure(partial(fetch, ds, indices), repeat=repeat, warmup=1)
    return len(indices) / measure.median(seconds)


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
one_thread = one_thread_rate(ds, limit_images, epochs)  # timed passes, as the sweep times epochs
limit = one_thread * cores
print(f"limit: {one_thread:.0f} img/s per thread x {cores} cores = {limit:.0f} img/s")
_ = measure.predicted("one thread's decode + resize + crop rate", 200, 1000, one_thread, "img/s")

# %% [markdown] slideshow={"slide_type": "-"}
# The per-image rate depends on the image sizes (the synthetic folder jitters them), on whether Pillow was built
# with libjpeg-turbo, and on the clock speed of a shared core. The limit ignores the collate and the loop itself,
# so no loader reaches it exactly. Section 3 times the same thread again in every round of its head-to-head, so
# that the thread loader's ratio to the limit compares timings from the same spells of a shared machine.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Every pipeline, same data, same run
#
# **Prediction:** all parallel pipelines run the same per-sample function, so each is capped by the limit above.
# DataLoader workers pay, per image, pickling the sample into shared memory (a 224 x 224 x 3 uint8 tensor is
# 150 KB, a copy at several GB/s: tens of µs, under 5 % of a 1-2 ms decode), so its best setting should reach
# 0.8 to 1.0 of the limit on an idle machine. Threads pay GIL contention on the Python parts instead; if those are
# about 10 % of each image, `ThreadLoader` reaches 0.8 to 1.0 of the limit too, so the ratio ThreadLoader / best
# DataLoader lies between 0.8 and 1.25. Memory differs in what each loader adds: each worker is a process with
# its own copy of the Python heap it touches, so the DataLoader's PSS grows by tens of MB per worker; threads
# add their stacks, the batches in flight and what the decoders keep per thread (malloc gives each allocating
# thread its own arena, and keeps what is freed there for reuse).

# %% [markdown] slideshow={"slide_type": "subslide"}
# The competitors, set up as below: the DataLoader with 0 to `n_workers` worker processes (forked, kept between
# epochs), the `ThreadLoader` above, SPDL's pipeline (an asyncio event loop that hands each index to
# `ds.__getitem__` on a thread pool, then batches and collates), and torchdata.nodes' `ParallelMapper` on
# threads and on processes. Each entry is a function that makes the loader, so each is built fresh before its
# warm-up epoch; the memmap row is notebook 09's loader of pre-decoded images, the floor of the table.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **How many images the sweep's epoch holds.** A DataLoader with w workers hands each worker whole batches: with
# fewer than w batches an epoch, some workers never get one, and with one batch each it times their start-up, not
# their rate. So the epoch holds at least 2 batches per worker of the largest count (`n_workers`, the cores). Above
# that, the sweep is sized by time, not by a fixed count: each pipeline runs 1 + `epochs` epochs, the DataLoader
# with w workers at about w times one thread's rate (one thread for w = 0), the `others` thread and process
# pipelines at the cores' rate, and the device decode on one thread where no GPU decodes for it. At one thread's
# seconds per image t, one image of the epoch costs the sweep
#
# t (1 + epochs) (1 + 1 + 1/2 + ... + 1/C + others / C + 1)
#
# and the epoch holds as many whole batches as `sweep_s` pays for. On C = 16 cores the floor alone is 2 x 16
# batches; the asserts below check on 2 and on 16 cores, at the slow end of section 2's prediction (200 images
# per second on one thread), that the floor fits the budgets of the defaults (`threads.sweep_s`).

# %% slideshow={"slide_type": "subslide"}
def sweep_cost(cores, s_per_image, epochs, others=4):
    """Return the seconds one image of the sweep's epoch costs: every pipeline's 1 + `epochs` epochs, at its rate."""
    dataloaders = 1 + sum(1 / w for w in range(1, cores + 1))  # 0 workers, then w workers at w times one thread
    return s_per_image * (1 + epochs) * (dataloaders + others / cores + 1)  # + the device decode, on one thread


def sweep_images(cores, batch_size, budget_s, s_per_image, epochs):
    """Return the images of the sweep's epoch: the whole batches `budget_s` pays for, and at least 2 per worker."""
    fits = int(budget_s / sweep_cost(cores, s_per_image, epochs)) // batch_size * batch_size
    return max(fits, 2 * batch_size * cores)


for c in (2, 16):  # this notebook's epochs and the smallest budget that runs on that many cores
    for profile in ("smoke", "workshop") if c == 2 else ("gpu",):
        b, budget, e = (config.size(k, profile) for k in ("threads.batch_size", "threads.sweep_s", "threads.epochs"))
        n = sweep_images(c, b, budget, 1 / 200, e)
        assert n >= 2 * b * c and n % b == 0, (c, profile, n)  # 2 batches per worker of the largest count
        assert n * sweep_cost(c, 1 / 200, e) <= budget, (c, profile, n)  # within the budget
assert sweep_images(16, 8, 0.0, 1 / 200, 1) == 256  # a budget of nothing still gets the floor: 2 x 8 x 16

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
n_sweep = sweep_images(cores, batch_size, sweep_s, 1 / one_thread, epochs)  # section 2's rate sizes it
sweep_ds = ImageFolder(synthetic_imagefolder(train=n_sweep, val=2) / "train", transform=decode)
print(f"sweep epoch: {n_sweep} images = {n_sweep // batch_size} batches of {batch_size}, "
      f"{n_sweep / batch_size / n_workers:.1f} per worker at {n_workers} workers; predicted sweep "
      f"{n_sweep * sweep_cost(cores, 1 / one_thread, epochs):.0f} s of the {sweep_s} s budget")


# %% slideshow={"slide_type": "subslide"}
def spdl_loader(ds, batch_size, threads):
    """Return an iterable whose each pass runs SPDL's thread pipeline over `ds` in order."""
    from spdl.pipeline import PipelineBuilder

    class Epochs:
        def __iter__(self):
            p = (PipelineBuilder()
                 .add_source(range(len(ds)))  # the indices, in order
                 .pipe(ds.__getitem__, concurrency=threads, output_order="input")  # samples on `threads` threads
                 .aggregate(batch_size)  # lists of batch_size samples
                 .pipe(torch.utils.data.default_collate)  # one batch of tensors
                 .add_sink(3)  # at most 3 batches waiting
                 .build(num_threads=threads))  # the asyncio loop's thread pool
            with p.auto_stop():
                yield from p

    return Epochs()


# %% slideshow={"slide_type": "subslide"}
def nodes_loader(ds, batch_size, workers, method):
    """Return an iterable whose each pass runs torchdata.nodes' ParallelMapper (threads or processes)."""
    import torchdata.nodes as tn

    class Epochs:
        def __iter__(self):
            gc.collect()  # shut the last epoch's workers down here, not in a forked child that inherits them
            node = tn.ParallelMapper(tn.IterableWrapper(range(len(ds))), ds.__getitem__, num_workers=workers,
                                     method=method, in_order=True)  # samples on threads or processes, in order
            node = tn.Batcher(node, batch_size, drop_last=False)  # lists of batch_size samples
            yield from tn.Loader(tn.Mapper(node, torch.utils.data.default_collate))

    return Epochs()


# %% slideshow={"slide_type": "subslide"}
def configurations(ds, batch_size, threads, workers):
    """Return {pipeline name: a function making its loader}; optional packages missing here are left out."""
    configs = {}
    for w in range(workers + 1):  # worker processes (0: in this process), started once and kept between epochs
        configs[f"DataLoader, {w} workers (fork)"] = partial(DataLoader, ds, batch_size, num_workers=w,
                                                             persistent_workers=w > 0)
    configs[f"ThreadLoader, {threads} threads"] = lambda: ThreadLoader(ds, batch_size, threads=threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # bytes on threads, decoded where the step would run
    configs[f"device decode ({device}), {workers} threads"] = partial(device_jpeg_loader, ds.root, batch_size, device,
                                                                       threads=workers, shuffle=True)
    if has("spdl.pipeline"):
        configs[f"SPDL pipeline, {threads} threads"] = lambda: spdl_loader(ds, batch_size, threads)
    if has("torchdata.nodes"):
        configs[f"torchdata.nodes, {threads} threads"] = lambda: nodes_loader(ds, batch_size, threads, "thread")
        configs[f"torchdata.nodes, {workers} processes"] = lambda: nodes_loader(ds, batch_size, workers, "process")
    memmap = imf.prepare().train  # notebook 09's pre-decoded images
    configs["memmap + BatchLoader (notebook 09)"] = lambda: imf.memmap_loader(memmap, "train", batch_size)
    return configs


# %% [markdown] slideshow={"slide_type": "subslide"}
# How each pipeline is measured: images/s and the first batch's wait by the clock; CPU seconds as the user and
# system time of this process and its live children (the workers); memory as the PSS of all of them, which splits
# each shared page among the processes that map it, so that a forked worker's shared pages are not counted twice.

# %% slideshow={"slide_type": "subslide"}
def tree_cpu_s():
    """Return the user + system CPU seconds of this process (with the children it reaped) and its live children."""
    procs, total = [psutil.Process()] + psutil.Process().children(recursive=True), 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + (t.children_user + t.children_system if p is procs[0] else 0.0)
        except psutil.Error:
            pass  # a worker that ended meanwhile
    return total


def tree_pss_mb():
    """Return the summed PSS of this process and all its children, multiprocessing's forkserver included (MiB)."""
    return measure.pss_mb(with_helpers=True)["total"]


# %% [markdown] slideshow={"slide_type": "subslide"}
# A pipeline's row: one warm-up epoch, then `epochs` timed ones. `added_pss_mb` is its PSS less the process
# tree's just before the loader was made: what loading cost beyond what the process already held. Before the next
# pipeline starts, the loader is dropped and its processes are waited for, so that the next baseline is clean.

# %% slideshow={"slide_type": "-"}
def timed_epoch(loader):
    """Run one epoch of `loader`; return its images/s, CPU seconds per image, PSS (MB) and first batch's wait."""
    images, batches, cpu0, pss = 0, iter(loader), tree_cpu_s(), None
    with measure.Timer() as t:
        with measure.Timer() as first:
            images += len(next(batches)[0])
        for k, (x, _) in enumerate(batches):
            images += len(x)
            if k == 2:  # a few batches in, every worker and thread is busy
                pss = tree_pss_mb()
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # a batch decoded on the GPU is done when its work has run
    return {"img_per_s": images / t.seconds, "cpu_s_per_img": (tree_cpu_s() - cpu0) / images,
            "pss_mb": pss if pss is not None else tree_pss_mb(), "first_batch_s": first.seconds}


# %% slideshow={"slide_type": "subslide"}
def reap(before, timeout=5.0):
    """Collect the loader just dropped and wait for the processes it started (those not in `before`)."""
    gc.collect()
    psutil.wait_procs([p for p in psutil.Process().children(recursive=True) if p.pid not in before], timeout=timeout)


def epoch_stats(make, epochs):
    """Run `epochs` timed epochs of the loader `make()` returns, after one warm-up; return the row of the table."""
    before, base = {p.pid for p in psutil.Process().children(recursive=True)}, tree_pss_mb()
    loader = make()
    sum(1 for _ in loader)  # the warm-up epoch: workers start, caches fill
    runs = pd.DataFrame([timed_epoch(loader) for _ in range(epochs)])
    del loader
    reap(before)
    return {"img_per_s": runs["img_per_s"].median(), "cpu_s_per_img": runs["cpu_s_per_img"].median(),
            "pss_mb": runs["pss_mb"].max(), "added_pss_mb": runs["pss_mb"].max() - base,
            "first_batch_s": runs["first_batch_s"].median()}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
configs = configurations(sweep_ds, batch_size, n_threads, n_workers)
rows = [{"pipeline": name, **epoch_stats(make, epochs)}
        for name, make in measure.progress(configs.items(), desc="pipelines")]
table = pd.DataFrame(rows).set_index("pipeline")
table["of_limit"] = table["img_per_s"] / limit
table.round(4)

# %% slideshow={"slide_type": "subslide"}
print("pipelines measured:", len(rows))
print("columns:", list(table.columns))
assert [n for n in configs if n.startswith("DataLoader")] == [f"DataLoader, {w} workers (fork)"
                                                               for w in range(n_workers + 1)]
assert all(f"{n_threads} threads" in n or f"{n_workers} processes" in n for n in configs
           if n.startswith(("SPDL", "torchdata", "ThreadLoader"))), "the defaults reach every pipeline"


# %% slideshow={"slide_type": "subslide"}
def best_dataloader(rows):
    """Return the name of the DataLoader configuration with the most images/s in the sweep's `rows`."""
    return max((r for r in rows if r["pipeline"].startswith("DataLoader")), key=lambda r: r["img_per_s"])["pipeline"]


def thread_name(names):
    """Return the ThreadLoader's name among pipeline `names`."""
    return next(n for n in names if n.startswith("ThreadLoader"))


def thread_row(rows):
    """Return the ThreadLoader's row of the sweep's `rows`."""
    return next(r for r in rows if r["pipeline"] == thread_name(r["pipeline"] for r in rows))


# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
dl_best, tl_name = best_dataloader(rows), thread_name(table.index)
print(f"best DataLoader: {dl_best}")
print(f"PSS: ThreadLoader {table.loc[tl_name, 'pss_mb']:.0f} MB, best DataLoader {table.loc[dl_best, 'pss_mb']:.0f} MB")


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Head to head, in rounds.** Each row of the table ran alone, in its own spell of the machine, with one warm-up
# and `epochs` timed epochs: good enough to pick the best DataLoader configuration, not to compare two loaders
# whose rates are close, because a neighbour that wakes up during one pipeline's epochs moves their ratio.
# `head_to_head` therefore takes the best DataLoader configuration chosen above and times it in rounds
# against the `ThreadLoader`, SPDL's pipeline and the one thread of section 2: each round runs one epoch of each
# loader (and the one thread's images) in a new random order, so a busy spell hits all of them alike. Each ratio
# is then taken per round; its figure is the median over the rounds, with the 95-percent interval of that median
# (from the order statistics: with six rounds it spans the smallest to the largest ratio). `measure.verdict` calls
# a target met or missed only when the whole interval lies on one side of it, and a tie on this machine otherwise.

# %% slideshow={"slide_type": "subslide"}
def head_to_head(configs, dl_name, ds, limit_images, rounds):
    """Time the ThreadLoader, the DataLoader `dl_name`, SPDL's pipeline (if in `configs`) and one thread over
    `limit_images` samples in interleaved rounds, one epoch each; return {name: images/s per round}."""
    names = [thread_name(configs), dl_name, *[n for n in configs if n.startswith("SPDL")]]
    before, indices = {p.pid for p in psutil.Process().children(recursive=True)}, picks(ds, limit_images)
    loaders = {name: configs[name]() for name in names}
    fns = {name: measure.drain(loader) for name, loader in loaders.items()} | {ONE_THREAD: partial(fetch, ds, indices)}
    seconds = measure.interleaved(fns, repeat=rounds, warmup=1, shuffle=True)
    del fns, loaders
    reap(before)  # stop the DataLoader's persistent workers before anything else is measured
    images = {name: len(ds) for name in names} | {ONE_THREAD: len(indices)}
    return {name: [images[name] / s for s in values] for name, values in seconds.items()}


# %% slideshow={"slide_type": "subslide"}
def round_ratios(rates, cores):
    """Return the per-round ratios the targets check: the ThreadLoader over the best DataLoader, over SPDL (if
    timed), over the limit (the same round's one thread times `cores`) and over one thread (its speed-up)."""
    tl, dl = thread_name(rates), next(n for n in rates if n.startswith("DataLoader"))
    out = {"helpers_threads_over_dataloader_best": measure.ratios(rates, tl, dl),
           "helpers_threads_over_limit": [t / (o * cores) for t, o in zip(rates[tl], rates[ONE_THREAD])],
           "helpers_threads_speedup": measure.ratios(rates, tl, ONE_THREAD)}
    spdl = next((n for n in rates if n.startswith("SPDL")), None)
    if spdl is not None:
        out["helpers_threads_over_spdl"] = measure.ratios(rates, tl, spdl)
    return out


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
rates = head_to_head(configs, dl_best, sweep_ds, limit_images, rounds)
ratios = round_ratios(rates, cores)
print(pd.DataFrame(rates).median().rename("median img/s over the rounds").round(1).to_string())
targets = {t.figure: t for t in claims.TARGETS if t.benchmark == "bench-threads"}  # the registry's thresholds
for key in sorted(targets.keys() & ratios.keys()):
    per_round = ratios[key]
    low, high = measure.median_interval(per_round)
    print(f"{key}: {measure.verdict(per_round, targets[key].at_least)}; "
          f"half-width {50 * (high - low) / measure.median(per_round):.0f} % of the median")
_ = measure.predicted("ThreadLoader / best DataLoader (img/s, per round)", 0.8, 1.25,
                      ratios["helpers_threads_over_dataloader_best"], "x")  # judged by the rounds' interval
_ = measure.predicted("ThreadLoader / limit (per round)", 0.8, 1.0, ratios["helpers_threads_over_limit"], "x")
print("ratios taken per round:", sorted(ratios))  # helpers_threads_over_spdl where SPDL ran

# %% slideshow={"slide_type": "subslide"}
assert len({len(r) for r in rates.values()}) == 1  # every contender ran once in every round
assert ratios["helpers_threads_over_dataloader_best"] == [t / d for t, d in zip(rates[tl_name], rates[dl_best])]
print("every contender ran once in every round; each ratio is taken per round, from the same round's two rates")

# %% [markdown] slideshow={"slide_type": "-"}
# **Section 1's prediction against the measurement.** The `ThreadLoader`'s speed-up is its rate over the one
# thread's, per round. Section 1 predicted it from 2 threads and 2 processes: 1 / (s + (1 - s) / C) on this
# machine's C cores, and the best DataLoader ahead of it once C > 1 + o / s. On 2 cores the prediction and the
# measurement use the same number of cores, so agreement checks the method, not the extrapolation; the table
# after it is that check, from machines with more cores.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
speedup = ratios["helpers_threads_speedup"]  # ThreadLoader over one thread, per round
_ = measure.predicted(f"ThreadLoader's speed-up on {cores} cores (Amdahl, section 1's s)",
                      gil["threads_predicted_speedup_ci_low"], gil["threads_predicted_speedup_ci_high"], speedup, "x")
crossover = gil["processes_overtake_cores"]
dl_verdict = measure.verdict(ratios["helpers_threads_over_dataloader_best"], 1.0)
print(f"predicted: processes {'ahead of' if cores > crossover else 'not ahead of'} threads on {cores} cores "
      f"(crossover {crossover:.3g} cores, 95 % interval {gil['processes_overtake_cores_ci_low']:.3g} to "
      f"{gil['processes_overtake_cores_ci_high']:.3g}); measured: ThreadLoader / best DataLoader {dl_verdict}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Measured elsewhere.** The same benchmark (`bench threads`) ran on machines with more cores; each folder under
# `reports/runs/` is one such run, committed with its hardware line. These are references, not this machine. Where a
# run also measured s with n = 2, 4, 8 and 16 threads against as many processes, its log is printed first: if s
# grows with n, the GIL costs more than a fixed share of each sample (threads queue for it, and every hand-over
# costs time), and a share measured with 2 threads predicts too much for many cores. A run without `gil_share`
# predates section 1's measurement.

# %% slideshow={"slide_type": "subslide"}
REFERENCE = ("helpers_threads_over_dataloader_best", "helpers_threads_over_limit", "helpers_threads_speedup",
             "gil_share", "threads_predicted_speedup", "processes_overtake_cores")  # the figures compared


def with_interval(figs, key):
    """Return figure `key` of `figs` as "median (low to high)", "" if absent."""
    if key not in figs:
        return ""
    low, high = figs.get(key + LOW), figs.get(key + HIGH)
    return f"{figs[key]:.3g}" + ("" if low is None else f" ({low:.3g} to {high:.3g})")


def reference_runs(folder):
    """Return one row per run saved as `folder/<run>/bench-threads.json`: hardware, cores, `REFERENCE`'s figures."""
    rows = []
    for path in sorted(folder.glob("*/bench-threads.json")):
        doc = json.loads(path.read_text())
        figs, prov = doc["figures"], doc["provenance"]
        row = {"run": path.parent.name, "hardware": prov["hardware"].split(" | ")[0], "cores": prov["knobs"]["cores"]}
        rows.append(row | {key: with_interval(figs, key) for key in REFERENCE})
    return pd.DataFrame(rows, columns=["run", "hardware", "cores", *REFERENCE]).set_index("run")


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
runs = config.project_root() / "reports" / "runs"
for log in sorted(runs.glob("*/gil_n.log")):  # s measured with n threads against n processes, where a run kept it
    print(f"{log.parent.name}:\n{log.read_text()}")
reference_runs(runs).T  # one column per run


# %% [markdown] slideshow={"slide_type": "subslide"}
# A tie against the best DataLoader is an honest result on a machine with few cores: both loaders are capped by
# the same decode work, so their rates can differ by less than what a shared machine moves from round to round.
# What would break such a tie is more cores (the DataLoader pays pickling and a process per worker, the threads
# pay the GIL-holding share of each sample, and the two costs grow differently with the worker count) or a
# decoder that holds the GIL less; more rounds only narrow the interval around the same median. The half-width
# printed above is what this scale's `rounds` afford.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Totals against what loading adds.** Call B the PSS of the process before a loader starts, t what the
# thread loader adds to it and d what the best DataLoader adds (the `added_pss_mb` column). The totals are
# B + t and B + d, so their ratio falls to 0.5 only when d >= B + 2t: the workers would have to add more than
# the whole process again. Forked workers share the parent's pages and add only the pages they write, so on a
# few cores the totals stay close whatever each loader adds. With many workers per GPU,
# or under forkserver and spawn (section 4), d grows with every worker, and so does the gap between the totals:
# that is the regime of SPDL's memory figure.

# %% slideshow={"slide_type": "subslide"}
def memory_split(rows):
    """Split the PSS of the ThreadLoader and the best DataLoader into the process before them, B, and what each
    adds, t and d; with the d at which the totals' ratio (B + t) / (B + d) would reach 0.5."""
    dl, tl = next(r for r in rows if r["pipeline"] == best_dataloader(rows)), thread_row(rows)
    base, t, d = tl["pss_mb"] - tl["added_pss_mb"], tl["added_pss_mb"], dl["added_pss_mb"]
    return {"pss_baseline_mb": base, "threadloader_added_pss_mb": t, "dataloader_best_added_pss_mb": d,
            "helpers_threads_added_pss_over_dataloader_best": t / d,
            "dataloader_added_pss_for_half_total_mb": base + 2 * t}


check = memory_split([
    {"pipeline": "DataLoader, 2 workers (fork)", "img_per_s": 1.0, "pss_mb": 600.0, "added_pss_mb": 200.0},
    {"pipeline": "ThreadLoader, 4 threads", "img_per_s": 2.0, "pss_mb": 450.0, "added_pss_mb": 40.0}])
assert check == {"pss_baseline_mb": 410.0, "threadloader_added_pss_mb": 40.0, "dataloader_best_added_pss_mb": 200.0,
                 "helpers_threads_added_pss_over_dataloader_best": 0.2, "dataloader_added_pss_for_half_total_mb": 490.0}

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
mem = memory_split(rows)
print(f"process before a loader, B: {mem['pss_baseline_mb']:.0f} MB")
print(f"added by ThreadLoader, t: {mem['threadloader_added_pss_mb']:.0f} MB; "
      f"by the best DataLoader, d: {mem['dataloader_best_added_pss_mb']:.0f} MB")
print(f"added memory, ThreadLoader over best DataLoader: {mem['helpers_threads_added_pss_over_dataloader_best']:.2f}x")
print(f"totals at 0.5x would need d >= B + 2t = {mem['dataloader_added_pss_for_half_total_mb']:.0f} MB")


# %% [markdown] slideshow={"slide_type": "subslide"}
# The ratio to the limit can also land above one: the limit is one thread's rate on a sample of the folder's
# images, so the spread of image sizes and a shared core's clock between turns move it either way by several
# per cent; a ratio just above one says the thread loader reached the limit, not that it beat physics.
# Where the thread loader misses the limit from below, the usual cause is the GIL-holding share of each sample: opening the
# file, building the PIL image object, `np.array`, `torch.from_numpy` and the collate all run Python, and with
# more threads than cores they queue for the GIL. SPDL's pipeline adds an asyncio event loop that hands every
# item from stage to stage, which costs Python time per image; torchdata.nodes adds its own queues and a
# thread per stage. The DataLoader's memory grows with the workers because each forked process touches (and so
# copies) pages of the parent's heap, and the PSS splits shared pages fairly among the processes that map them.
# The memmap row (notebook 09) decodes nothing at all: it is the scale against which every decode-per-epoch
# pipeline is measured.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Start-up: fork, forkserver, spawn
#
# **Prediction:** `fork` copies the page tables of the parent, a few ms per worker. `forkserver` and `spawn`
# start a fresh interpreter per worker that imports torch (1 to 2 s of imports on a fast core, more on a shared
# one) and unpickles the dataset, so their first batch comes at least 10x later than fork's. The dataset here is
# small when pickled (a list of file paths), so pickling is not the cost; a dataset holding arrays would add its
# pickled size divided by the pipe's bandwidth per worker.
#
# What is timed for each start method is the cell below: build the DataLoader, which starts its workers, and
# take its first batch; the iterator comes back with its workers alive, so that their memory can be read.

# %% slideshow={"slide_type": "subslide"}
def start_workers(ds, batch_size, workers, method):
    """Start a `workers`-worker DataLoader under start `method`, take its first batch, return the running iterator."""
    batches = iter(DataLoader(ds, batch_size, num_workers=workers, multiprocessing_context=method))
    next(batches)  # the workers start here: a fresh process each, then one batch of decodes
    return batches


# %% slideshow={"slide_type": "-"}
def startup(ds, batch_size, workers, methods=("fork", "forkserver", "spawn")):
    """Return, per start method, the seconds `start_workers` takes and the PSS of this process and its workers
    just after, with the dataset's pickled size (what forkserver and spawn send to every worker)."""
    size, rows = len(pickle.dumps(ds)), []
    for m in methods:
        with measure.Timer() as t:
            batches = start_workers(ds, batch_size, workers, m)
        rows.append({"start_method": m, "workers": workers, "first_batch_s": t.seconds, "pickled_bytes": size,
                     "pss_mb": tree_pss_mb()})
        del batches
    return rows


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
start_rows = startup(ds, batch_size, n_workers)
assert [r["start_method"] for r in start_rows] == ["fork", "forkserver", "spawn"]
starts = pd.DataFrame(start_rows).set_index("start_method")
print(starts.round(3).to_string())
slow = min(starts.loc["forkserver", "first_batch_s"], starts.loc["spawn", "first_batch_s"])
_ = measure.predicted("forkserver or spawn's first batch over fork's", 10, float("inf"),
                  slow / starts.loc["fork", "first_batch_s"], "x")


# %% [markdown] slideshow={"slide_type": "subslide"}
# The gap is the imports of a fresh interpreter in every worker, paid again at every epoch unless
# `persistent_workers=True`. Python 3.14 made `forkserver` the default start method on Linux, so a DataLoader
# that does not pass `multiprocessing_context="fork"` pays the forkserver row from 3.14 on, and its dataset
# must pickle. A thread loader pays neither: its first batch waits only for one batch of decodes.
#
# The `pss_mb` column is the memory of all the processes while these workers run. A forked worker shares the
# parent's pages until it writes to them, and PSS splits a shared page among the processes that map it, so under
# fork the total barely exceeds the parent's. A forkserver or spawn worker is a fresh interpreter that imports
# torch itself: its pages are its own, and each worker adds them in full. That is where the per-worker memory
# that users report comes from, and why the thread loader's advantage in memory depends on the start method;
# the takeaway prints the thread loader's PSS against each.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. The timeline: threads against workers
#
# **Prediction:** with a step that sleeps (a stand-in for a GPU step that leaves the CPU free), both loaders keep
# every core decoding; the DataLoader's lanes show one batch per worker at a time, the thread loader's lanes
# one image per thread at a time, several threads' fetches overlapping.

# %% [markdown] slideshow={"slide_type": "-"}
# The DataLoader's timeline comes from notebook 07's instrumented dataset and collate. The thread loader needs its
# own wrapper: it records each sample's fetch with the name of the thread that ran it, and hands the batch's
# events over in the collate, which runs on the main thread.

# %% slideshow={"slide_type": "subslide"}
class TimedSamples:
    """Wrap a dataset so each sample's fetch is recorded with the name of the thread that ran it."""

    def __init__(self, ds):
        self.ds, self.lock, self.events = ds, threading.Lock(), []  # events: (lane, stage, start, end)

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, index):
        start = measure.now()
        x = self.ds[index]
        with self.lock:
            lane = threading.current_thread().name.replace("ThreadLoader_", "thread ")
            self.events.append((lane, "fetch", start, measure.now()))
        return x

    def collate(self, samples):
        start = measure.now()
        data = torch.utils.data.default_collate(samples)
        with self.lock:
            events, self.events = self.events, []
        return timeline.TimedBatch(data, events + [("main: collate", "collate", start, measure.now())])


# %% slideshow={"slide_type": "subslide"}
def timelines(ds, batch_size, threads, workers, step_s, batches):
    """Record `batches` batches of a `threads`-thread ThreadLoader and of a `workers`-worker DataLoader, each batch
    followed by a step that sleeps `step_s` seconds."""
    timed, step = TimedSamples(ds), timeline.gpu_like_step(step_s)
    thread_loader = ThreadLoader(timed, batch_size, threads=threads, collate=timed.collate)
    tds, tc = timeline.instrument(ds)
    return {f"ThreadLoader, {threads} threads": timeline.record(thread_loader, step, max_batches=batches),
            f"DataLoader, {workers} workers": timeline.record(
                DataLoader(tds, batch_size, num_workers=workers, collate_fn=tc), step, max_batches=batches)}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
tls = timelines(ds, batch_size, n_threads, n_workers, step_ms / 1000,
                batches=min(timeline_batches, len(ds) // batch_size))
for name, tl in tls.items():
    fig = timeline.gantt(tl, title=name)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for name, tl in tls.items():
    print(f"{name}: {timeline.parallelism(tl, ('fetch',)):.2f} fetches running at once on average")

# %% [markdown] slideshow={"slide_type": "-"}
# The thread loader's fetches are per image, so its lanes are finer; their overlap is the parallelism that the
# GIL allows. The DataLoader's lanes are per batch, and a worker that finishes waits for the main process to
# take its batch.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. What free-threaded Python would change
#
# **Prediction:** on a free-threaded build (3.13t, 3.14t) the GIL-holding share of each sample runs in parallel
# too. If that share is s of a sample's time on one thread, Amdahl's law caps the GIL build's thread speedup
# at 1 / s; with s about 0.1 the cap is 10x, above this machine's cores if it has few. There the GIL is not what
# holds the thread loader back, and free threading can gain only what separates it from the cores' limit (one
# thread's rate x the cores), less the build's own slowdown; the last cells of this section print that gain. It
# matters most for transforms written in
# Python (a per-pixel augmentation, a tokenizer in pure Python): those hold the GIL for their whole run, and
# free threading would let them scale with the cores like processes do, without pickling or per-worker memory.
# The cost is the free-threaded build's single-thread slowdown (quoted below with its source) and the need for
# C extensions built for it. No free-threaded interpreter is installed here, so this section cannot measure it:
# the cell below prints the GIL-held share that section 1 measured, and the cells after it quote published
# figures and turn them into a prediction for this machine.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
cap = f"{1 / share:.3g}x" if share > 0 else "none measurable (the share is not above zero here)"
print(f"GIL-held share of a sample (section 1): {share:.2f}; Amdahl's cap on the GIL build: {cap}; cores: {cores}")

# %% [markdown] slideshow={"slide_type": "-"}
# Where the cores are fewer than 1 / s, the cap does not bind and the GIL's own cost is small; where they are
# more, the cap is what the threads are missing. Which case this machine is, the two numbers above say.

# %% [markdown] slideshow={"slide_type": "-"}
# What others measured where free-threaded builds exist, and what that predicts for this run: with no GIL every
# stage of the thread loader runs in parallel, so it should approach the cores' limit, less the build's
# single-thread penalty. The prediction misses where the main thread's collate and loop become the bottleneck,
# where a decoder serialises its calls with its own lock, or where an extension without free-threaded support
# switches the GIL back on at import.

# %% slideshow={"slide_type": "subslide"}
for name in ("ft_single_thread_penalty_pct", "ft_thread_workers_disk", "ft_thread_workers_memory"):
    claims.check(name)

# %% [markdown] slideshow={"slide_type": "-"}
# The prediction in code: the cores' limit less the free-threaded build's single-thread penalty, against the
# thread loader's rate measured here with the GIL. Both come from the head-to-head's rounds (the limit is one
# thread's rate there x the cores), so a busy spell moves them alike; section 2's limit came from other rounds.

# %% slideshow={"slide_type": "-"}
FREE_THREADED_PENALTY = (0.05, 0.10)  # 3.14t's single-thread slowdown (claims: ft_single_thread_penalty_pct)


def free_threaded_prediction(limit, measured):
    """Predict the thread loader on a free-threaded build: every stage parallel, so the limit less the penalty."""
    least, most = sorted(FREE_THREADED_PENALTY)
    low, high = limit * (1 - most), limit * (1 - least)
    return {"low_img_per_s": low, "high_img_per_s": high, "gain_low": low / measured, "gain_high": high / measured}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
measured = measure.median(rates[tl_name])
limit_here = measure.median(rates[ONE_THREAD]) * cores  # the head-to-head's own limit, from the same rounds
ft = free_threaded_prediction(limit_here, measured)
lo, hi = sorted(FREE_THREADED_PENALTY)
print(f"predicted ThreadLoader on a free-threaded build: {ft['low_img_per_s']:.0f} to {ft['high_img_per_s']:.0f} img/s "
      f"(the limit, {limit_here:.0f} img/s, less {lo:.0%} to {hi:.0%}): {ft['gain_low']:.2f}x to {ft['gain_high']:.2f}x "
      f"the {measured:.0f} img/s measured here with the GIL; not measurable here (no free-threaded interpreter)")
assert ft["low_img_per_s"] <= ft["high_img_per_s"] < limit_here, "the penalty lowers the limit"


# %% [markdown] slideshow={"slide_type": "-"}
# The figures of this run in one flat dict, which `measure.save_results` writes below and the `bench threads`
# command reads: rates and ratios from the head-to-head rounds (each ratio the median of its per-round values,
# with its 95-percent interval), memory and CPU from the sweep's rows, where each pipeline ran alone.

# %% slideshow={"slide_type": "subslide"}
def run_figures(rows, rates, starts, gil, cores):
    """Return the flat figures the targets check, with `gil` (from `gil_prediction`) among them."""
    dl, tl = next(r for r in rows if r["pipeline"] == best_dataloader(rows)), thread_row(rows)
    out = {"limit_img_per_s": measure.median(rates[ONE_THREAD]) * cores,
           "threadloader_img_per_s": measure.median(rates[thread_name(rates)]),
           "dataloader_best_img_per_s": measure.median(rates[dl["pipeline"]]),
           "helpers_threads_pss_over_dataloader_best": tl["pss_mb"] / dl["pss_mb"],
           "helpers_threads_cpu_over_dataloader_best": tl["cpu_s_per_img"] / dl["cpu_s_per_img"],
           "pickled_dataset_bytes": starts[0]["pickled_bytes"], **memory_split(rows)}
    for key, per_round in round_ratios(rates, cores).items():
        out |= measure.interval_figures(key, per_round)
    for s in starts:
        out[f"first_batch_s_{s['start_method']}"] = s["first_batch_s"]
        out[f"helpers_threads_pss_over_dataloader_{s['start_method']}"] = tl["pss_mb"] / s["pss_mb"]
    return out | gil


# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# For decode-every-epoch loading with decoders that release the GIL, a thread pool in the training process is a
# real alternative to worker processes: no start-up, no pickling, no per-worker memory, and the throughput is
# capped by the same cores. The figures of this run:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
figures = run_figures(rows, rates, start_rows, gil, cores)
for key in ratios:
    print(f"{key}: {figures[key]:.3g} (95 % interval {figures[key + '_ci_low']:.3g} to "
          f"{figures[key + '_ci_high']:.3g} over {len(ratios[key])} rounds)")
for key in ("gil_share", "threads_cap_speedup", "threads_predicted_speedup", "processes_overtake_cores",
            "limit_img_per_s", "threadloader_img_per_s", "dataloader_best_img_per_s",
            "helpers_threads_pss_over_dataloader_best", "helpers_threads_added_pss_over_dataloader_best",
            "helpers_threads_pss_over_dataloader_forkserver",
            "helpers_threads_pss_over_dataloader_spawn", "helpers_threads_cpu_over_dataloader_best"):
    if key in figures:
        print(f"{key}: {figures[key]:.3g}")
path = measure.save_results("14_threads_or_processes", figures, rows, knobs={
    "images": len(ds), "cores": cores, "batch_size": batch_size, "epochs": epochs, "threads": n_threads,
    "workers": n_workers, "limit_images": limit_images, "rounds": rounds, "gil_images": gil_images,
    "step_ms": step_ms, "timeline_batches": timeline_batches, "gil_n": gil_n, "skipped": skipped}, repeats=rounds)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# SPDL's paper reports its figures on ImageNet with many cores and FFmpeg-based decoders; they are published, not
# measurable here (SPDL's own decoders need FFmpeg 6+, Debian 12 ships 5.1, so its pipeline ran the same Pillow
# function as every other row). The lines below print the registry's verdicts, then the `bench threads` targets
# (`claims.TARGETS`, set for a quiet machine) judged on this run's figures: a ratio by its 95-percent interval, the
# memory ratio against its plain threshold.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for name in ("spdl_imagenet_faster_pct", "spdl_cpu_saving_pct", "spdl_memory_saving_gb"):
    claims.check(name, None, why="published on ImageNet with many cores")
for target in targets.values():
    value = claims.value_of(figures, target.figure)
    label = claims.how_measured(claims.saved_interval(figures, target.figure))  # its interval, or "single run"
    shown = "not measured" if value is None else f"{value:.3g} ({label})"
    print(f"[target] {target.figure}: {shown}, needs {target.needed()}: {target.verdict(figures)}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each one runs at this notebook's scale, on the data and the knobs of this run. The solutions time their
# loaders in turns (`measure.interleaved`), so a busy spell of the machine hits every contender alike.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Give the `ThreadLoader` as many threads as cores (`threads=cores`) instead of `n_threads`, and time
# epochs of both in turns. Does overlapping file reads with decodes matter on this machine? Look at the
# images/s, and ask where these files are read from. Whatever the thread count, the batches must be the same
# ones, in the same order.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex1_rates(thread_counts, rounds=3):
    """Return {threads: images/s} of ThreadLoader epochs over `ds`, timed in turns."""
    loaders = {k: ThreadLoader(ds, batch_size, threads=k) for k in thread_counts}
    t = measure.interleaved({str(k): measure.drain(tl) for k, tl in loaders.items()}, repeat=rounds, warmup=1)
    return {k: len(ds) / measure.median(t[str(k)]) for k in thread_counts}


ex1 = ex1_rates((cores, n_threads))
for ex1_k, ex1_rate in ex1.items():
    print(f"{ex1_k} threads: {ex1_rate:.0f} img/s")
print(f"{n_threads} threads over {cores}: {ex1[n_threads] / ex1[cores]:.2f}x")
ex1_labels = [[y.tolist() for _, y in ThreadLoader(ds, batch_size, threads=k)] for k in (cores, n_threads)]
assert ex1_labels[0] == ex1_labels[1], "the thread count changed the batches"
# more threads can gain at most their own ratio, whatever they overlap (a quarter's room for the noise)
assert ex1[n_threads] / ex1[cores] <= 1.25 * max(1, n_threads / cores), ex1

# %% [markdown] slideshow={"slide_type": "subslide"}
# **2.** Swap Pillow's decoder for simplejpeg (`find_decoders`, the decoders' registry) without touching the
# package: the `ImageFolder` takes a `loader=` that turns a path into an RGB PIL image. Time the `ThreadLoader`
# and the DataLoader with `n_workers` workers on both decoders, in interleaved rounds, and compare the two
# loaders' gains by their interval. Which loader gains more from the faster decoder on this machine, or is it a
# tie? Before you time it, predict which loader should gain more, and why. Check too that simplejpeg really
# decoded the files (count its decodes) and that it gives Pillow's pixels.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
from collections import Counter

from PIL import Image

from fastloops_helpers.data.decoders import find_decoders
from fastloops_helpers.data.jpeg_folder import ImageFolder, pil_loader

ex2_decode = find_decoders()[0].get("simplejpeg")
ex2_used = Counter()  # decodes per decoder in this process (the DataLoader's workers count in their own copy)


def ex2_simplejpeg_loader(path):
    """Decode a JPEG with simplejpeg; anything else (PNG, CMYK) with Pillow, as the default loader does."""
    try:
        with open(path, "rb") as f:
            image = Image.fromarray(ex2_decode(f.read()))
        ex2_used["simplejpeg"] += 1
    except Exception:
        image = pil_loader(path)
        ex2_used["Pillow"] += 1
    return image


def ex2_times(datasets, rounds=6):
    """Return {"decoder loader": seconds per epoch} of a ThreadLoader and a DataLoader per dataset, interleaved."""
    loaders = {}
    for name, d in datasets.items():
        loaders[f"{name} ThreadLoader"] = ThreadLoader(d, batch_size, threads=n_threads)
        loaders[f"{name} DataLoader"] = torch.utils.data.DataLoader(d, batch_size, num_workers=n_workers,
                                                                    persistent_workers=True)
    return measure.interleaved({k: measure.drain(v) for k, v in loaders.items()}, repeat=rounds, warmup=1,
                               shuffle=True)


if ex2_decode is not None:
    ex2_sets = {"Pillow": ds,
                "simplejpeg": ImageFolder(ds.root, transform=ds.transform, loader=ex2_simplejpeg_loader)}
    ex2 = ex2_times(ex2_sets)
    ex2_gain = {k: measure.ratios(ex2, f"Pillow {k}", f"simplejpeg {k}") for k in ("ThreadLoader", "DataLoader")}
    for ex2_loader, ex2_r in ex2_gain.items():  # a round's gain: its Pillow epoch over its simplejpeg epoch
        ex2_low, ex2_high = measure.median_interval(ex2_r)
        print(f"{ex2_loader}: simplejpeg {measure.median(ex2_r):.2f}x Pillow's images/s "
              f"(95 % interval {ex2_low:.2f} to {ex2_high:.2f}, {len(ex2_r)} rounds)")
    ex2_more = [t / d for t, d in zip(ex2_gain["ThreadLoader"], ex2_gain["DataLoader"])]  # per round
    ex2_verdict = measure.verdict(ex2_more, 1.0)
    ex2_word = {"met": "the ThreadLoader gains more", "missed": "the DataLoader gains more"}.get(
        ex2_verdict.word, "neither loader gains more, by this interval")
    print(f"ThreadLoader's gain over the DataLoader's: {ex2_verdict}: {ex2_word}")
    ex2_used.clear()
    ex2_checked = range(0, len(ds), 4)
    ex2_same = all(torch.equal(ds[i][0], ex2_sets["simplejpeg"][i][0]) for i in ex2_checked)
    print(f"simplejpeg decoded {ex2_used['simplejpeg']} of {len(ex2_checked)} files checked here "
          f"(Pillow the other {ex2_used['Pillow']}); same pixels from both decoders: {ex2_same}")
    assert ex2_used["simplejpeg"] > len(ex2_checked) / 2, "simplejpeg fell back to Pillow: the pixels compared Pillow"
    assert ex2_same, "simplejpeg and Pillow decoded different pixels"
else:
    print("skipped: simplejpeg is not installed here (pip install simplejpeg)")

# %% [markdown] slideshow={"slide_type": "-"}
# **3.** Add a pure-Python augmentation to the sample function: a loop that inverts the first tens of thousands
# of pixel values of each image, one value at a time. Predict from section 6's GIL-holding share how the
# `ThreadLoader` and the DataLoader change, then time both with and without it. Look at the ratio ThreadLoader /
# DataLoader. A wrapper class defined in a cell is fine here: threads never pickle it, and the DataLoader's
# workers are forked (under forkserver or spawn it would have to live in a module).

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
class Ex3PythonAugment(torch.utils.data.Dataset):
    """Wrap a dataset; invert the first `values` values of each image in a Python loop (it holds the GIL)."""

    def __init__(self, ds, values):
        self.ds, self.values = ds, values

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, index):
        x, y = self.ds[index]
        flat = x.contiguous().view(-1)
        out = []
        for v in flat[:self.values].tolist():
            out.append(255 - v)
        flat[:self.values] = torch.tensor(out, dtype=torch.uint8)
        return flat.view(x.shape), y


def ex3_rates(datasets, rounds=3):
    """Return {(dataset, loader): images/s} of a ThreadLoader and a DataLoader per dataset, timed in turns."""
    loaders = {}
    for name, d in datasets.items():
        loaders[name, "ThreadLoader"] = ThreadLoader(d, batch_size, threads=n_threads)
        loaders[name, "DataLoader"] = torch.utils.data.DataLoader(d, batch_size, num_workers=n_workers,
                                                                  persistent_workers=True)
    t = measure.interleaved({" ".join(k): measure.drain(v) for k, v in loaders.items()}, repeat=rounds, warmup=1)
    return {k: len(ds) / measure.median(t[" ".join(k)]) for k in loaders}


ex3_aug = Ex3PythonAugment(ds, 20_000)
print(f"section 6's GIL-holding share: {share:.2f}; the loop's share is close to 1")
ex3 = ex3_rates({"plain": ds, "Python augmentation": ex3_aug})
for ex3_name in ("plain", "Python augmentation"):
    ex3_tl, ex3_dl = ex3[ex3_name, "ThreadLoader"], ex3[ex3_name, "DataLoader"]
    print(f"{ex3_name}: ThreadLoader {ex3_tl:.0f} img/s, DataLoader ({n_workers} workers) {ex3_dl:.0f} img/s, "
          f"ratio {ex3_tl / ex3_dl:.2f}")
ex3_x, ex3_y = ex3_aug[3]
assert ex3_y == ds[3][1] and torch.equal(ex3_x.flatten()[:20_000], 255 - ds[3][0].flatten()[:20_000])
# the augmentation is work added to every image: whichever loader runs it, it loads fewer images per second
assert all(ex3["Python augmentation", k] < ex3["plain", k] for k in ("ThreadLoader", "DataLoader")), ex3

# %% [markdown] slideshow={"slide_type": "subslide"}
# **4.** The set-up cell gave torch one intra-op thread, as the DataLoader does in each of its workers. Give it
# `cores` threads again and time the `ThreadLoader` in turns with one and with `cores` intra-op threads. What
# changes, and why? Look at the images/s, and count the threads that could be running torch ops at once. The
# solution restores one thread when it is done.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex4_rates(intra_op_counts, rounds=3):
    """Return {intra-op threads: images/s} of one ThreadLoader over `ds`, the thread counts timed in turns."""
    epoch = measure.drain(ThreadLoader(ds, batch_size, threads=n_threads))

    def with_threads(n):
        def one_epoch():
            torch.set_num_threads(n)
            return epoch()
        return one_epoch

    with measure.torch_threads(None):  # each epoch sets its count; the count before is restored after
        t = measure.interleaved({str(n): with_threads(n) for n in intra_op_counts}, repeat=rounds, warmup=1)
    return {n: len(ds) / measure.median(t[str(n)]) for n in intra_op_counts}


ex4 = ex4_rates((1, cores))
for ex4_n, ex4_rate in ex4.items():
    print(f"ThreadLoader ({n_threads} threads), torch with {ex4_n} intra-op threads: {ex4_rate:.0f} img/s")
print(f"{cores} intra-op threads over 1: {ex4[cores] / ex4[1]:.2f}x")
assert torch.get_num_threads() == 1, "the solution left torch's thread count changed"
# `cores` intra-op threads can make the torch ops at most `cores` x faster (a quarter's room for the noise)
assert ex4[cores] / ex4[1] <= 1.25 * cores, ex4
