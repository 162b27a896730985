# %% [markdown] slideshow={"slide_type": "slide"}
# # 07 · Inside the DataLoader
#
# | | |
# |---|---|
# | **Question** | What does each DataLoader knob (`num_workers`, `pin_memory`, `prefetch_factor`, `persistent_workers`, prefetchers in a thread or a process, `__getitems__`, fast collate) change in *when* things happen, and what do workers cost in memory and randomness? |
# | **Seeds** | 002: "Read images in parallel", "Prefetching on CPU / GPU", "Memory optimization", "Fast collate", the collate that discards broken images, and its timeline diagrams |
# | **GPU** | optional: without one, the training step is a stand-in that sleeps (the CPU is free, as during a GPU step) and the CUDA prefetcher passes batches through |
# | **Optional** | libjpeg-turbo: without it Pillow decodes the JPEGs more slowly, and every loader's times change |
# | **Run time** | <!-- run-time --> workshop ~1.8 min (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# Seed 002 draws the DataLoader as boxes on a timeline: workers read batches, the main process copies them to
# the GPU, the GPU runs the model. Here we *record* that timeline from a real `torch.utils.data.DataLoader`:
# each worker notes when it fetched and collated each batch and ships those times back inside the batch; the
# main process notes when it waited, copied and stepped (`fastloops_helpers.measure.timeline`). Every knob is then a
# change you can see. The code that runs inside each box (the dataset, the collate, the prefetchers' loops) lives in
# the package, because worker processes must import it; a cell renders it from the objects that run
# (`show_code`) before it is timed, so an edit to the package shows up, and is timed, at the next run.
#
# Further reading from seed 002: [But what are PyTorch DataLoaders really?](https://www.scottcondron.com/jupyter/visualisation/audio/2020/12/02/dataloaders-samplers-collate.html),
# [Building a Multi-Process Data Loader from Scratch](https://teddykoker.com/2020/12/dataloader/) and
# [Visualizing data loaders to diagnose deep learning pipelines](https://www.jpatrickpark.com/post/loader_sim/).

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import multiprocessing
import os
import warnings
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, default_collate

from fastloops_helpers import config, measure
from fastloops_book import claims
from fastloops_book.source import show_code
from fastloops_helpers.data import broken, jpeg_folder
from fastloops_helpers.data.jpeg_folder import ImageFolder, synthetic_imagefolder, write_synthetic_imagefolder
from fastloops_helpers.load import prefetch, process_prefetch
from fastloops_helpers.load.collate import fast_collate
from fastloops_helpers.load.getitems import collate_batch
from fastloops_helpers.load.move import move_to
from fastloops_helpers.load.process_prefetch import ProcessPrefetcher
from fastloops_helpers.load.transforms import normalize
from fastloops_helpers.measure import plots, timeline
from fastloops_helpers.teach import worker_data

cores = os.cpu_count()  # the most workers that can run at once
print(config.describe())
print(measure.hardware_line())
# more workers than cores on purpose; without a GPU, pinning and the CUDA prefetcher are skipped on purpose too
warnings.filterwarnings("ignore", message=".*(worker processes in total|pin_memory|CUDAPrefetcher).*")

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
px = config.size("anatomy.px")                  # decoded images are resized to px x px: bigger costs more per image
batch_size = config.size("anatomy.batch_size")  # images per batch: bigger amortises per-batch overhead
step_ms = config.size("anatomy.step_ms")        # the stand-in GPU step per batch: longer hides more loading
ladder_rounds = config.size("anatomy.ladder_rounds")  # rounds of the ladder in section 2: 6+ bound its interval, slower
depth = 2                                       # batches a prefetcher keeps ready: more absorbs slow batches, costs memory
memory_mb = config.size("anatomy.memory_mb")    # dataset size in the worker-memory experiment: bigger, clearer copies
memory_workers = config.size("anatomy.memory_workers")  # worker counts there: more shows the growth, costs RAM
collate_rounds = 30                             # rounds of the collate comparison: more narrows its interval
main_threads = 1                                # torch threads in the main process, as DataLoader sets in workers

# %% slideshow={"slide_type": "-"}
torch.set_num_threads(main_threads)  # collate's torch.stack runs on this many intra-op threads
figures = {}

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. The baseline: one process does everything
#
# With `num_workers=0` the main process reads and decodes every JPEG of a batch, collates it, then runs the
# step, then starts on the next batch: the seed's "naive implementation". **Prediction:** an epoch takes the
# sum of the two, `images x decode time + batches x step time`, and the loop waits for data most of the time
# when decoding a batch costs more than a step.
#
# The code being timed: the dataset opens one JPEG per sample, decodes it with Pillow and resizes it. In
# section 2 the same code runs in worker processes, which import it from the package, so the cells below
# render the package's code from the objects that run (`show_code`). The cells after them are this notebook's
# own: `make_loader` builds the DataLoader every section times, wrapped by `timeline.instrument` (plumbing from
# the package) so that each fetch and collate notes when it ran, and `measure_loader` runs and records epochs.

# %% slideshow={"slide_type": "subslide"}
# one sample: runs in every worker process, which imports these from the package
show_code(ImageFolder.__getitem__, jpeg_folder.pil_loader, worker_data.ResizeToTensor)

# %% slideshow={"slide_type": "subslide"}
def make_loader(dataset, num_workers: int, batch_size: int, **kw) -> DataLoader:
    """The DataLoader every section times; the workers pickle or inherit the timed dataset and collate."""
    data, collate = timeline.instrument(dataset, kw.pop("collate_fn", None))  # note when each fetch and collate ran
    return DataLoader(data, batch_size=batch_size, num_workers=num_workers, collate_fn=collate, **kw)


def measure_loader(loader, step_ms: float, epochs: int = 1) -> tuple[dict, timeline.Timeline]:
    """Record `epochs` epochs of `loader`, each batch followed by a stand-in step of `step_ms` (the CPU stays free).

    With a GPU, each batch is also copied to it (the timeline's `copy` stage)."""
    gpu = config.device() if config.device().type == "cuda" else None
    copy = partial(move_to, device=gpu, non_blocking=True) if gpu else None
    tl = None
    for _ in range(epochs):
        tl = timeline.record(loader, step=timeline.gpu_like_step(step_ms / 1000), device=gpu, copy=copy, timeline=tl)
    return tl.summary(), tl

# %% slideshow={"slide_type": "subslide"}
def record_config(dataset, knobs: dict, batch_size: int, step_ms: float) -> tuple[dict, timeline.Timeline]:
    """Record one epoch of a configuration: DataLoader keywords, plus `wrap` (a prefetcher around the loader)."""
    knobs = dict(knobs)
    wrap = knobs.pop("wrap", lambda loader: loader)
    summary, tl = measure_loader(wrap(make_loader(dataset, knobs.pop("num_workers"), batch_size, **knobs)), step_ms)
    row = {"img_per_s": summary["samples_per_s"]} | {k: summary[k] for k in ("wait_share", "first_batch_s", "wall_s")}
    return row | {"batches": int((tl.frame().stage == "step").sum()), "parallelism": timeline.parallelism(tl),
                  "overlap": timeline.overlap_share(tl)}, tl


def sweep(dataset, configs: dict, batch_size: int, step_ms: float) -> tuple[list[dict], dict]:
    """Record one epoch of each named configuration; return one row per configuration and the timelines."""
    runs = {label: record_config(dataset, knobs, batch_size, step_ms) for label, knobs in configs.items()}
    return [{"config": label, **row} for label, (row, _) in runs.items()], {label: tl for label, (_, tl) in runs.items()}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
# the scale's synthetic ImageFolder (written once), each image decoded and resized at every access
dataset = ImageFolder(synthetic_imagefolder() / "train", transform=worker_data.ResizeToTensor(px))
_ = measure_loader(make_loader(dataset, 0, batch_size), step_ms=0)  # warm the page cache
base, base_tl = record_config(dataset, {"num_workers": 0}, batch_size, step_ms)
n_batches = base["batches"]
assert n_batches == -(-len(dataset) // batch_size), n_batches  # one step per batch, the last one short
decode_s = base_tl.frame().query("stage == 'fetch'").seconds.sum() / len(dataset)
predicted = len(dataset) * decode_s + n_batches * step_ms / 1000
print(f"{len(dataset)} images, decode + resize {decode_s * 1e3:.1f} ms each, step {step_ms} ms per batch")
measure.show("epoch, predicted as a sum", predicted)
measure.show("epoch, measured", base["wall_s"])
_ = measure.predicted(f"epoch as a sum ({predicted:.2f} s, +-15 %)", 0.85 * predicted, 1.15 * predicted,
                      base["wall_s"], "s", ".2f")
print(f"waiting for data: {base['wait_share']:.0%} of the epoch; the steps alone take {n_batches} x {step_ms} ms")
figures.update({"workers0_epoch_s": base["wall_s"], "workers0_batches": n_batches})

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = timeline.gantt(base_tl, title="num_workers=0: load, then step, never both")
plots.save(fig, "07_dataloader_anatomy-workers0")
plt.show()


# %% [markdown] slideshow={"slide_type": "subslide"}
# (We run torch with `main_threads` threads in the main process, one by default, as DataLoader does in each
# worker. With more, the `torch.stack` inside collate splits each copy over intra-op threads, and on a busy
# machine those threads can wait on each other for longer than the copy takes. Exercise 4 times both counts in
# the same rounds: its interval says whether more threads help, hurt or tie on this machine.)
#
# Red is the main loop waiting in `next(loader)`, blue the fetch (decode) of a batch, green its collate, cyan
# the step. Nothing can overlap with one process, so the epoch is the sum. The measured epoch can be longer:
# Python runs between the stages, other processes may take the core, and the recording itself costs time,
# which we measure now: each event costs two clock reads and a list append, and a batch carries about four.

# %% slideshow={"slide_type": "subslide"}
def record_events(n: int) -> list:
    """Record `n` events as the timeline records each fetch: two clock reads and a list append."""
    sink = []
    for _ in range(n):
        t0 = measure.now()
        sink.append(("fetch", t0, measure.now()))
    return sink


# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
per_event = measure.median(measure.per_call({"record": lambda: record_events(1000)})["record"]) / 1000
events_per_batch = len(base_tl.frame()) / max(1, base_tl.frame().batch.max() + 1)
print(f"recording: {per_event * 1e6:.2f} us per event, {events_per_batch:.1f} events per batch, "
      f"{per_event * len(base_tl.events) / base['wall_s']:.3%} of this epoch")


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. `num_workers`: decode batches in parallel
#
# Each worker is a separate process with its own Python interpreter (and its own GIL) that fetches and
# collates whole batches, round robin, with the dataset and `make_loader`'s collate shown in section 1.
# **Prediction:** with `w` workers on `c` cores, up to `min(w, c)` batches decode at once, and the decoding
# overlaps the step. With `L` the load time of a batch in one process and `S` the step, a batch then takes
# `max(L / min(w, c), S)` instead of `L + S`, so the speed-up is at most `(L + S) / max(L / min(w, c), S)`;
# starting the workers costs a fixed delay before the first batch. More workers than cores only share the
# same cores.
#
# The ladder is 0, 1, 2, 4, 8, half the cores and the cores, none above the cores, and a ladder epoch gives
# each worker of the largest count at least four batches (a dataset too short for that is read again from the
# start), so no count is judged on one batch per worker. `interleaved_ladder` runs `ladder_rounds` rounds; each
# round records one epoch of every `num_workers` value, in a new order each round (the harness's
# `measure.interleaved`), so a busy spell of the machine slows them all alike. The table holds the medians over
# rounds, the chart the median round of `num_workers=2`, and "2 workers over 0" is the median of the per-round
# ratios, printed with the 95-percent interval of that median.

# %% slideshow={"slide_type": "subslide"}
def interleaved_ladder(dataset, counts: list[int], batch_size: int, step_ms: float, rounds: int):
    """Record one epoch of each `num_workers` value per round, in a new order each round, for `rounds` rounds.

    Return one row per value (medians over rounds), each value's timeline from its median round, and
    {num_workers: img/s per round}, whose per-round ratios `measure.ratios` takes."""
    indices = [i % len(dataset) for i in range(max(len(dataset), 4 * max(counts) * batch_size))]  # 4+ per worker
    runs = {n: [] for n in counts}

    def epoch(n: int) -> None:
        runs[n].append(record_config(dataset, {"num_workers": n, "sampler": indices}, batch_size, step_ms))

    measure.interleaved({n: partial(epoch, n) for n in counts}, rounds, warmup=0, shuffle=True)
    rows, timelines = [], {}
    for n, recorded in runs.items():
        medians = {key: measure.median([row[key] for row, _ in recorded]) for key in recorded[0][0]}
        rows.append({"config": f"num_workers={n}", **medians, "batches": recorded[0][0]["batches"],
                     "rounds": len(recorded)})
        middle = sorted(recorded, key=lambda run: run[0]["img_per_s"])[(len(recorded) - 1) // 2]
        timelines[rows[-1]["config"]] = middle[1]  # the median round's timeline
    return rows, timelines, {n: [row["img_per_s"] for row, _ in recorded] for n, recorded in runs.items()}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
ladder_counts = sorted({n for n in (0, 1, 2, 4, 8, cores // 2, cores) if n <= cores})
ladder_rows, ladder_tls, ladder_img_per_s = interleaved_ladder(dataset, ladder_counts, batch_size, step_ms,
                                                               ladder_rounds)
assert all(r["rounds"] == ladder_rounds and r["batches"] >= 4 * max(ladder_counts) for r in ladder_rows), ladder_rows
ladder_table = pd.DataFrame(ladder_rows).set_index("config")
ladder_table.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
two = ladder_tls["num_workers=2"]
fig = timeline.gantt(two, title="num_workers=2: batches decode in two processes while the loop steps")
plots.save(fig, "07_dataloader_anatomy-workers2")
plt.show()
L, S = batch_size * decode_s, step_ms / 1000  # one batch's load in one process, and the step
for n in ladder_counts[1:]:
    speedup = measure.ratio(ladder_img_per_s, n, 0)  # the median over rounds of the per-round ratio
    bound = (L + S) / max(L / min(n, cores), S)
    _ = measure.predicted(f"num_workers={n} over 0, img/s (up to the bound {bound:.2f}x, +10 %)",
                          float("-inf"), 1.1 * bound,
                          measure.ratios(ladder_img_per_s, n, 0), "x")
    print(f"    {speedup / bound:.0%} of the bound")
first = ladder_table.first_batch_s
_ = measure.predicted("num_workers=2's first batch over num_workers=0's (workers start first)", 1, float("inf"),
                      first["num_workers=2"] / first["num_workers=0"], "x")
print(f"with 2 workers, {ladder_table.parallelism['num_workers=2']:.2f} batches were being loaded at once on average "
      "(median over rounds)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Seed 002's diagrams imply that two workers beat none when decoding is the bottleneck. The verdict comes from
# the per-round ratios: "met" or "missed" only when the whole interval lies on one side of the registry's
# threshold, otherwise a tie on this machine; the half-width says how narrow an interval this scale's rounds
# afford (fewer than 6 rounds cannot bound it). It depends on the run, so nbval does not compare this cell.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
ladder_ratios = measure.ratios(ladder_img_per_s, 2, 0)
ladder_low, ladder_high = measure.median_interval(ladder_ratios)
ladder_half = (ladder_high - ladder_low) / 2 / measure.median(ladder_ratios)  # half-width, as a share of the median
print(f"num_workers=2 over 0, img/s: {measure.verdict(ladder_ratios, claims.get('workers2_over_workers0').at_least)}; "
      + (f"half-width +-{ladder_half:.0%} of the median" if np.isfinite(ladder_half) else "unbounded: fewer than 6 rounds"))

# %% [markdown] slideshow={"slide_type": "subslide"}
# The workers' lanes overlap each other and the main loop's steps: this is the seed's `num_workers` diagram,
# measured. The speed-up is bounded by the cores (printed at the top) and falls short of the bound when they
# are busy: the main process, the workers and anything else running on the machine share them, and with the
# step the loop is no longer input-bound once loading is faster than stepping (then the step sets the pace).
# The first batch should arrive later with workers (`first_batch_s`): each epoch forks the workers and one must
# decode a whole batch before the loop can start.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. `pin_memory`, `prefetch_factor`, `persistent_workers`
#
# - `pin_memory=True` makes a thread in the main process copy each batch into page-locked memory, from which
#   a GPU copy can run asynchronously (`non_blocking=True`). Without an accelerator DataLoader warns and skips it.
# - `prefetch_factor` is how many batches each worker may have in flight (default 2): the CPU-side queue.
# - `persistent_workers=True` keeps the workers alive between epochs, so the second epoch does not pay the
#   start-up again. **Prediction:** the first-batch delay of epoch 2 falls to about one batch's decode time,
#   `batch_size x decode time` (printed below).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
knob_configs = {
    "prefetch_factor=1": {"num_workers": 2, "prefetch_factor": 1},
    "prefetch_factor=4": {"num_workers": 2, "prefetch_factor": 4},
    "pin_memory": {"num_workers": 2, "pin_memory": True},
}
knob_rows, knob_tls = sweep(dataset, knob_configs, batch_size, step_ms)
print("pinning happened:", (knob_tls["pin_memory"].frame().stage == "pin").any(),
      "(DataLoader pins only when an accelerator is present)")
knob_table = pd.DataFrame(knob_rows).set_index("config")
_ = measure.predicted("prefetch_factor 4 over 1, img/s (near each other: +-20 %)", 1 / 1.2, 1.2,
                      knob_table.img_per_s["prefetch_factor=4"] / knob_table.img_per_s["prefetch_factor=1"], "x")
knob_table.round(3)


# %% slideshow={"slide_type": "subslide"}
def epoch_starts(dataset, num_workers: int, batch_size: int, step_ms: float, persistent_workers: bool, **kw):
    """Record two epochs; return the delay from the start of each epoch to its first batch, in seconds."""
    loader = make_loader(dataset, num_workers, batch_size, persistent_workers=persistent_workers, **kw)
    df = measure_loader(loader, step_ms, epochs=2)[1].frame()
    return [float(df[(df.stage == "wait") & (df.start >= s)].end.min() - s) for s in df[df.stage == "start"].start]


# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
# two epochs each; the delay from each epoch's start to its first batch
persist = {f"persistent_workers={p}": epoch_starts(dataset, 2, batch_size, step_ms, p) for p in (False, True)}
for label, (first, second) in persist.items():
    measure.show(f"{label}: first batch of epoch 1", first)
    measure.show(f"{label}: first batch of epoch 2", second)
one_batch = batch_size * decode_s
second = persist["persistent_workers=True"][1]
_ = measure.predicted(f"persistent workers, epoch 2's first batch (one batch's decode {one_batch:.3f} s, "
                      "at most 2x)", float("-inf"), 2 * one_batch, second, "s", ".3f")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The prefetch depth cannot make decoding faster: when the loop is input-bound, a deeper queue only holds
# batches that are not there yet, so expect the `prefetch_factor` rows near each other (their ratio is printed
# above). `prefetch_factor` matters when batch times vary (one slow batch) and the step is longer than the
# average decode: then the queue absorbs the slow batch. `persistent_workers` saves the workers' start-up at
# each epoch: small under `fork` (a copy of the running process), larger under `spawn` (a fresh interpreter
# per worker that imports torch and unpickles the dataset; exercise 3). Either way the first batch of an epoch
# still waits for one batch to be decoded; the printed line compares it with that prediction (a busy machine,
# or both workers racing for one core, makes it miss).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Prefetchers: loading while the step runs, in a thread or in one process
#
# Seed 002 names two ways to prefetch beside DataLoader's own queue:
#
# - **Implementation #1**, NVIDIA apex's `data_prefetcher` ([examples/imagenet/main_amp.py](https://github.com/NVIDIA/apex/blob/master/examples/imagenet/main_amp.py#L265)): copy batch i+1 to
#   the GPU on a side [CUDA stream](https://developer.nvidia.com/blog/how-overlap-data-transfers-cuda-cc/) while batch i computes. `prefetch.CUDAPrefetcher` follows that pattern (pinned
#   memory, `non_blocking=True`, the compute stream waits on the side stream, `record_stream` so the allocator
#   does not reuse memory still in use), generalised to nested batches, exceptions and early exit. On a machine
#   without a GPU it passes batches through and says so.
# - **Implementation #2**, "sacrifice one data loader process into a prefetcher process":
#   `ProcessPrefetcher(loader)` runs the loader in a child process, which stages each batch in shared memory;
#   on a GPU machine into a ring of slots page-locked once, so the copy to the GPU needs no pinning copy in the
#   training process. It keeps order, re-raises the loader's exceptions by name and leaves no process behind.
#
# `prefetch.ThreadPrefetcher(loader, depth)` does the same in a thread, which overlaps because JPEG decoding in
# Pillow releases the GIL. **Prediction:** with `L` the load time of a batch and `S` the step, the plain loop
# takes `L + S` per batch; either prefetcher takes about `max(L, S)` per batch plus one `L` for the first batch,
# and the process adds its start-up (a fork) and the shipping of each batch through shared memory.
#
# Further reading from seed 002: [Data Prefetching on GPU in Deep Learning](https://www.jpatrickpark.com/post/prefetcher/).

# %% [markdown] slideshow={"slide_type": "subslide"}
# The code being timed, from the package (the classes are imported above). `ThreadPrefetcher`: a producer
# thread iterates the loader and puts each batch into a queue of `depth` slots; the loop takes them out in
# order. A stop event lets either side end the epoch early, and an exception travels through the queue.

# %% slideshow={"slide_type": "subslide"}
# on the timed path: start the producer thread, which fills the bounded queue; hand batches out in order
show_code(prefetch.ThreadPrefetcher.__iter__, prefetch.ThreadPrefetcher._produce,
          prefetch.ThreadPrefetcher._consume)

# %% [markdown] slideshow={"slide_type": "subslide"}
# `ProcessPrefetcher`: the child process runs `_produce`, iterating the loader and copying each batch into a
# ring of shared buffers (a batch that does not fit travels whole); the training process's
# `_receive_batches` gets a small message per batch, takes the batch out of shared memory and hands the slot
# back. Starting and stopping the child, and shipping exceptions, stay in the package.

# %% slideshow={"slide_type": "-"}
# the child's loop (it inherits or imports it from the package), then the training process's loop
show_code(process_prefetch._produce, ProcessPrefetcher._receive_batches)

# %% [markdown] slideshow={"slide_type": "subslide"}
# `CUDAPrefetcher` stages batch i+1 while batch i is in use (apex's pattern, the loop `one_ahead`): copy
# it into reused page-locked buffers (`PinnedRing`, notebook 11), copy those to the GPU on a side stream, and
# before handing it out make the compute stream wait for that copy. Without a GPU its row below is the plain loop.

# %% slideshow={"slide_type": "subslide"}
# one batch ahead: stage on the side stream, then make the compute stream wait for it
show_code(prefetch.CUDAPrefetcher.__iter__, prefetch.one_ahead, prefetch.CUDAPrefetcher._stage,
          prefetch.CUDAPrefetcher._ready)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
pre_rows, pre_tls = sweep(dataset, {
    "num_workers=0": {"num_workers": 0},
    "ThreadPrefetcher": {"num_workers": 0, "wrap": lambda dl: prefetch.ThreadPrefetcher(dl, depth=depth)},
    "ProcessPrefetcher": {"num_workers": 0, "wrap": lambda dl: ProcessPrefetcher(dl, depth=depth)},
    "CUDAPrefetcher": {"num_workers": 0, "wrap": prefetch.CUDAPrefetcher},
}, batch_size, step_ms)
print(f"both prefetchers keep up to depth={depth} batches ready")
pre_table = pd.DataFrame(pre_rows).set_index("config")
pre_table.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = timeline.gantt(pre_tls["ProcessPrefetcher"], title="a prefetcher process decodes while the loop steps")
plots.save(fig, "07_dataloader_anatomy-process-prefetcher")
plt.show()
for label in ["ThreadPrefetcher", "ProcessPrefetcher"]:
    predicted = n_batches * max(L, S) + L
    wall = pre_table.wall_s[label]
    _ = measure.predicted(f"{label} epoch (n max(L, S) + L = {predicted:.2f} s, at most +20 %)",
                          float("-inf"), 1.2 * predicted,
                          wall, "s", ".2f")
    print(f"    step time with a decode beside it: {timeline.overlap_share(pre_tls[label]):.0%}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The prefetcher's lane runs under the main loop's steps. Both gain only where the step leaves the CPU free
# (a GPU step, I/O): a CPU-bound Python step holds the GIL and the thread waits, and on a machine with few
# cores a CPU-bound step and the prefetcher process share them. The process pays a fork at the start of each
# epoch and a trip through shared memory per batch (the child moves each batch into shared memory, the loop
# maps it without copying); in return its decoding never competes for the GIL. What makes the predictions
# miss: a busy machine (the prefetcher gets no core while others run), a load time `L` that varies from batch
# to batch (the queue of `depth` batches absorbs only short bursts), and on a 2-core machine the loop's own
# Python between steps. On a GPU machine the `CUDAPrefetcher` row also hides the host-to-device copy; here it
# runs the plain loop, so any gap between those two rows is noise.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. `__getitems__`: fetch a batch in one call
#
# The DataLoader's fetcher calls `dataset[i]` once per sample and then collates the list, unless the dataset
# has `__getitems__(indices)`, which receives the whole batch of indices. For data already decoded in memory
# (notebook 09 precomputes it), one gather replaces `batch_size` Python calls and the stack in collate.
# **Prediction**, with arithmetic: the per-sample path costs `B` calls of `c` each plus the collate, which
# copies the batch's bytes into one tensor (`stack`); the batched path costs one call that gathers (copies)
# the same bytes. So the saving is `(B c + copy) / (c + copy)`: about `B` when the copy is negligible, about 1
# when the copy dominates. We measure `c` and the copy on their own, then the two paths in a DataLoader.

# %% slideshow={"slide_type": "subslide"}
# the two datasets compared; a DataLoader with workers would run them in worker processes
show_code(worker_data.StackedImages, worker_data.BatchedStackedImages, collate_batch)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
images = torch.stack([dataset[i][0] for i in range(len(dataset))])
labels = torch.tensor(dataset.targets)
batched, indices = worker_data.BatchedStackedImages(images, labels), list(range(batch_size))
samples = [batched[i] for i in indices]  # one batch's parts, timed on their own: calls, the stack, one gather
costs = {name: measure.median(seconds) for name, seconds in measure.interleaved({
    "calls": lambda: [batched[i] for i in indices], "collate": lambda: default_collate(samples),
    "getitems": lambda: batched.__getitems__(indices)}, warmup=2).items()}
predicted_getitems = (costs["calls"] + costs["collate"]) / costs["getitems"]
print(f"batch of {batch_size}: {batch_size} calls {costs['calls'] * 1e6:.0f} µs, collate (a copy of "
      f"{images[:batch_size].nbytes / 1e6:.2f} MB) {costs['collate'] * 1e6:.0f} µs, one __getitems__ {costs['getitems'] * 1e6:.0f} µs")
get_rows = []
for label, data, collate in [("__getitem__ + default_collate", worker_data.StackedImages(images, labels), None),
                             ("__getitems__", worker_data.BatchedStackedImages(images, labels), collate_batch)]:
    loader = make_loader(data, 0, batch_size, collate_fn=collate)
    summary, tl = measure_loader(loader, step_ms=0)  # no step: the loader alone
    per_batch = tl.frame().query("stage in ['fetch', 'collate']").groupby("batch").seconds.sum().median()
    get_rows.append({"config": label, "fetch+collate_us_per_batch": per_batch * 1e6, "img_per_s": summary["samples_per_s"]})
get_table = pd.DataFrame(get_rows).set_index("config")
measured_getitems = get_table.iloc[0, 0] / get_table.iloc[1, 0]
_ = measure.predicted(f"__getitems__ speed-up of fetch + collate in the DataLoader (from the parts "
                      f"{predicted_getitems:.1f}x, +-50 %)", 0.5 * predicted_getitems, 1.5 * predicted_getitems,
                      measured_getitems, "x", ".2g")
get_table.round(1)

# %% [markdown] slideshow={"slide_type": "subslide"}
# The batch size is not what sets the saving here: both paths copy every byte of the batch once (the
# stack in collate, the gather in `__getitems__`), and for decoded images that copy costs more than the
# Python calls it replaces. The calls cost `B c`, printed above; the saving is `B c` out of `B c + copy`. It
# approaches `B` for small samples (a few numbers per row, notebook 02) and fades for large ones. What makes
# the DataLoader's ratio miss the parts' prediction: the timeline's events also hold the DataLoader's
# fetcher and our recording, a per-batch cost both paths pay, and a busy machine adds noise to each batch.

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Fast collate: one uint8 batch, converted on the device
#
# Seed 002's "Fast collate" box (from [PyTorch augmentation with libjpeg-turbo](https://www.pankesh.com/posts/2019-05-02-pytorch-augmentation-with-libjpeg-turbo/))
# concatenates the decoded images into one batch, which is then copied to the GPU. NVIDIA apex's ImageNet example
# ([`fast_collate` in examples/imagenet/main_amp.py](https://github.com/NVIDIA/apex/blob/master/examples/imagenet/main_amp.py))
# is the code behind it: its per-sample transforms stop before `ToTensor` ("Too slow", says its comment),
# `fast_collate` copies the uint8 images into one `(N, 3, H, W)` uint8 tensor, DataLoader pins that tensor
# (`pin_memory=True`), and its prefetcher converts and normalises the whole batch on the GPU
# (`.float().sub_(255 mean).div_(255 std)`). Our `fast_collate` makes the same copy with numpy (shown below);
# `normalize` folds apex's subtract and divide into one multiply-add. Three ways to turn a batch of decoded
# images (HWC uint8, as Pillow returns them: section 5's images) into the normalised float batch a model takes:
#
# - **default**: each sample converted to float and normalised (`ToTensor` + `Normalize`, in the worker),
#   then `default_collate` stacks the floats;
# - **fast collate**: each sample stays uint8, `fast_collate` stacks them, and one `normalize` converts the
#   batch on the device (the CPU here);
# - **batched**: the helpers' path of section 5, one gather of the batch from the stacked, channels-first array,
#   then one `normalize`.
#
# **Prediction**, with arithmetic. With `b = 3 px²` the bytes of one uint8 image, per sample the default path
# reads `b` and writes `4b` (a float32 value is 4 bytes), then the stack reads and writes those `4b` again:
# `13b`. Fast collate reads and writes `b` (its copy), then the conversion reads `b` and writes `4b`: `7b`. The
# batched path moves the same `7b` (gather, then convert). Where bytes set the pace, the default path takes
# `13/7 = 1.86x` as long as fast collate; its `B` calls of `normalize` (against one) add a fixed cost per sample,
# which weighs more for small images. We allow a quarter less for caches (a small batch stays in cache, where a
# byte costs less): predicted `default / fast collate >= 0.75 x 13/7 = 1.4x`. Fast collate and the batched path
# move the same bytes, but fast collate pays `B` fetches and `B` copies, each a Python call, where the batched
# path makes one gather: predicted `fast collate / batched >= 1`.

# %% slideshow={"slide_type": "subslide"}
# fast_collate runs in the worker processes (collate_fn); normalize runs on the device, once per batch
show_code(fast_collate, normalize)

# %% slideshow={"slide_type": "subslide"}
hwc_data = worker_data.StackedImages(images.permute(0, 2, 3, 1).contiguous(), labels)  # HWC, as Pillow decodes
stacked = worker_data.BatchedStackedImages(images, labels)  # section 5's batched dataset: CHW, one gather


def to_device(images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Hand a CPU batch to `device`: pinned, then copied asynchronously (DataLoader's pin_memory, apex's .cuda)."""
    return images if device.type == "cpu" else images.pin_memory().to(device, non_blocking=True)


# %% slideshow={"slide_type": "subslide"}
def default_path(indices: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Each sample to float and normalised (ToTensor + Normalize, in the worker); default_collate stacks the floats."""
    images, labels = default_collate([(normalize(x.permute(2, 0, 1)), y) for x, y in (hwc_data[i] for i in indices)])
    return to_device(images, device), labels


def fast_collate_path(indices: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """apex's: each sample stays uint8; one uint8 batch, converted and normalised on the device in one call."""
    images, labels = fast_collate([hwc_data[i] for i in indices])
    return normalize(to_device(images, device)), labels


def batched_path(indices: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The helpers': one gather of the batch from the stacked array, then one batched normalise."""
    images, labels = stacked.__getitems__(indices)
    return normalize(to_device(images, device)), labels


collate_paths = {"default": default_path, "fast collate": fast_collate_path, "batched": batched_path}

# %% slideshow={"slide_type": "subslide"}
# one shuffled batch; the three paths must give the same normalised batch before we time them
collate_indices = torch.randperm(len(images), generator=torch.Generator().manual_seed(0))[:batch_size].tolist()
cpu = torch.device("cpu")
collated = {name: path(collate_indices, cpu) for name, path in collate_paths.items()}
ref_images, ref_labels = collated["default"]
for name, (x, y) in collated.items():
    same = torch.allclose(x, ref_images, atol=1e-5) and torch.equal(y, ref_labels)
    print(f"{name:12s} {x.dtype}, the default path's normalised batch (within float rounding): {same}")
    assert same, name
uint8_batch, _ = fast_collate([hwc_data[i] for i in collate_indices])
print(f"fast collate hands over a {uint8_batch.dtype} batch: {ref_images.nbytes // uint8_batch.nbytes}x fewer bytes "
      "than default_collate's")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
collate_s = measure.per_call({name: partial(path, collate_indices, cpu) for name, path in collate_paths.items()},
                             repeat=collate_rounds, warmup=2)
image_mb = 3 * px * px * batch_size / 1e6  # the batch as uint8
print(f"a batch of {batch_size} images of {px}x{px}, {image_mb:.2f} MB as uint8; moved per batch: default 13 x that "
      f"= {13 * image_mb:.1f} MB, fast collate and batched 7 x that = {7 * image_mb:.1f} MB")
for name, seconds in collate_s.items():
    measure.show(f"{name}, per batch (median of {len(seconds)} interleaved rounds)", measure.median(seconds))

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
default_over_fast = measure.ratios(collate_s, "default", "fast collate")  # per round
fast_over_batched = measure.ratios(collate_s, "fast collate", "batched")
_ = measure.predicted("default over fast collate, per batch (at least 0.75 x 13/7)", 0.75 * 13 / 7, float("inf"),
                      default_over_fast, "x")
_ = measure.predicted("fast collate over batched, per batch (same bytes, B calls against one)", 1, float("inf"),
                      fast_over_batched, "x")
figures.update({"fast_collate_default_s": measure.median(collate_s["default"]),
                "fast_collate_s": measure.median(collate_s["fast collate"]),
                "fast_collate_batched_s": measure.median(collate_s["batched"]),
                **measure.interval_figures("fast_collate_speedup", default_over_fast),
                **measure.interval_figures("batched_over_fast_collate", fast_over_batched)})

# %% [markdown] slideshow={"slide_type": "subslide"}
# Both batched paths write the float batch once; the default path writes it twice (each sample, then the
# stack) and calls `normalize` `B` times. What makes the ratio miss the bytes' prediction: a batch small enough
# to stay in cache, where the extra bytes cost little and the per-call costs dominate (then the ratio can pass
# 13/7); the reordering from HWC to CHW, which fast collate does in its copy (a strided read, slower than a
# plain copy) and the default path inside its conversion; and a busy machine. The batched path needs the images
# stored channels first in one array (notebook 09's memmap): no reordering and no call per sample. In a
# DataLoader with workers, fast collate's batch also crosses from the worker through shared memory, and to the
# GPU through pinned memory, as uint8: a quarter of the bytes of a float batch each time. The next cell measures
# that on a GPU, where the conversion runs too, and says why it skipped otherwise.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if torch.cuda.is_available():  # each path's batch pinned and copied to the GPU; fast collate normalises there
    cuda = torch.device("cuda")
    gpu_s = measure.per_call({name: partial(path, collate_indices, cuda) for name, path in collate_paths.items()},
                             repeat=collate_rounds, warmup=2, device=cuda)
    for name, seconds in gpu_s.items():
        measure.show(f"{name}, to {torch.cuda.get_device_name()}, per batch", measure.median(seconds))
    _ = measure.predicted("on the GPU, default over fast collate (a quarter of the bytes copied; at least 0.75 x 13/7)",
                          0.75 * 13 / 7, float("inf"), measure.ratios(gpu_s, "default", "fast collate"), "x")
    figures.update({"fast_collate_gpu_default_s": measure.median(gpu_s["default"]),
                    "fast_collate_gpu_s": measure.median(gpu_s["fast collate"])})
else:
    print("fast collate on a GPU: skipped, no CUDA device here (it pins the uint8 batch, copies it, normalises there)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. Worker memory: copy-on-read
#
# Workers start as copies of the main process (`fork`, the Linux default before Python 3.14), sharing its
# memory pages until one of them *writes* to a page. Reading a Python object writes to it: its reference count
# changes. So a dataset held as a Python list of many objects gets copied, page by page, into every worker
# that touches it, while one numpy array (one object, one reference count) stays shared; a memmap is shared
# through the page cache and is the only one of the three that is not copied under `spawn` either. We measure
# USS (memory only this process holds) and PSS (shared pages split between the processes that map them) with
# psutil. **Prediction:** beyond the memory any worker holds of its own, the list adds up to one dataset per
# worker to the total PSS; the array and the memmap add nothing.
#
# Further reading from seed 002: [Demystify RAM Usage in Multi-Process Data Loaders](https://ppwwyyxx.com/blog/2022/Demystify-RAM-Usage-in-Multiprocess-DataLoader/).

# %% slideshow={"slide_type": "subslide"}
# the three ways to hold the same rows; each runs in the worker processes
show_code(worker_data.ListRows, worker_data.ArrayRows, worker_data.MemmapRows)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
rows_np = worker_data.make_rows(memory_mb)
mm_path = config.data_dir() / f"workerdata-{memory_mb}mb.f32"
rows_np.tofile(mm_path)
kinds = {"list of objects": worker_data.ListRows(rows_np), "numpy array": worker_data.ArrayRows(rows_np),
         "memmap": worker_data.MemmapRows(mm_path, rows_np.shape[1])}
del rows_np  # keep only the datasets' own copies in the main process
mem_rows = [dict(kind=kind, **worker_data.worker_memory(ds, n))
            for kind, ds in measure.progress(kinds.items(), desc="datasets") for n in memory_workers]
mem = pd.DataFrame(mem_rows)
print("start method:", multiprocessing.get_start_method(), f"| dataset: {memory_mb} MB")
mem.round(1)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for kind, part in mem.groupby("kind", sort=False):
    axes[0].plot(part.num_workers, part.total_pss_mb, marker="o", label=kind)
    axes[1].plot(part.num_workers, part.samples_per_s, marker="o", label=kind)
axes[0].set(xlabel="num_workers", ylabel="total PSS, main + workers (MB)", title="memory over one epoch")
axes[1].set(xlabel="num_workers", ylabel="samples/s", title="throughput")
for ax in axes:
    ax.set_xticks(sorted(mem.num_workers.unique()))  # whole workers only
axes[0].legend()
fig.tight_layout()
plots.save(fig, "07_dataloader_anatomy-worker-memory")
plt.show()

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
pss = mem.pivot(index="num_workers", columns="kind", values="total_pss_mb")
most = pss.index.max()
growth = (pss.loc[most] - pss.loc[0]) / most  # MB of total PSS per worker
print(f"every worker's own memory (interpreter, torch; the numpy array's growth): {growth['numpy array']:.0f} MB")
for kind, (bound, why) in {"list of objects": (memory_mb, "one dataset"), "memmap": (memory_mb / 10, "shared")}.items():
    _ = measure.predicted(f"{kind}, beyond that, per worker (at most {why})", float("-inf"), bound,
                          growth[kind] - growth["numpy array"], "MB", ".0f")
uss = mem.pivot(index="num_workers", columns="kind", values="main_uss_mb")
for kind in uss.columns:  # pages the main process owned alone are now shared with the workers
    _ = measure.predicted(f"{kind}: main-process USS with {most} workers over none (falls)", float("-inf"), 1,
                          uss.loc[most, kind] / uss.loc[0, kind], "x", ".2f")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Main-process USS should *fall* as workers appear: pages it used to own alone are now shared with the
# children, which is why USS alone misleads and PSS is the number to add up. The list's total should grow
# with every worker, each copying the pages that hold the objects it read (with four 1-KiB rows per 4-KiB
# page, a worker that reads a quarter of the rows still copies most pages). The memmap's total can start
# higher because PSS counts the file's pages in the page cache that the processes map; the kernel can drop
# those under memory pressure and read them again, while it cannot drop a worker's private copies. Every
# worker also holds memory of its own whatever the dataset (its interpreter's heap, torch's state), which is
# the numpy array's growth; the lines above set what each kind adds beyond it beside the prediction. It can
# exceed one dataset per worker: each `bytes` object carries a header and the list its pointers. The fix, from the seed's reference (Yuxin Wu's post):
# hold the data in a few large numpy arrays or tensors (or a memmap), never a list of many Python objects.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. Worker randomness
#
# Each worker is a copy of the main process, so a random generator stored *in the dataset* is copied with
# the same state into every worker: they draw the same "random" augmentations. DataLoader re-seeds Python's
# `random`, torch and (since torch 1.9) numpy's global generator in each worker, so the old advice about
# `np.random` is now handled; a `np.random.default_rng` the dataset owns is not. The fix is a `worker_init_fn`
# that seeds it from the per-worker seed (`worker_data.seed_worker`).

# %% slideshow={"slide_type": "subslide"}
# the datasets and the worker_init_fn run in the worker processes
show_code(worker_data.NoisyIndex, worker_data.GlobalNoisyIndex, worker_data.seed_worker)

# %% slideshow={"slide_type": "subslide"}
n = 32
random_rows = [
    ("dataset-owned Generator, 2 workers", worker_data.duplicated_draws(worker_data.NoisyIndex(n), 2)),
    ("same, worker_init_fn=seed_worker", worker_data.duplicated_draws(worker_data.NoisyIndex(n), 2, worker_data.seed_worker)),
    ("numpy global RNG, 2 workers", worker_data.duplicated_draws(worker_data.GlobalNoisyIndex(n), 2)),
]
for label, dup in random_rows:
    print(f"{label:38s} repeated draws: {dup} of {n}")

# %% [markdown] slideshow={"slide_type": "-"}
# Without the fix, worker 1 replays worker 0's numbers exactly: with two workers, half the draws repeat.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 8. Broken samples: drop them in collate, and say so
#
# Real folders hold truncated downloads, empty files and things that are not images. The seed's collate
# filters out samples whose image is `None` (its dataset returns `None` for a file it cannot read) and returns
# `None` when nothing is left, so the training loop must skip that batch. It works, and it is silent: nothing
# says which files were dropped, or that any were.

# %% slideshow={"slide_type": "subslide"}
# seed 002's collate (for (image, label) samples); a collate runs in the worker processes
show_code(worker_data.collate_drop_none)

# %% slideshow={"slide_type": "-"}
image = torch.zeros(3, 4, 4, dtype=torch.uint8)
seed_batch = worker_data.collate_drop_none([(image, 0), (None, 1), (image, 1)])
print("seed's collate: 3 samples in, a batch of", len(seed_batch[1]), "out; the dropped one is not named")
print("all broken:", worker_data.collate_drop_none([(None, 0), (None, 1)]))

# %% [markdown] slideshow={"slide_type": "subslide"}
# The helpers keep the idea and make it speak. The dataset (`broken.SafeImageFolder`) turns a file it cannot
# decode into a `Broken(path, reason)` marker and warns with the file name; `broken.collate_drop_broken`
# collates the good samples and ships the dropped names with the batch (it runs in a worker, so that is the only
# way back); `broken.BrokenReport` skips all-broken batches and prints the count and names at the end of the
# epoch.

# %% slideshow={"slide_type": "subslide"}
# the dataset and the collate run in the worker processes
show_code(broken.SafeImageFolder, broken.collate_drop_broken)

# %% slideshow={"slide_type": "subslide"}
# in the training process: wraps the loader, keeps the names, reports at the end of the epoch
show_code(broken.BrokenReport.watch)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
bad_root = write_synthetic_imagefolder(config.data_dir() / "imagefolder-broken-demo", 10, 2, size=64)
good_file = sorted((bad_root / "train" / "ants").glob("*.jpg"))[0]
planted = broken.plant_broken(bad_root / "train" / "bees", good_file)

# %% slideshow={"slide_type": "subslide"}
safe = broken.SafeImageFolder(bad_root / "train", transform=worker_data.ResizeToTensor(32))
loader = DataLoader(safe, batch_size=4, num_workers=2, collate_fn=broken.collate_drop_broken)
report = broken.BrokenReport()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the workers' own warnings go to their stderr
    used = sum(len(y) for _, y in report.watch(loader))
print(f"{len(safe)} files, {used} images used, {len(report.dropped)} dropped")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# A DataLoader with `num_workers=0` adds loading to every step; workers overlap loading with the step and
# with each other, up to the number of free cores, at the price of a start-up per epoch (`persistent_workers`
# removes it after the first). A prefetch thread gives the same overlap without processes when decoding
# releases the GIL; a prefetcher process gives it without the GIL, at the price of a fork and shared memory.
# Workers copy any dataset held as many Python objects; keep samples in arrays or memmaps. Collate uint8 and convert the whole batch
# once, on the device (apex's fast collate): the float batch is written once, not twice, and the batch
# that travels is a quarter of the bytes. Seed RNGs the dataset owns per worker, and drop broken samples in collate with a report, never silently. This run's figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
print(f"num_workers=0: an epoch of {n_batches} batches took {base['wall_s']:.2f} s, "
      f"of which {n_batches * step_ms / 1000:.2f} s of steps ({step_ms} ms each)")
print(f"num_workers=2 over 0: {measure.median(ladder_ratios):.2f}x img/s (95 % interval {ladder_low:.2f} to "
      f"{ladder_high:.2f} over {len(ladder_ratios)} rounds); {ladder_table.parallelism['num_workers=2']:.2f} batches "
      "loading at once")
for label in ["ThreadPrefetcher", "ProcessPrefetcher"]:
    print(f"{label} over the plain loop: {pre_table.img_per_s[label] / pre_table.img_per_s.iloc[0]:.2f}x img/s")
print(f"__getitems__ over __getitem__ + collate: {measured_getitems:.2f}x per batch")
print(f"fast collate over the default path: {figures['fast_collate_speedup']:.2f}x per batch; the batched "
      f"gather over fast collate: {figures['batched_over_fast_collate']:.2f}x")

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures.update({f"ladder_img_per_s_{n}": measure.median(v) for n, v in ladder_img_per_s.items()})  # medians
figures.update(measure.interval_figures("workers2_over_workers0", ladder_ratios))  # per round, with its interval
ladder_by_n = dict(zip(ladder_counts, ladder_rows))  # the ladder's rows, medians over rounds, by num_workers
best_n = max(ladder_counts, key=lambda n: ladder_by_n[n]["img_per_s"])
figures.update({"best_num_workers": best_n, "img_per_s_best": ladder_by_n[best_n]["img_per_s"],
                "img_per_s_workers0": ladder_by_n[0]["img_per_s"], "speedup_best_vs_0": measure.ratio(ladder_img_per_s, best_n, 0),
                "wait_share_workers0": ladder_by_n[0]["wait_share"], "wait_share_best": ladder_by_n[best_n]["wait_share"]})
figures.update({"workers2_parallelism": ladder_table.parallelism["num_workers=2"], "record_us_per_event": per_event * 1e6,
                "thread_prefetch_speedup": pre_table.img_per_s["ThreadPrefetcher"] / pre_table.img_per_s.iloc[0],
                "process_prefetch_speedup": pre_table.img_per_s["ProcessPrefetcher"] / pre_table.img_per_s.iloc[0],
                "getitems_predicted_speedup": predicted_getitems,
                "getitems_speedup": get_table.iloc[0, 0] / get_table.iloc[1, 0]})
figures.update({f"pss_mb_{kind.split()[0]}_w{w}": v for w, row in pss.iterrows() for kind, v in row.items()})
most = mem[mem.num_workers == mem.num_workers.max()].set_index("kind")  # the most workers measured
figures.update({
    "list_copy_share_per_worker": float((most.workers_uss_mb["list of objects"] - most.workers_uss_mb["numpy array"])
                                        / (memory_mb * most.num_workers.iloc[0])),
    "broken_images_dropped": float(sorted(report.dropped) == sorted(map(str, planted)) and used == len(safe) - len(planted)),
    "seed_worker_fixes_rng": float(random_rows[0][1] > 0 and random_rows[1][1] == 0),
    "thread_prefetch_overlap_share": timeline.overlap_share(pre_tls["ThreadPrefetcher"])})
path = measure.save_results("07_dataloader_anatomy", figures, rows=ladder_rows + knob_rows + pre_rows + get_rows + mem_rows,
                           knobs={"px": px, "batch_size": batch_size, "step_ms": step_ms, "depth": depth,
                                  "memory_mb": memory_mb, "memory_workers": memory_workers,
                                  "main_threads": main_threads, "images": len(dataset), "collate_rounds": collate_rounds,
                                  "ladder_rounds": ladder_rounds}, repeats=1)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# Seed 002 claims that workers read batches in parallel, that a queue lets loading overlap the model, that a
# dataset copied into each worker wastes memory, and that collate can discard broken images. The compared cell
# states what holds with a wide margin on a busy machine: under `fork` each worker holds, beyond what it holds
# with the numpy array, a large share of a dataset (the registry's threshold) of private memory (USS) with the
# list of objects; the planted broken files are all reported and only they are dropped; a dataset-owned RNG
# repeats across workers until `seed_worker`; and the plain loop's epoch lasts at least its steps, `step_ms`
# each. The timing claims (two workers load faster than none, judged by the interval of the per-round ratio;
# they load more than one batch at once; fast collate beats the default collate per batch; the prefetchers load during most of the step time) are printed in the
# cell after it, whose output depends on the run.

# %% slideshow={"slide_type": "subslide"}
if multiprocessing.get_start_method() == "fork":
    claims.check("list_copy_share_per_worker", figures)
else:
    print("copy-on-read check needs the fork start method; this machine uses", multiprocessing.get_start_method())
claims.check("broken_images_dropped", figures)
claims.check("seed_worker_fixes_rng", figures)
print("num_workers=0: the epoch lasts at least batches x step_ms:", base["wall_s"] >= n_batches * step_ms / 1000)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
claims.check("workers2_over_workers0", figures)  # timing claims: this cell's output depends on the run
claims.check("workers2_parallelism", figures)
claims.check("thread_prefetch_overlap_share", figures)
claims.check("fast_collate_speedup", figures)
print("ProcessPrefetcher overlaps the step (> 50 % of step time):", timeline.overlap_share(pre_tls["ProcessPrefetcher"]) > 0.5)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each solution runs at the notebook's scale with fresh names, so the cells above keep their results.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Set `step_ms = 100` in the defaults block and re-run section 2. At which `num_workers` does the wait
# share fall to nearly zero, and why does adding workers beyond that change nothing? Look at the wait after the
# first batch and at `wall_s`, and compare `wall_s` with the number of batches times the step.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex1_step_ms = 100  # the exercise's step (the defaults block keeps its own for the cells above)
# one round of section 2's ladder: the wait shares answer this, not a ratio's verdict
ex1_rows, ex1_tls, _ = interleaved_ladder(dataset, ladder_counts, batch_size, ex1_step_ms, 1)
for row in ex1_rows:
    ex1_waits = ex1_tls[row["config"]].frame().query("stage == 'wait' and batch > 0").seconds.sum()
    row["wait_after_first"] = ex1_waits / row["wall_s"]
    print(f"{row['config']}: waits {row['wait_share']:.0%} of the epoch, {row['wait_after_first']:.0%} after the "
          f"first batch; epoch {row['wall_s']:.2f} s, steps alone {row['batches']} x {ex1_step_ms} ms")
ex1_first = next((r["config"] for r in ex1_rows if r["wait_after_first"] < 0.1), "none of them")
print(f"wait after the first batch under 10 % first at: {ex1_first}; "
      "once loading keeps up, the step sets the pace and more workers only fill the queue")
# every value of the ladder ran a whole ladder epoch (the wait shares come from its timeline, not from a sleep)
ex1_batches = ladder_table.batches.iloc[0]  # section 2's ladder epoch
assert ex1_rows and len(ex1_rows) == len(ladder_counts) and all(r["batches"] == ex1_batches for r in ex1_rows), ex1_rows
# with the most workers, loading a batch (tens of ms, section 2) keeps well ahead of a 100 ms step
assert ex1_rows[-1]["wait_after_first"] < 0.25, ex1_rows[-1]

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Hold the rows of section 6 as lists of Python floats (`worker_data.FloatListRows`, one `r.tolist()` per
# row) instead of `bytes`. How much larger is the dataset in memory, and how much private memory do two workers
# gain over the numpy array? Look at the size ratio and at `workers_uss_mb`.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
import sys

ex2_array = worker_data.make_rows(4)  # 4 MB as float32 rows: small, since the float lists are 8x larger
ex2_sets = {"numpy array": worker_data.ArrayRows(ex2_array), "list of floats": worker_data.FloatListRows(ex2_array)}
ex2_row = ex2_sets["list of floats"].rows[0]
ex2_list_mb = len(ex2_array) * (sys.getsizeof(ex2_row) + len(ex2_row) * sys.getsizeof(1.0)) / 2**20
ex2_mem = {kind: worker_data.worker_memory(ds, 2) for kind, ds in ex2_sets.items()}
ex2_extra = ex2_mem["list of floats"]["workers_uss_mb"] - ex2_mem["numpy array"]["workers_uss_mb"]
print(f"dataset: {ex2_array.nbytes / 2**20:.0f} MB as an array, {ex2_list_mb:.0f} MB as lists of floats "
      f"({ex2_list_mb * 2**20 / ex2_array.nbytes:.1f}x): a float object is 24 bytes plus an 8-byte pointer")
print(f"2 workers' private memory (USS) beyond the array's: {ex2_extra:.0f} MB "
      f"({multiprocessing.get_start_method()}; copy-on-read needs fork)")
if multiprocessing.get_start_method() == "fork":
    assert ex2_extra > 0.2 * ex2_list_mb, "under fork, reading the floats should copy a good share of them"
assert ex2_list_mb > 4 * ex2_array.nbytes / 2**20

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3.** Start the workers with `spawn`: run section 3's `persistent_workers` measurement with
# `multiprocessing_context="spawn"` added to the loader's keywords (one worker keeps it short). How long does
# the first batch take now, and what does `persistent_workers` save? Compare the first batch of epoch 1 (a fresh
# interpreter imports torch and unpickles the dataset) with epoch 2's, and with `fork`'s from section 3.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex3_spawn = epoch_starts(dataset, 1, batch_size, step_ms, True, multiprocessing_context="spawn")
ex3_fork = persist["persistent_workers=True"]
print(f"spawn, persistent: first batch of epoch 1 after {ex3_spawn[0]:.2f} s, of epoch 2 after {ex3_spawn[1]:.3f} s")
print(f"fork (section 3): epoch 1 {ex3_fork[0]:.3f} s, epoch 2 {ex3_fork[1]:.3f} s")
print(f"persistent_workers saves about {ex3_spawn[0] - ex3_spawn[1]:.2f} s per epoch under spawn "
      f"and {ex3_fork[0] - ex3_fork[1]:.3f} s under fork")
assert ex3_spawn[1] < 0.5 * ex3_spawn[0], "epoch 2 should not pay spawn's interpreter start again"

# %% [markdown] slideshow={"slide_type": "-"}
# **4.** Set `main_threads = os.cpu_count()` in the defaults block and re-run sections 1 and 4. How long does
# the `collate` stage take now with `num_workers=0`, and what happens to it inside the prefetch thread? Look at
# the median collate time per batch against section 1's.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex4_threads = os.cpu_count()
with measure.torch_threads(ex4_threads):  # the defaults' value again after the block, for the cells below
    ex4_rows, ex4_tls = sweep(dataset, {
        "num_workers=0": {"num_workers": 0},
        "ThreadPrefetcher": {"num_workers": 0, "wrap": lambda dl: prefetch.ThreadPrefetcher(dl, depth=depth)},
    }, batch_size, step_ms)
ex4_collate_ms = {label: tl.frame().query("stage == 'collate'").seconds.median() * 1e3 for label, tl in ex4_tls.items()}
ex4_base_ms = base_tl.frame().query("stage == 'collate'").seconds.median() * 1e3
print(f"collate per batch with {main_threads} thread(s), section 1: {ex4_base_ms:.3f} ms")
for label, ms in ex4_collate_ms.items():
    print(f"{label} with {ex4_threads} threads: {ms:.3f} ms (one epoch's median: single run)")
# one epoch per setting decides nothing on a busy machine: record num_workers=0 epochs with each thread count in
# the same interleaved rounds, and read the per-round ratio of their median collate times with its interval
def ex4_epoch_collate_ms(threads):
    """Return the median collate time (ms) of one num_workers=0 epoch run with `threads` torch threads."""
    with measure.torch_threads(threads):
        _, tl = record_config(dataset, {"num_workers": 0}, batch_size, step_ms)
    return tl.frame().query("stage == 'collate'").seconds.median() * 1e3


ex4_counts = sorted({main_threads, ex4_threads})
ex4_ms = {t: [] for t in ex4_counts}
measure.interleaved({t: partial(lambda t: ex4_ms[t].append(ex4_epoch_collate_ms(t)), t) for t in ex4_counts},
                    ladder_rounds, warmup=0, shuffle=True)
if len(ex4_counts) > 1:
    ex4_v = measure.verdict([a / b for a, b in zip(ex4_ms[ex4_threads], ex4_ms[main_threads])], (0.9, 1.1))
    ex4_word = {"met": "no clear change (within 10 %)"}.get(ex4_v.word, "a tie with the noise")
    if ex4_v.word == "missed":
        ex4_word = "slower with more threads" if ex4_v.median > 1 else "faster with more threads"
    print(f"collate in a num_workers=0 epoch, {ex4_threads} threads over {main_threads}: {ex4_v}: {ex4_word}")
assert torch.get_num_threads() == main_threads and len(ex4_rows) == 2 and all(r["batches"] == n_batches for r in ex4_rows)
assert max(max(v) for v in ex4_ms.values()) < step_ms, ex4_ms  # a collate is a slice of a batch's load, under a step

# %% [markdown] slideshow={"slide_type": "-"}
# **5.** Wrap a `DataLoader(dataset, num_workers=1)` in `ProcessPrefetcher` and compare it with
# `num_workers=2`: this is seed 002's "sacrifice one loader process". Which one uses two cores better, and
# why? Look at `img_per_s`, `wait_share` and `parallelism` (batches being loaded at once).

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex5_configs = {
    "num_workers=2": {"num_workers": 2},
    "ProcessPrefetcher over num_workers=1": {"num_workers": 1, "wrap": lambda dl: ProcessPrefetcher(dl, depth=depth)},
}
ex5_runs = {label: [] for label in ex5_configs}  # one epoch of each per round, in a new order each round
measure.interleaved({label: partial(lambda lb: ex5_runs[lb].append(record_config(dataset, ex5_configs[lb],
                                                                               batch_size, step_ms)), label)
                     for label in ex5_configs}, ladder_rounds, warmup=0, shuffle=True)
ex5_table = pd.DataFrame({label: {k: measure.median([row[k] for row, _ in runs]) for k in
                                  ("img_per_s", "wait_share", "first_batch_s", "parallelism")}
                          for label, runs in ex5_runs.items()}).T
print(ex5_table.round(3).to_string(), f"\n(medians over {ladder_rounds} rounds)")
ex5_rates = {label: [row["img_per_s"] for row, _ in runs] for label, runs in ex5_runs.items()}
ex5_v = measure.verdict(measure.ratios(ex5_rates, "num_workers=2", "ProcessPrefetcher over num_workers=1"), 1.0)
print("num_workers=2 over the ProcessPrefetcher, img/s:", ex5_v, "->", {
    "met": "two workers use the cores better", "missed": "the prefetcher uses the cores better"}.get(ex5_v.word, "a tie"))
print("the prefetcher process only forwards batches: one worker decodes, so about one batch loads at a time")
assert {len(runs) for runs in ex5_runs.values()} == {ladder_rounds}
assert {tl.samples for runs in ex5_runs.values() for _, tl in runs} == {len(dataset)}
# one worker loads one batch at a time, whatever forwards its batches
assert ex5_table.loc["ProcessPrefetcher over num_workers=1", "parallelism"] <= 1.02, ex5_table
