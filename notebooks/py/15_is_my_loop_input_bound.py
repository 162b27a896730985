# %% [markdown] slideshow={"slide_type": "slide"}
# # 15 · Is my loop input-bound?
#
# | | |
# |---|---|
# | **Question** | Is my training loop waiting for data, how much would it gain if loading were free, and which knob should I turn first? |
# | **Seeds** | all of them, and beyond: seed 002's timelines, seed 003's load-only vs full-step tables, SPDL's `CacheDataLoader` |
# | **GPU** | optional: without one, the image loops use notebook 07's stand-in step (it sleeps, leaving the CPU free as a GPU step does), the Otto MLP trains on the CPU, and section 9's ResNet-50 and nvJPEG give way to a small stand-in model and Pillow |
# | **Optional** | libjpeg-turbo: without it Pillow decodes the JPEG loops more slowly |
# | **Run time** | <!-- run-time --> workshop ~1.8 min (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# Notebooks 01-14 each turned one knob. Before turning any, an engineer needs to know whether loading is the
# problem at all (further reading from seed 002: [Solving Machine Learning Performance Anti-Patterns: a Systematic Approach](https://paulbridger.com/posts/nsight-systems-systematic-optimization)). `fastloops_helpers.diagnose(loader, step)` answers it from measurements of your own loop:
#
# - it runs `warmup + batches` iterations of `loader -> step`, stamping the time spent in `next(loader)` (the
#   **wait**) and in the step (CUDA synchronised), and restarting epochs as training does;
# - for a torch `DataLoader` it runs a copy rebuilt around the same dataset, sampler, collate function and
#   knobs, with notebook 07's recorder around the dataset and the collate, so the workers report when they
#   fetched and collated each batch: your dataset code is not changed;
# - it keeps a few batches and **replays** the step alone over them: the throughput with free loading. The
#   ratio of the two is the **headspace** (what SPDL's `CacheDataLoader` estimates);
# - it names a verdict and ranks the knobs by the gain it predicts from the figures it measured.
#
# Section 1 shows the code that takes these measurements; each later section shows the loop it diagnoses.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader

from fastloops_helpers import CUDAPrefetcher, ThreadLoader, ThreadPrefetcher, config, measure
from fastloops_book import bench, claims
from fastloops_book.source import show_code
from fastloops_helpers.data import memmap
from fastloops_helpers.data import otto_csv as otto
from fastloops_helpers.data.jpeg_folder import ImageFolder, synthetic_imagefolder
from fastloops_helpers.experiments import imagefolder as imf
from fastloops_helpers.experiments.training import train_step
from fastloops_helpers.load import transforms as T
from fastloops_helpers.load.batch_loader import BatchLoader
from fastloops_helpers.data.device_decode import DecodeResizeCrop, device_jpeg_loader
from fastloops_helpers.doctor import advice, diagnosis, timed_loop
from fastloops_helpers.measure import plots, timeline
from fastloops_helpers.models import MLP

print(config.describe().split(", data=")[0])
print(measure.hardware_line())
device = config.device()
cores = len(os.sched_getaffinity(0))  # how many workers can run at once
rows, figures = [], {}

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
batches = config.size("diagnose.batches")          # measured batches per loop: more gives steadier shares, costs time
warmup = config.size("diagnose.warmup")            # batches run first and left out (worker start-up, cold caches)
replay = config.size("diagnose.replay")            # cached batches replayed through the step alone: steadier headspace, more memory
step_ms = config.size("anatomy.step_ms")           # the stand-in GPU step of the image loops: longer hides more loading
batch_size = config.size("imagefolder.batch_size")  # images per batch in the image loops: larger amortises per-batch costs
otto_rows = config.size("otto.rows")               # rows of the synthetic Otto table: more gives longer epochs
otto_batch_size = config.size("otto.batch_size")   # rows per batch in the Otto loop (the seed's)
main_threads = 1                                   # torch threads in the main process, as DataLoader sets in each worker
jpeg_batch = config.size("jpeg.batch_size")        # section 9's images per ResNet-50 step: larger, a longer step to hide loading
jpeg_rounds = config.size("jpeg.rounds")           # section 9's rounds of blocks per loader: more, a narrower interval
torch.set_num_threads(main_threads)                # (more: collate's torch.stack splits over threads that fight the workers)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. What `diagnose` times
#
# The loop below (`fastloops_helpers.doctor.timed_loop`) is the whole measurement. Each batch gets four clock reads: before `next(it)`, after it (the
# **wait**: the loader's time and nothing else), after the optional `copy` to the device, and after the step
# (CUDA synchronised first, so the clock sees the GPU's work, not only its launch). When the loader runs out,
# `iter` starts a new epoch, as training does, and the first batch's wait includes that restart. The shares
# are sums over the measured batches divided by their wall time; the warm-up batches are run but left out.

# %% slideshow={"slide_type": "subslide"}
show_code(timed_loop.run_loop, timed_loop._epoch, timed_loop._copy_and_step, timed_loop._pause)  # the loop diagnose runs

# %% [markdown] slideshow={"slide_type": "subslide"}
# `diagnose` wraps that loop. A `DataLoader` is first rebuilt around an instrumented copy of its dataset and
# collate (`instrumented`), so its workers stamp each fetch and collate. Every `replay` live batches,
# `_pause` runs the step alone over the batches kept in memory (`_replay_once`), so a slow spell of the machine
# hits the live loop and the replay alike; `timed_loop.replay` adds passes at the end until there are `repeat`, and takes
# the median: the loop's speed if loading were free. The batches a loader had ready after a pause came without
# a wait, so the shares leave them out. A step slower in the loop than alone does not mean the machine was busy:
# loading in the step's own thread takes the step's caches, and that is the loop's own doing. So `diagnose` also
# reads the CPU time every other process took during the live and replay passes (`measure/processes.py`). It
# says "inconclusive: the machine was busy" only when those processes together took at least `NEIGHBOUR_CORES`
# cores and, besides, either the step's time per batch in the loop and alone differ by more than `BUSY_RATIO`
# or the machine had less than `SPARE_CORES` cores spare; it then names the busiest neighbours by name and pid,
# rather than print a headspace that only measures them. `_diagnosis` turns the rows into shares, percentiles
# and the advice (`fastloops_helpers.doctor.diagnosis`).

# %% slideshow={"slide_type": "subslide"}
show_code(diagnosis.diagnose, timed_loop.replay, timed_loop._replay_once)  # its entry point

# %% slideshow={"slide_type": "-"}
from fastloops_helpers import diagnose  # the package's, shown above

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. The verdict, on loops whose costs we know
#
# The rules are plain thresholds on the two measured figures (`fastloops_helpers.doctor.advice`):

# %% slideshow={"slide_type": "-"}
for name in ("INPUT_BOUND_WAIT", "INPUT_BOUND_HEADSPACE", "COMPUTE_BOUND_WAIT", "COMPUTE_BOUND_HEADSPACE"):
    print(f"{name} = {getattr(advice, name)}")

# %% slideshow={"slide_type": "subslide"}
show_code(advice.verdict)  # the verdict diagnose prints

# %% [markdown] slideshow={"slide_type": "-"}
# Two loops whose costs are known by construction: a loader that sleeps before each batch of zeros, and the
# stand-in step of notebook 07, which sleeps too (a GPU step leaves the CPU free in the same way).

# %% slideshow={"slide_type": "subslide"}
show_code(timeline.gpu_like_step)  # notebook 07's stand-in GPU step, used by every loop below


# %% slideshow={"slide_type": "-"}
# a loader whose cost is known
class SleepyLoader:
    """Yield `n` batches of `batch_size` zeros, each after sleeping `load_ms`: a loader whose cost is known."""

    def __init__(self, load_ms: float, n: int = 1000, batch_size: int = 32) -> None:
        self.load_s, self.n, self.batch_size = load_ms / 1000, n, batch_size

    def __iter__(self) -> Any:
        for _ in range(self.n):
            timeline.gpu_like_step(self.load_s)(None)  # sleeps: the CPU stays free, as an I/O-bound loader leaves it
            yield torch.zeros(self.batch_size, 4)


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction.** A loader that sleeps 20 ms per batch in front of a 2 ms step waits 20 / (20 + 2) = 91 % of
# the time, and the step alone runs (20 + 2) / 2 = 11x faster than the loop: input-bound. A loader that
# returns at once in front of a 20 ms step waits about 0 % and has a headspace of about 1x: compute-bound.
# Sleeping leaves the CPU free, so a busy machine can stretch these figures only a little.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
from fastloops_helpers.measure.timeline import gpu_like_step

slow_loader = diagnose(SleepyLoader(load_ms=20), gpu_like_step(0.002), batches=20, warmup=2, replay=8)
fast_loader = diagnose(SleepyLoader(load_ms=0), gpu_like_step(0.020), batches=20, warmup=2, replay=8)
print("20 ms loader, 2 ms step:", slow_loader.verdict)
print("instant loader, 20 ms step:", fast_loader.verdict)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for label, d, wait, head in (("20 ms loader", slow_loader, 20 / 22, 22 / 2), ("instant loader", fast_loader, 0.0, 1.0)):
    _ = measure.predicted(f"{label}, wait share (+-10 points)", wait - 0.1, min(wait + 0.1, 1), d.wait_share,
                          fmt=".0%")
    _ = measure.predicted(f"{label}, headspace (-30 %/+50 %)", 0.7 * head, 1.5 * head, d.headspace, "x")
    print("   ", d)

# %% [markdown] slideshow={"slide_type": "-"}
# The measured wait is a little above the sleep: `time.sleep` oversleeps by a fraction of a millisecond, and
# the loop's own Python work between batches counts as neither wait nor step. The one-line `repr` names the
# verdict and the first knob; `.table()`, `.advice()` and `.plot()` give the rest.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. ImageFolder, per-sample decoding, no workers
#
# Notebook 09's pipeline: `DataLoader` over an `ImageFolder` that decodes each JPEG and resizes, crops, flips
# and normalises it one sample at a time, in the main process; the step is the stand-in above, `step_ms` long.

# %% slideshow={"slide_type": "subslide"}
Loop = tuple[Any, Callable[[Any], Any]]  # (loader, step): what each loop builder below returns


def image_dataset(prepared: imf.Prepared) -> ImageFolder:
    """Return notebook 09's train split with its per-sample pipeline (decode, resize, crop, flip, normalise)."""
    return ImageFolder(prepared.folder / "train", transform=imf.sample_transform("train"))


def image_loop(
    data: ImageFolder, batch_size: int, num_workers: int, step_ms: float, persistent_workers: bool = False
) -> Loop:
    """Return notebook 09's per-sample loop: DataLoader over ImageFolder, and a stand-in GPU step of `step_ms`."""
    loader = DataLoader(
        data,
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        persistent_workers=persistent_workers and num_workers > 0,
    )
    return loader, timeline.gpu_like_step(step_ms / 1000)  # sleeps: the CPU stays free, as under a GPU step


# %% slideshow={"slide_type": "subslide"}
show_code(ImageFolder.__getitem__)  # one sample: the loader decodes, the transform resizes, crops, flips, normalises


# %% [markdown] slideshow={"slide_type": "-"}
# **Prediction:** with a load time per batch of `L = batch_size x (one image's decode + transforms)` and a step
# of `S`, the loop does one after the other, so the wait share is `L / (L + S)` and the headspace
# `(L + S) / S`. We time one image now to fill in `L`.

# %% slideshow={"slide_type": "subslide"}
def predict(load_s: float, step_s: float, num_workers: int, cores: int) -> dict[str, float]:
    """Predict wait share and headspace: a batch takes max(step, load / parallel loaders) (load + step with none)."""
    batch_s = load_s + step_s if num_workers == 0 else max(step_s, load_s / min(num_workers, cores))
    return {"batch_s": batch_s, "wait_share": 1 - step_s / batch_s, "headspace": batch_s / step_s}


def seconds_per_image(data: ImageFolder, n: int = 8) -> float:
    """Return the median seconds to fetch one sample (decode + per-sample transforms), over the first `n`."""
    return measure.median(measure.measure(lambda: [data[i] for i in range(n)], repeat=3, warmup=1)) / n


serial, parallel = predict(0.020, 0.002, 0, cores=2), predict(0.020, 0.002, 4, cores=2)  # section 2's loop
assert abs(serial["headspace"] - 11) < 1e-9 and abs(serial["wait_share"] - 20 / 22) < 1e-9
assert abs(parallel["batch_s"] - 0.010) < 1e-9  # 4 workers on 2 cores load 2 batches at once, not 4

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
prepared = imf.prepare()  # the synthetic ImageFolder and its decoded memmap (written once)
images = image_dataset(prepared)
per_image = seconds_per_image(images)
load_s, step_s = batch_size * per_image, step_ms / 1000
expect0 = predict(load_s, step_s, num_workers=0, cores=cores)
print(f"one image {per_image * 1e3:.2f} ms x {batch_size} = L {load_s * 1e3:.0f} ms per batch, S {step_ms} ms")


# %% slideshow={"slide_type": "subslide"}
def run_diagnose(loop: Loop, batches: int, warmup: int, replay: int) -> diagnosis.Diagnosis:
    """Diagnose one loop with these batch counts (warnings about worker counts silenced)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(worker processes|pin_memory).*")
        return diagnose(*loop, batches=batches, warmup=warmup, replay=replay)


def row(name: str, d: diagnosis.Diagnosis) -> dict[str, Any]:
    """Return one row of the takeaway's table: a loop's figures, verdict and first knob."""
    top = d.recommendations[0] if d.recommendations else None
    return {"loop": name, "verdict": d.verdict, "samples_per_s": d.samples_per_s, "wait_share": d.wait_share,
            "headspace": d.headspace, "first_batch_s": d.first_batch_s, "batch_p50_ms": d.batch_p50_s * 1e3,
            "batch_p95_ms": d.batch_p95_s * 1e3, "pss_total_mb": d.pss_mb["total"],
            "first_knob": top.knob if top else "", "first_knob_gain": top.gain if top else 1.0}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
folder0 = run_diagnose(image_loop(images, batch_size, 0, step_ms), batches, warmup, replay)
rows.append(row("ImageFolder, 0 workers", folder0))
assert folder0.batches == batches  # the defaults reached diagnose: warm-up batches left out
wait0, head0 = expect0["wait_share"], expect0["headspace"]
_ = measure.predicted("wait share (+-10 points)", wait0 - 0.1, min(wait0 + 0.1, 1), folder0.wait_share, fmt=".0%")
_ = measure.predicted("headspace (-30 %/+50 %)", 0.7 * head0, 1.5 * head0, folder0.headspace, "x", ".2g")
folder0.table().round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = folder0.plot(title="ImageFolder, num_workers=0")
plots.save(fig, "15_is_my_loop_input_bound-imagefolder0")
plt.show()
folder0.advice()

# %% [markdown] slideshow={"slide_type": "subslide"}
# The main lane alternates red (waiting while this process decodes: the fetch lane `main: load`) and cyan
# (the step); nothing overlaps. The prediction misses where the timed image is not typical (the generator varies
# image sizes), where the page cache is cold for the first epoch, and where epochs restart inside the measured
# batches (each restart shuffles and rebuilds the iterator). The knobs are ranked by predicted gain, capped at
# the headspace: decoding once into a memmap removes most of `L` (notebook 09), workers divide it by the
# number of cores (notebook 07).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. The same loop with two workers
#
# **Prediction:** two workers decode two batches at once on `min(2, cores)` cores, so a steady batch takes
# `max(S, L / 2)`. Without `persistent_workers`, every epoch forks the workers again, and its first batch waits
# for a worker to start and decode a whole batch: so we compare the prediction with the *median* batch, which
# leaves out the few epoch starts, and print what those starts cost.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
expect2 = predict(load_s, step_s, num_workers=2, cores=cores)
folder2 = run_diagnose(image_loop(images, batch_size, 2, step_ms), batches, warmup, replay)
rows.append(row("ImageFolder, 2 workers", folder2))
steady_ms = expect2["batch_s"] * 1e3
_ = measure.predicted(f"median batch (max(S, L/2) = {steady_ms:.1f} ms, -30 %/+50 %)", 0.7 * steady_ms,
                      1.5 * steady_ms, folder2.batch_p50_s * 1e3, "ms", ".1f")
print(f"an epoch start: {folder2.epoch_start_s * 1e3:.0f} ms; waiting overall: {folder2.wait_share:.0%}, "
      f"headspace {folder2.headspace:.2g}x")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = folder2.plot(title="ImageFolder, num_workers=2")
plots.save(fig, "15_is_my_loop_input_bound-imagefolder2")
plt.show()
folder2.advice()

# %% [markdown] slideshow={"slide_type": "subslide"}
# The workers' lanes overlap each other and the step, as in notebook 07. The PSS row of `.table()` adds up
# the memory of the main process and its workers; PSS divides shared pages among the processes that map them,
# so the sum counts each page once. On a machine with few cores, the workers, the main loop and the rest of
# the machine share them, so the measured wait lies above the prediction; the larger gaps at epoch starts are
# the workers' start-up, which `persistent_workers=True` pays only once.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. memmap + BatchLoader: decoded once, transformed per batch
#
# Notebook 09's fast path: the images were decoded and resized once into a memmap; each batch is one gather
# plus one batched crop, flip and normalise, in the main process (no workers), before the same step.

# %% slideshow={"slide_type": "-"}
def memmap_loop(train: memmap.ImageData, batch_size: int, step_ms: float) -> Loop:
    """Return notebook 09's fast loop: BatchLoader over the decoded memmap, batched transforms, the same step."""
    fields = {"images": train.images, "labels": train.labels}  # BatchLoader gathers each with one np.take
    loader = BatchLoader(fields, batch_size, shuffle=True, seed=0, transform=imf.batch_transform("train"))
    return loader, timeline.gpu_like_step(step_ms / 1000)


# %% slideshow={"slide_type": "subslide"}
show_code(BatchLoader._iter_gathered)  # the gather: one take of a chunk of rows, cut into batches


# %% [markdown] slideshow={"slide_type": "-"}
# **Prediction:** the load per batch is now a gather and a few vectorised passes over
# `batch_size x 3 x 256 x 256` bytes, much less than the decode above, so the wait share falls by about
# `L / L_memmap`; we time one batch of the loader to fill it in.

# %% slideshow={"slide_type": "subslide"}
def seconds_per_batch(loader: Any, repeat: int = 3) -> float:
    """Return the median seconds `loader` takes to yield one batch (after one untimed batch)."""
    its = [iter(loader)]  # clearing the list frees the iterator (and its workers), even after an error
    try:
        return measure.median(measure.measure(lambda: next(its[0]), repeat=repeat, warmup=1))
    finally:
        its.clear()


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fast = memmap_loop(prepared.train, batch_size, step_ms)
load_memmap_s = seconds_per_batch(fast[0])
expect_mm = predict(load_memmap_s, step_s, num_workers=0, cores=cores)
mm = run_diagnose(fast, batches, warmup, replay)
rows.append(row("memmap + BatchLoader", mm))
print(f"load per batch {load_memmap_s * 1e3:.1f} ms")
wait_mm, head_mm = expect_mm["wait_share"], expect_mm["headspace"]
_ = measure.predicted("wait share (+-10 points)", wait_mm - 0.1, min(wait_mm + 0.1, 1), mm.wait_share, fmt=".0%")
_ = measure.predicted("headspace (-30 %/+50 %)", 0.7 * head_mm, 1.5 * head_mm, mm.headspace, "x", ".2g")
mm.advice()

# %% [markdown] slideshow={"slide_type": "subslide"}
# `BatchLoader` is not a `DataLoader`, so there is no worker timeline; the wait is the main thread gathering and
# transforming. What is left of it can overlap with the step in a background thread (`ThreadPrefetcher`,
# notebook 07): numpy and torch release the GIL during the copies, so the predicted batch time is
# `max(S, L_memmap)` instead of their sum.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. The Otto MLP: in-memory rows, one `__getitem__` per sample
#
# Notebook 10's loop: a `DataLoader` with one worker over 93-float rows already in memory, `otto_batch_size`
# rows per batch, and the MLP's real training step (forward, loss, backward, Adam).

# %% slideshow={"slide_type": "-"}
# the worker imports OttoRows from the package
def otto_loop(device: torch.device, rows: int, batch_size: int) -> Loop:
    """Return notebook 10's Otto loop: a per-sample DataLoader (1 worker) and the MLP's training step."""
    X, y, _, _ = otto.load_otto(rows)
    loader = DataLoader(
        otto.OttoRows(X, y), batch_size=batch_size, shuffle=True, num_workers=1, pin_memory=device.type == "cuda"
    )
    torch.manual_seed(0)
    model = MLP(otto.NUM_FEATURES, len(otto.CLASSES)).to(device)
    step = train_step(model, torch.optim.Adam(model.parameters(), 5e-4), device)
    return loader, lambda batch: step(*batch)


# %% slideshow={"slide_type": "-"}
show_code(otto.OttoRows.__getitem__)  # one sample: a row copy, called batch_size times per batch

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction:** each sample costs a Python call, a row copy and its share of the collate, a few microseconds,
# times 1024 samples per batch: a few milliseconds of loading, as long as or longer than the MLP's step on a
# CPU. With no decoding, the cure is to fetch whole batches (notebooks 02 and 03).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
otto_d = run_diagnose(otto_loop(device, otto_rows, otto_batch_size), batches, warmup, replay)
rows.append(row("Otto MLP", otto_d))
fetch_us = otto_d.figures.fetch_per_sample_s * 1e6
print(f"fetch {fetch_us:.1f} us per sample (threshold for 'in memory': {advice.IN_MEMORY_SAMPLE_S * 1e6:.0f} us), "
      f"step alone {otto_d.figures.step_s * 1e3:.2f} ms per batch")
print(otto_d)
otto_d.advice()


# %% [markdown] slideshow={"slide_type": "subslide"}
# With a CPU step, the worker and the step compete for the cores, so the headspace can exceed what the wait
# share alone suggests (`1 / (1 - wait)`): the step runs faster alone than next to a busy worker. That is why
# the verdict reads both figures.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. Headspace, measured by SPDL's `CacheDataLoader`
#
# SPDL (`spdl-core`, the `threads` extra) estimates the same figure differently: `CacheDataLoader` yields the
# first `live` batches from your loader, keeping the first few, then yields those cached batches again; the
# loop's speed in the second phase over the first is the headspace.
#
# **Prediction:** both replay the same step on batches already in memory, so the two figures agree within the
# noise of a few batches (the claims registry's range, printed below).

# %% slideshow={"slide_type": "subslide"}
def spdl_headspace(loop: Loop, live: int, cached: int, warmup: int = 2) -> dict[str, float]:
    """Return SPDL's headspace: seconds per batch while CacheDataLoader loads, over while it replays its cache.

    `live` batches come from the loader (the first `cached` of them are kept), then `cached` batches are
    replayed from memory; both phases run the step. Needs spdl-core (the `threads` extra).
    """
    from spdl.dataloader import CacheDataLoader

    loader, step = loop
    if hasattr(loader, "__len__") and len(loader) < live:
        raise ValueError(f"live={live} batches, but the loader has {len(loader)} per epoch: CacheDataLoader "
                         f"would start replaying early; use live <= {len(loader)}")
    wrapped = CacheDataLoader(loader, num_caches=cached, return_caches_after=live, stop_after=live + cached)
    ends = [measure.now()]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(worker processes|pin_memory).*")
        for batch in wrapped:
            step(batch)
            measure.sync()
            ends.append(measure.now())
    per_batch = np.diff(ends)
    live_s, replay_s = float(per_batch[warmup:live].mean()), float(per_batch[live:].mean())
    return {"live_batch_s": live_s, "replay_batch_s": replay_s, "headspace": live_s / replay_s}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
try:
    import spdl.dataloader  # noqa: F401
    have_spdl = True
except ImportError:
    have_spdl = False
    print("spdl-core is not installed (pip install -e '.[threads]'): skipping the comparison")
if have_spdl:
    fresh = image_loop(images, batch_size, 0, step_ms)
    live = min(len(fresh[0]), batches)
    spdl = spdl_headspace(fresh, live=live, cached=min(replay, live))
    print(f"headspace: diagnose {folder0.headspace:.2g}x, CacheDataLoader {spdl['headspace']:.2g}x")
    _ = measure.predicted("headspace, CacheDataLoader over diagnose (+-30 %)", 1 / 1.3, 1.3,
                          spdl["headspace"] / folder0.headspace, "x", ".2f")

# %% [markdown] slideshow={"slide_type": "-"}
# They can differ where the two runs see different batches (SPDL's live phase is one epoch's first batches,
# diagnose's spans epochs, each restart included) and where the cached phase is short. `CacheDataLoader` gives
# only the ratio; `diagnose` adds the wait share, the timeline, memory and the knob.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 8. Your own loop
#
# Replace the two lines below by your loader and your step (any iterable; any callable taking a batch). Pass
# `copy=partial(move_to, device=device, non_blocking=True)` to time the host-to-device copy apart from the step.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
my_loader = SleepyLoader(load_ms=5, batch_size=64)  # your DataLoader, BatchLoader, generator...
my_step = gpu_like_step(0.004)                      # your training step: def step(batch): ...
mine = diagnose(my_loader, my_step, batches=batches, warmup=warmup, replay=replay)
print(mine)
mine.advice()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 9. JPEGs into a ResNet-50: can the cores feed it, and can the GPU's decoder?
#
# The question a GPU machine asks next: decoding is the bottleneck, what now? Three loaders feed the same
# training step, ResNet-50 in bfloat16 with channels-last memory on a GPU (on a CPU, a stand-in: one strided
# convolution and a linear head, through the same code):
# - `DataLoader, N workers`: ImageFolder's per-sample decode, resize and crop in N = cores worker processes;
# - `ThreadLoader, 2N threads`: the same per-sample work on threads of this process (notebook 14), copied to
#   the GPU through pinned buffers (`CUDAPrefetcher`);
# - `device decode, N threads`: `device_jpeg_loader`, whose threads only read the files' bytes; its collate
#   decodes the whole batch on the GPU with nvJPEG (`decoders.batch_decoder`; Pillow stands in on a CPU), then
#   resizes and crops there.
#
# Every loader resizes the shorter side to 256 and crops the centre 224. The wait is timed as notebook 11 times
# it (`measure.steps.compare_steps`): blocks of consecutive steps behind a fresh iterator, marked by CUDA events
# on the stream on a GPU and by the host's clock on a CPU, taking turns in a new order every round.

# %% slideshow={"slide_type": "subslide"}
show_code(DecodeResizeCrop, device_jpeg_loader)


# %% slideshow={"slide_type": "subslide"}
def jpeg_model(device: torch.device) -> tuple[str, torch.nn.Module]:
    """Return (name, model): torchvision's ResNet-50 on a GPU; on a CPU a stand-in of the same input and output."""
    if device.type == "cuda":
        from torchvision.models import resnet50

        return "resnet50", resnet50(num_classes=2)
    conv = torch.nn.Conv2d(3, 16, 7, stride=4)
    return "stand_in", torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                           torch.nn.Linear(16, 2))


def jpeg_step(device: torch.device) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """Return a training step on uint8 image batches: to `device`, normalise, channels-last, bf16 autocast, SGD."""
    model = jpeg_model(device)[1].to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor(T.IMAGENET_MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(T.IMAGENET_STD, device=device).view(1, 3, 1, 1) * 255

    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        x = ((images.to(device, non_blocking=True).float() - mean) / std).contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), labels.to(device, non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


# %% slideshow={"slide_type": "subslide"}
def jpeg_loaders(folder: Path, batch: int, device: torch.device, cores: int) -> dict[str, Any]:
    """Return the three loaders of this section over `folder`, each shuffling with seed 0."""
    per_sample = ImageFolder(folder, transform=T.ValSampleTransform().precompute)  # decode, resize, crop: uint8
    threads = ThreadLoader(per_sample, batch, threads=2 * cores, shuffle=True)
    return {
        f"DataLoader, {cores} workers": DataLoader(per_sample, batch, shuffle=True, num_workers=cores,
                                                   pin_memory=device.type == "cuda"),
        f"ThreadLoader, {2 * cores} threads": CUDAPrefetcher(threads, device) if device.type == "cuda" else threads,
        f"device decode, {cores} threads": device_jpeg_loader(folder, batch, device, threads=cores, shuffle=True),
    }


def load_rate(loader: Any, device: torch.device, repeat: int) -> float:
    """Return `loader`'s images/s alone, over whole epochs (median, after one warm-up), CUDA synchronised."""
    counted = []
    seconds = measure.measure(lambda: counted.append(sum(len(x) for x, _ in loader)), repeat=repeat, warmup=1,
                              device=device)
    return counted[-1] / measure.median(seconds)


def predicted_wait(rate: float, step_s: float, batch: int, beside: bool = True) -> float:
    """Predict the share of a step spent waiting for a loader of `rate` images/s alone.

    A loader that works beside the step (workers, threads) hands over a batch every batch / rate s, so a batch
    takes max(step_s, batch / rate). One whose work runs in series with the step (`beside=False`: the device
    decode's collate, queued where the step runs) adds it: batch / rate + step_s.
    """
    load_s = batch / rate
    return max(0.0, 1 - step_s / load_s) if beside else load_s / (load_s + step_s)


assert predicted_wait(rate=100, step_s=0.5, batch=100) == 0.5  # loads in 1 s beside a 0.5 s step: waits half
assert predicted_wait(rate=400, step_s=0.5, batch=100) == 0.0  # loads in 0.25 s: never waits
assert predicted_wait(rate=400, step_s=0.75, batch=100, beside=False) == 0.25  # 0.25 s in series with 0.75 s


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction**, with its arithmetic: a step of S seconds consumes B / S images per second. A loader that
# produces R images per second alone, beside the step, hands over a batch every B / R seconds, so a batch takes
# max(S, B / R) and the loop waits a share max(0, 1 - S R / B) of it. The device decode's collate runs in series
# with the step instead (on a GPU its decode, resize and crop are queued on the step's stream), so its batch
# takes B / R + S and it waits (B / R) / (B / R + S) at most: at most, because on a GPU the host's part of the
# decode can run while the previous step still computes. S comes from the step on one cached batch (no loading
# at all), R from each loader's epochs alone; both are measured first, and the prediction is printed before the
# full steps run. On a CPU the loaders share the cores with the step, so the shares can come out above their
# predictions: what the CPU run shows is that the code and the arithmetic run.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
producers_max = cores  # the DataLoader's blocks take whole multiples of its workers: 2 x cores batches per block
jpeg_folder = synthetic_imagefolder(train=(2 * producers_max + 1) * jpeg_batch, val=jpeg_batch) / "train"
model_name = jpeg_model(device)[0]
loaders = jpeg_loaders(jpeg_folder, jpeg_batch, device, cores)
cached = next(iter(loaders[f"device decode, {cores} threads"]))  # one batch, where the step runs
floor_blocks = measure.steps.compare_steps({"cached batch": [cached] * 8}, lambda: jpeg_step(device), jpeg_rounds,
                                           measure.steps.Blocks(settle=2, timed=6), device)
step_s = measure.median(floor_blocks.flat()["cached batch"])
rates = {name: load_rate(loader, device, repeat=2) for name, loader in loaders.items()}
in_series = {name: name.startswith("device") for name in loaders}  # the device decode's collate: before the step
expect = {name: predicted_wait(r, step_s, jpeg_batch, not in_series[name]) for name, r in rates.items()}
print(f"{model_name}: S = {step_s * 1e3:.1f} ms per batch of {jpeg_batch} on {device} -> the step consumes "
      f"{jpeg_batch / step_s:,.0f} img/s")
for name, r in rates.items():
    load_ms = jpeg_batch / r * 1e3
    formula = (f"{load_ms:.1f} / ({load_ms:.1f} + {step_s * 1e3:.1f})" if in_series[name]
               else f"max(0, 1 - {step_s * 1e3:.1f} / {load_ms:.1f})")
    print(f"{name}: R = {r:,.0f} img/s alone, B / R = {load_ms:.1f} ms -> predicted wait share {formula} = "
          f"{expect[name]:.0%}")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
JPEG_KIND = {"DataLoader": "dataloader", "ThreadLoader": "helpers_threads", "device": "helpers_device_decode"}
jpeg_times = measure.steps.compare_steps(loaders, lambda: jpeg_step(device), jpeg_rounds,
                                         measure.steps.Blocks(settle=1, timed=1), device, desc="JPEG blocks")
jpeg_shares = jpeg_times.shares()
for name, share in jpeg_shares.items():
    low = 0.0 if in_series[name] else max(0.0, expect[name] - 0.1)  # in series: the prediction is a ceiling
    _ = measure.predicted(f"{name}: wait share (prediction +10 points{'' if in_series[name] else ', -10'})", low,
                          min(1.0, expect[name] + 0.1), share, fmt=".0%")
    kind = JPEG_KIND[name.split()[0].rstrip(",")]
    figures |= measure.interval_figures(f"jpeg_{kind}_{model_name}_wait_share", share)
best = min((k for k in figures if k.startswith("jpeg_helpers_") and k.endswith(f"{model_name}_wait_share")),
           key=figures.get)
for suffix in ("", "_ci_low", "_ci_high"):  # the best helpers' pipeline, with its interval: the target's figure
    figures[f"jpeg_helpers_best_{model_name}_wait_share{suffix}"] = figures[best + suffix]
print(f"the helpers' best JPEG pipeline here: {best} = {figures[best]:.1%}")
for line in bench.target_lines("diagnose", figures, str(device)):  # the wait's target needs a GPU
    print(line)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# Measure before you tune: the share of wall time in `next(loader)` and the step's speed on cached batches tell
# whether loading matters; the per-stage timeline tells where its time goes; the ranked knobs come from those
# figures. For JPEGs into a big model (section 9), the wait share behind each loader comes from its load-only
# rate and the step alone, predicted before the full steps run; where the GPU decodes, that work joins the
# step's stream. The four loops of this notebook, from this run:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
table = pd.DataFrame(rows).set_index("loop")
slug = {r["loop"]: r["loop"].lower().replace(", ", "_").replace(" + ", "_").replace(" ", "_") for r in rows}
figures.update({f"{kind}_{slug[r['loop']]}": r[kind] for r in rows  # e.g. wait_share_imagefolder_0_workers
                for kind in ("wait_share", "headspace", "samples_per_s")})
figures.update({"sleep20_wait_share": slow_loader.wait_share, "sleep20_headspace": slow_loader.headspace,
                "instant_wait_share": fast_loader.wait_share})
figures["diagnose_input_bound_found"] = float(rows[0]["verdict"] == "input-bound")
if have_spdl:
    figures["spdl_headspace_imagefolder0"] = spdl["headspace"]
    figures["diagnose_headspace_over_spdl_cache"] = rows[0]["headspace"] / spdl["headspace"]
used = {"batches": batches, "warmup": warmup, "replay": replay, "step_ms": step_ms, "batch_size": batch_size,
        "otto_rows": otto_rows, "otto_batch_size": otto_batch_size, "main_threads": main_threads, "cores": cores}
path = measure.save_results("15_is_my_loop_input_bound", figures, rows, knobs=used, repeats=1)
print("saved", path.name)
table.round(3)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# No seed makes a claim about `diagnose`; what this notebook checks is that the verdicts hold where the answer is
# known by construction, with wide margins (tests/test_diagnose.py checks the same; section 2 prints the
# thresholds): a loader that sleeps ten times as long as its step is input-bound, waits most of the time and has
# a large headspace; an instant loader before a long step is compute-bound and hardly waits. The claims below
# (in the registry, like every seed claim) are about the real loops, so they depend on this machine.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print("20 ms loader, 2 ms step is input-bound:", slow_loader.verdict == "input-bound")
print("  waits > 70 % and headspace > 3x:", slow_loader.wait_share > 0.7 and slow_loader.headspace > 3)
print("instant loader, 20 ms step is compute-bound:", fast_loader.verdict == "compute-bound")
print("  waits < 20 %:", fast_loader.wait_share < 0.2)

# %% slideshow={"slide_type": "subslide"}
verdicts = ("input-bound", "balanced", "compute-bound", diagnosis.BUSY)  # busy: another process took CPU time (named after it)
print("every loop got a verdict and ranked knobs:", all(r["verdict"] in verdicts or r["verdict"].startswith(diagnosis.BUSY) for r in rows), len(rows) == 4)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
claims.check("diagnose_input_bound_found", rows[0]["verdict"] == "input-bound")
if have_spdl:
    claims.check("diagnose_headspace_over_spdl_cache", figures)
else:
    claims.check("diagnose_headspace_over_spdl_cache", None, why="spdl-core is not installed (the threads extra)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each solution measures with the functions above and changes none of the notebook's variables.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Set `step_ms` to 4 times its value in the defaults block and re-run sections 3 and 4. Which loop
# changes verdict, and does the first knob change? *Look for* the wait share falling as the longer step hides
# more of the decoding, and the replayed step (`.figures.step_s`) growing with `step_ms`.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex1_step_ms = 4 * step_ms
ex1_found = {}
ex1_base = {}
for ex1_workers in (0, 2):
    # the loop's own diagnosis again, in this cell: the same run conditions as the longer step's
    ex1_before = ex1_base[ex1_workers] = run_diagnose(image_loop(images, batch_size, ex1_workers, step_ms), batches,
                                                      warmup, replay)
    ex1_after = run_diagnose(image_loop(images, batch_size, ex1_workers, ex1_step_ms), batches, warmup, replay)
    ex1_found[ex1_workers] = ex1_after
    ex1_knob = ex1_after.recommendations[0].knob if ex1_after.recommendations else "none"
    print(f"{ex1_workers} workers: step {step_ms} -> {ex1_step_ms} ms: verdict {ex1_before.verdict} -> "
          f"{ex1_after.verdict}, waits {ex1_before.wait_share:.0%} -> {ex1_after.wait_share:.0%}, first knob: {ex1_knob}")
# a four times longer step hides more of the loading: both loops wait a smaller share than with the shorter step
# (each compared with the same loop diagnosed in this cell, timed at the same places)
print(f"replayed step: {ex1_base[0].figures.step_s * 1e3:.0f} -> {ex1_found[0].figures.step_s * 1e3:.0f} ms (0 workers)")
assert all(ex1_found[w].wait_share < ex1_base[w].wait_share for w in (0, 2)), {w: (ex1_base[w].wait_share,
                                                                                   ex1_found[w].wait_share) for w in (0, 2)}

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Give the two-worker loader of section 4 `persistent_workers=True` (`image_loop(..., persistent_workers=True)`)
# and diagnose it again. How much of the gain that `folder2.advice()` predicted do you get? *Look for* the
# epoch start (`epoch_start_s`), epoch by epoch.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex2_after = run_diagnose(image_loop(images, batch_size, 2, step_ms, persistent_workers=True), batches, warmup, replay)
ex2_predicted = next((r.gain for r in folder2.recommendations if r.knob == "persistent_workers=True"), None)
print(f"epoch start: {folder2.epoch_start_s * 1e3:.0f} ms -> {ex2_after.epoch_start_s * 1e3:.0f} ms")
print(f"samples/s: {folder2.samples_per_s:.4g} -> {ex2_after.samples_per_s:.4g} "
      f"(measured {ex2_after.samples_per_s / folder2.samples_per_s:.2f}x, predicted "
      f"{'%.2fx' % ex2_predicted if ex2_predicted else 'no gain listed'})")
# diagnose saw the knob, and no longer recommends it
assert ex2_after.figures.persistent_workers is True
assert "persistent_workers=True" not in {r.knob for r in ex2_after.recommendations}

# %% [markdown] slideshow={"slide_type": "-"}
# **3.** Wrap the memmap loader of section 5 in `ThreadPrefetcher` and diagnose it. Compare the measured gain
# with the one `mm.advice()` predicted. *Look for* the wait share: the background thread gathers and transforms
# the next batch while the step sleeps.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex3_loader, ex3_step = memmap_loop(prepared.train, batch_size, step_ms)
ex3_before = run_diagnose((ex3_loader, ex3_step), batches, warmup, replay)  # section 5's loop again, in this cell
ex3_after = run_diagnose((ThreadPrefetcher(ex3_loader), ex3_step), batches, warmup, replay)
ex3_predicted = next((r.gain for r in mm.recommendations if r.knob.startswith("load ahead")), None)
print(f"waits {ex3_before.wait_share:.0%} -> {ex3_after.wait_share:.0%}; samples/s {ex3_before.samples_per_s:.4g} -> "
      f"{ex3_after.samples_per_s:.4g} (measured {ex3_after.samples_per_s / ex3_before.samples_per_s:.2f}x, "
      f"section 5's advice predicted {'%.2fx' % ex3_predicted if ex3_predicted else 'no gain'})")
print(ex3_after)
assert ex3_after.batches == batches and 0 < ex3_after.samples <= batches * batch_size
# hiding the loading can at most leave the step: no loop runs faster than batch_size per step (a tenth's room for
# the clock), so the gain is capped by the headspace the advice reads
ex3_most = 1.1 * batch_size / (step_ms / 1e3)
assert max(ex3_before.samples_per_s, ex3_after.samples_per_s) <= ex3_most, (ex3_before, ex3_after, ex3_most)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **4.** Where does the verdict flip? Diagnose `SleepyLoader(load_ms=...)` in front of a step of `step_ms` for
# loads from zero to four times the step, and print each verdict. *Look for* the load at which the loop stops
# being compute-bound, and compare it with the thresholds printed in section 2.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex4_verdicts = {}
for ex4_share in (0, 0.25, 1, 4):
    ex4_d = diagnose(SleepyLoader(load_ms=ex4_share * step_ms, n=batches + warmup), gpu_like_step(step_ms / 1000),
                     batches=batches, warmup=warmup, replay=replay)
    ex4_verdicts[ex4_share] = ex4_d.verdict
    print(f"load {ex4_share:g} x step: waits {ex4_d.wait_share:.0%}, headspace {ex4_d.headspace:.2f}x -> {ex4_d.verdict}")
# where section 2's thresholds put the flip for a loop that loads, then steps: waits load / (load + step),
# headspace (load + step) / step; the measured verdicts above are a single run each
ex4_model = {s: advice.verdict(s / (1 + s), 1 + s) for s in ex4_verdicts}
print("thresholds' verdicts:", ", ".join(f"load {s:g} x step -> {v}" for s, v in ex4_model.items()))
ex4_flip = min(s for s, v in ex4_model.items() if v != "compute-bound")
print(f"the loop stops being compute-bound by a load of {ex4_flip:g} x the step (on the thresholds)")
assert ex4_model[0] == "compute-bound" and ex4_model[4] == "input-bound" and 0 < ex4_flip <= 1
# and measured: far from the flip the diagnosis must agree with the thresholds (loads and steps here are sleeps, so a
# busy machine stretches them alike)
assert ex4_verdicts[0] == ex4_model[0] and ex4_verdicts[4] == ex4_model[4], ex4_verdicts
