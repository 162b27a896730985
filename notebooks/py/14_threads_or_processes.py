# %% [markdown] slideshow={"slide_type": "slide"}
# # 14 · Threads or processes?
#
# | | |
# |---|---|
# | **Question** | On decode-every-epoch work, do threads in one process load images as fast as DataLoader's worker processes, with less CPU and memory, and how close do they get to what the cores can decode? |
# | **Seeds** | beyond the seeds: SPDL's thread pipelines (arXiv 2504.20067), torchdata.nodes, the helpers' `ThreadLoader` |
# | **GPU** | not needed: everything here is CPU work |
# | **Run time** | <!-- run-time --> workshop ~1.2 min (measured on AMD EPYC, 2 cores, 2026-11-27) |
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
import os
from collections.abc import Iterator
from typing import Any

import pandas as pd
import torch
from torch.utils.data import DataLoader

from fastloops_helpers import ThreadLoader, config, measure
from fastloops_helpers.book import claims
from fastloops_helpers.book.source import show_code
from fastloops_helpers.data.jpeg_folder import pil_loader
from fastloops_helpers.experiments import threads
from fastloops_helpers.measure import timeline

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

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
ds = threads.dataset()                  # the synthetic ImageFolder's train split, decoded at every access
torch.set_num_threads(1)                # as DataLoader does in each worker, for the whole notebook (exercise 4)
skipped = threads.skipped()
for what, why in skipped.items():
    print(f"skipped {what}: {why}")

# %% slideshow={"slide_type": "-"}
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
# `pil_loader`, then `Decode`).

# %% slideshow={"slide_type": "subslide"}
show_code(threads.dataset, threads.Decode, pil_loader)  # what every pipeline runs per sample

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

# %% slideshow={"slide_type": "subslide"}
show_code(threads.gil_rounds, threads.gil_shares, threads.amdahl, threads.crossover_cores)  # timed next

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
gil_rates = threads.gil_rounds(ds, gil_images, rounds)  # images/s per round of each of the four contenders
shares = threads.gil_shares(gil_rates)                   # per round: s and the DataLoader's overhead o
gil = threads.gil_prediction(shares, cores)              # their medians and intervals, and what they predict
print(pd.DataFrame(gil_rates).median().rename("median img/s over the rounds").round(1).to_string())
share = gil["gil_share"]
for key, what in (("gil_share", "GIL-held share of a sample, s"), ("dataloader_overhead", "DataLoader overhead, o"),
                  ("threads_cap_speedup", "thread cap, 1 / s"),
                  ("threads_predicted_speedup", f"threads' speed-up on {cores} cores, 1 / (s + (1 - s) / {cores})"),
                  ("processes_overtake_cores", "cores above which processes beat threads, 1 + o / s")):
    print(f"{what}: {gil[key]:.3g} (95 % interval {gil[key + '_ci_low']:.3g} to {gil[key + '_ci_high']:.3g})")
_ = measure.predicted("GIL-held share of a sample, s", 0, 0.2, shares["gil_share"])

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

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
one_thread = threads.one_thread_rate(ds, limit_images, epochs)  # timed passes, as the sweep times epochs
limit = one_thread * cores
print(f"limit: {one_thread:.0f} img/s per thread x {cores} cores = {limit:.0f} img/s")
_ = measure.predicted("one thread's decode + resize + crop rate", 200, 1000, one_thread, "img/s")

# %% [markdown] slideshow={"slide_type": "subslide"}
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

# %% slideshow={"slide_type": "subslide"}
show_code(threads.configurations, threads.spdl_loader, threads.nodes_loader)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
configs = threads.configurations(ds, batch_size, n_threads, n_workers)
rows = [{"pipeline": name, **threads.epoch_stats(make, epochs)}
        for name, make in measure.progress(configs.items(), desc="pipelines")]
table = pd.DataFrame(rows).set_index("pipeline")
table["of_limit"] = table["img_per_s"] / limit
table.round(4)

# %% slideshow={"slide_type": "subslide"}
print("pipelines measured:", len(rows))
print("columns:", list(table.columns))

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
dl_best, tl_name = threads.best_dataloader(rows), threads.thread_name(table.index)
print(f"best DataLoader: {dl_best}")
print(f"PSS: ThreadLoader {table.loc[tl_name, 'pss_mb']:.0f} MB, best DataLoader {table.loc[dl_best, 'pss_mb']:.0f} MB")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Head to head, in rounds.** Each row of the table ran alone, in its own spell of the machine, with one warm-up
# and `epochs` timed epochs: good enough to pick the best DataLoader configuration, not to compare two loaders
# whose rates are close, because a neighbour that wakes up during one pipeline's epochs moves their ratio.
# `threads.head_to_head` therefore takes the best DataLoader configuration chosen above and times it in rounds
# against the `ThreadLoader`, SPDL's pipeline and the one thread of section 2: each round runs one epoch of each
# loader (and the one thread's images) in a new random order, so a busy spell hits all of them alike. Each ratio
# is then taken per round; its figure is the median over the rounds, with the 95-percent interval of that median
# (from the order statistics: with six rounds it spans the smallest to the largest ratio). `measure.verdict` calls
# a target met or missed only when the whole interval lies on one side of it, and a tie on this machine otherwise.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
rates = threads.head_to_head(configs, dl_best, ds, limit_images, rounds)
ratios = threads.round_ratios(rates, cores)
print(pd.DataFrame(rates).median().rename("median img/s over the rounds").round(1).to_string())
targets = {t.figure: t for t in claims.TARGETS if t.benchmark == "bench-threads"}  # the registry's thresholds
for key in sorted(targets.keys() & ratios.keys()):
    per_round = ratios[key]
    low, high = measure.median_interval(per_round)
    print(f"{key}: {measure.verdict(per_round, targets[key].at_least)}; "
          f"half-width {50 * (high - low) / measure.median(per_round):.0f} % of the median")
_ = measure.predicted("ThreadLoader / best DataLoader (img/s, median of the rounds)", 0.8, 1.25,
                      measure.median(ratios["helpers_threads_over_dataloader_best"]), "x")
_ = measure.predicted("ThreadLoader / limit (median of the rounds)", 0.8, 1.0,
                      measure.median(ratios["helpers_threads_over_limit"]), "x")

# %% slideshow={"slide_type": "subslide"}
print("every contender ran once in every round:", len({len(r) for r in rates.values()}) == 1)
print("ratios taken per round:", sorted(ratios))

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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
runs = config.project_root() / "reports" / "runs"
for log in sorted(runs.glob("*/gil_n.log")):  # s measured with n threads against n processes, where a run kept it
    print(f"{log.parent.name}:\n{log.read_text()}")
threads.reference_runs(runs).T  # one column per run

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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
mem = threads.memory_split(rows)
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
#@save fastloops_helpers.experiments.threads
def start_workers(ds: Any, batch_size: int, workers: int, method: str) -> Iterator[Any]:
    """Start a `workers`-worker DataLoader under start `method` and take its first batch; return the running iterator."""
    batches = iter(DataLoader(ds, batch_size, num_workers=workers, multiprocessing_context=method))
    next(batches)  # the workers start here: a fresh process each, then one batch of decodes
    return batches


# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
start_rows = threads.startup(ds, batch_size, n_workers, start=start_workers)
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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
tls = threads.timelines(ds, batch_size, n_threads, n_workers, step_ms / 1000,
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
# at 1 / s; with s about 0.1 the cap is 10x, above this machine's cores if it has few, and then free threading
# should change the thread loader's rate by under 10 % when the decoder releases the GIL. It matters for transforms written in
# Python (a per-pixel augmentation, a tokenizer in pure Python): those hold the GIL for their whole run, and
# free threading would let them scale with the cores like processes do, without pickling or per-worker memory.
# The cost is the free-threaded build's single-thread slowdown (quoted below with its source) and the need for
# C extensions built for it. No free-threaded interpreter is installed here, so this section cannot measure it:
# the cell below prints the GIL-held share that section 1 measured, and the cells after it quote published
# figures and turn them into a prediction for this machine.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
print(f"GIL-held share of a sample (section 1): {share:.2f}; Amdahl's cap on the GIL build: {1 / max(share, 1e-9):.3g}x")

# %% [markdown] slideshow={"slide_type": "-"}
# On this machine's cores the cap is far off whenever s is small, so free threading would add little here;
# on a machine with more cores than 1 / s it is what the threads are missing.

# %% [markdown] slideshow={"slide_type": "-"}
# What others measured where free-threaded builds exist, and what that predicts for this run: with no GIL every
# stage of the thread loader runs in parallel, so it should approach the limit of section 2, less the build's
# single-thread penalty. The prediction misses where the main thread's collate and loop become the bottleneck,
# where a decoder serialises its calls with its own lock, or where an extension without free-threaded support
# switches the GIL back on at import.

# %% slideshow={"slide_type": "-"}
for name in ("ft_single_thread_penalty_pct", "ft_thread_workers_disk", "ft_thread_workers_memory"):
    claims.check(name)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
measured = measure.median(rates[tl_name])
ft = threads.free_threaded_prediction(limit, measured)
lo, hi = sorted(threads.FREE_THREADED_PENALTY)
print(f"predicted ThreadLoader on a free-threaded build: {ft['low_img_per_s']:.0f} to {ft['high_img_per_s']:.0f} img/s "
      f"(the limit, {limit:.0f} img/s, less {lo:.0%} to {hi:.0%}): {ft['gain_low']:.2f}x to {ft['gain_high']:.2f}x "
      f"the {measured:.0f} img/s measured here with the GIL; not measurable here (no free-threaded interpreter)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# For decode-every-epoch loading with decoders that release the GIL, a thread pool in the training process is a
# real alternative to worker processes: no start-up, no pickling, no per-worker memory, and the throughput is
# capped by the same cores. The figures of this run:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
figures = threads.figures(rows, rates, start_rows, gil, cores)
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
    "step_ms": step_ms, "timeline_batches": timeline_batches, "skipped": skipped}, repeats=rounds)
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
# Each one runs at the smoke scale in seconds, on the data and the knobs of this run. The solutions time their
# loaders in turns (`measure.interleaved`), so a busy spell of the machine hits every contender alike.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Give the `ThreadLoader` as many threads as cores (`threads=cores`) instead of `n_threads`, and time
# epochs of both in turns. Does overlapping file reads with decodes matter on this machine? Look at the
# images/s: threads beyond the cores help only while some thread waits for the disk, and the files of a small
# folder sit in the page cache. Whatever the thread count, the batches must be the same ones, in the same order.

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

# %% [markdown] slideshow={"slide_type": "subslide"}
# **2.** Swap Pillow's decoder for simplejpeg (`find_decoders`, the decoders' registry) without touching the package: the
# `ImageFolder` takes a `loader=` that turns a path into an RGB PIL image. Time the `ThreadLoader` and the
# DataLoader with `n_workers` workers on both decoders. Which loader gains more from the faster decoder, and
# why? Look at each loader's gain: a faster decode shrinks the part of a sample that runs without the GIL, so
# the Python around it (file open, `Image.fromarray`, the transform's calls) weighs more for the threads. Check
# too that the two decoders give the same pixels.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
from PIL import Image

from fastloops_helpers.data.decoders import find_decoders
from fastloops_helpers.data.jpeg_folder import ImageFolder, pil_loader

ex2_decode = find_decoders()[0].get("simplejpeg")


def ex2_simplejpeg_loader(path):
    """Decode a JPEG with simplejpeg; anything else (PNG, CMYK) with Pillow, as the default loader does."""
    try:
        with open(path, "rb") as f:
            return Image.fromarray(ex2_decode(f.read()))
    except Exception:
        return pil_loader(path)


def ex2_rates(datasets, rounds=3):
    """Return {(decoder, loader): images/s} of a ThreadLoader and a DataLoader per dataset, timed in turns."""
    loaders = {}
    for name, d in datasets.items():
        loaders[name, "ThreadLoader"] = ThreadLoader(d, batch_size, threads=n_threads)
        loaders[name, "DataLoader"] = torch.utils.data.DataLoader(d, batch_size, num_workers=n_workers,
                                                                  persistent_workers=True)
    t = measure.interleaved({" ".join(k): measure.drain(v) for k, v in loaders.items()}, repeat=rounds, warmup=1)
    return {k: len(ds) / measure.median(t[" ".join(k)]) for k in loaders}


if ex2_decode is None:
    print("skipped: simplejpeg is not installed here (pip install simplejpeg)")
    ex2_same = True
else:
    ex2_sets = {"Pillow": ds,
                "simplejpeg": ImageFolder(ds.root, transform=ds.transform, loader=ex2_simplejpeg_loader)}
    ex2 = ex2_rates(ex2_sets)
    for ex2_loader in ("ThreadLoader", "DataLoader"):
        ex2_old, ex2_new = ex2["Pillow", ex2_loader], ex2["simplejpeg", ex2_loader]
        print(f"{ex2_loader}: Pillow {ex2_old:.0f} img/s, simplejpeg {ex2_new:.0f} img/s: {ex2_new / ex2_old:.2f}x")
    ex2_same = all(torch.equal(ds[i][0], ex2_sets["simplejpeg"][i][0]) for i in range(0, len(ds), 4))
    print("same pixels from both decoders:", ex2_same)
assert ex2_same, "simplejpeg and Pillow decoded different pixels"

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3.** Add a pure-Python augmentation to the sample function: a loop that inverts the first tens of thousands
# of pixel values of each image, one value at a time. Predict from section 6's GIL-holding share how the
# `ThreadLoader` and the DataLoader change, then time both with and without it. Look at the ratio ThreadLoader /
# DataLoader: the loop holds the GIL, so the threads run it one at a time while each worker process runs its
# own. A wrapper class defined in a cell is fine here: threads never pickle it, and the DataLoader's workers are
# forked (under forkserver or spawn it would have to live in a module).

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

# %% [markdown] slideshow={"slide_type": "subslide"}
# **4.** The set-up cell gave torch one intra-op thread, as the DataLoader does in each of its workers. Give it
# `cores` threads again and time the `ThreadLoader` in turns with one and with `cores` intra-op threads. What
# changes, and why? Look at the images/s: each loader thread that calls a torch op (the transform's tensor
# conversion and crop, the collate) may start its own team of OpenMP threads, which spin while they wait for
# work, so `n_threads` teams fight over `cores` cores. The solution restores one thread when it is done.

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

    before = torch.get_num_threads()
    try:
        t = measure.interleaved({str(n): with_threads(n) for n in intra_op_counts}, repeat=rounds, warmup=1)
    finally:
        torch.set_num_threads(before)
    return {n: len(ds) / measure.median(t[str(n)]) for n in intra_op_counts}


ex4 = ex4_rates((1, cores))
for ex4_n, ex4_rate in ex4.items():
    print(f"ThreadLoader ({n_threads} threads), torch with {ex4_n} intra-op threads: {ex4_rate:.0f} img/s")
print(f"{cores} intra-op threads over 1: {ex4[cores] / ex4[1]:.2f}x")
assert torch.get_num_threads() == 1, "the solution left torch's thread count changed"
