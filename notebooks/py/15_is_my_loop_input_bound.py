# %% [markdown] slideshow={"slide_type": "slide"}
# # 15 · Is my loop input-bound?
#
# | | |
# |---|---|
# | **Question** | Is my training loop waiting for data, how much would it gain if loading were free, and which knob should I turn first? |
# | **Seeds** | all of them, and beyond: seed 002's timelines, seed 003's load-only vs full-step tables, SPDL's `CacheDataLoader` |
# | **GPU** | optional: without one, the image loops use notebook 07's stand-in step (it sleeps, leaving the CPU free as a GPU step does) and the Otto MLP trains on the CPU |
# | **Run time** | <!-- run-time --> workshop ~32 s (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# Notebooks 01-14 each turned one knob. Before turning any, an engineer needs to know whether loading is the
# problem at all. `fastloops_helpers.diagnose(loader, step)` answers it from measurements of your own loop:
#
# - it runs `warmup + batches` iterations of `loader -> step`, stamping the time spent in `next(loader)` (the
#   **wait**) and in the step (CUDA synchronised), and restarting epochs as training does;
# - for a torch `DataLoader` it runs a copy rebuilt around the same dataset, sampler, collate function and
#   knobs, with notebook 07's recorder around the dataset and the collate, so the workers report when they
#   fetched and collated each batch: your dataset code is not changed;
# - it keeps a few batches and **replays** the step alone over them: the throughput with free loading. The
#   ratio of the two is the **headspace** (what SPDL's `CacheDataLoader` estimates);
# - it names a verdict and ranks the knobs by the gain it predicts from the figures it measured.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import inspect
import os
import warnings

import matplotlib.pyplot as plt
import pandas as pd
import torch

from fastloops_helpers import config, diagnose, measure
from fastloops_helpers.book import claims
from fastloops_helpers.measure import advice, plots
from fastloops_helpers.experiments import diagnose as exp

print(config.describe().split(", data=")[0])
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
device = config.device()
knobs = exp.knobs()                            # batches measured, warm-up batches, batches replayed
step_ms = config.size("anatomy.step_ms")       # the stand-in GPU step of the image loops: longer hides more loading
batch_size = config.size("imagefolder.batch_size")  # images per batch in the image loops
cores = len(os.sched_getaffinity(0))           # how many workers can run at once
main_threads = 1                               # torch threads in the main process, as DataLoader sets in each worker
torch.set_num_threads(main_threads)            # (more: collate's torch.stack splits over threads that fight the workers)
rows, figures = [], {}
print(f"diagnose knobs: {knobs}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. The verdict, on loops whose costs we know
#
# The rules are plain thresholds on two measured figures (`fastloops_helpers.measure.advice`):

# %% slideshow={"slide_type": "-"}
for name in ("INPUT_BOUND_WAIT", "INPUT_BOUND_HEADSPACE", "COMPUTE_BOUND_WAIT", "COMPUTE_BOUND_HEADSPACE"):
    print(f"{name} = {getattr(advice, name)}")
print(inspect.getsource(advice.verdict).split('"""')[-1].strip())

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction.** A loader that sleeps 20 ms per batch in front of a 2 ms step waits 20 / (20 + 2) = 91 % of
# the time, and the step alone runs (20 + 2) / 2 = 11x faster than the loop: input-bound. A loader that
# returns at once in front of a 20 ms step waits about 0 % and has a headspace of about 1x: compute-bound.
# Sleeping leaves the CPU free, so a busy machine can stretch these figures only a little.

# %% slideshow={"slide_type": "-"}
slow_loader = diagnose(exp.SleepyLoader(load_ms=20), exp.timeline.gpu_like_step(0.002), batches=20, warmup=2, replay=8)
fast_loader = diagnose(exp.SleepyLoader(load_ms=0), exp.timeline.gpu_like_step(0.020), batches=20, warmup=2, replay=8)
print("20 ms loader, 2 ms step:", slow_loader.verdict)
print("instant loader, 20 ms step:", fast_loader.verdict)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for label, d, wait, head in (("20 ms loader", slow_loader, 20 / 22, 22 / 2), ("instant loader", fast_loader, 0.0, 1.0)):
    print(f"{label}: predicted wait {wait:.0%}, measured {d.wait_share:.0%}; "
          f"predicted headspace {head:.3g}x, measured {d.headspace:.3g}x")
    print("   ", d)

# %% [markdown] slideshow={"slide_type": "-"}
# The measured wait is a little above the sleep: `time.sleep` oversleeps by a fraction of a millisecond, and
# the loop's own Python work between batches counts as neither wait nor step. The one-line `repr` names the
# verdict and the first knob; `.table()`, `.advice()` and `.plot()` give the rest.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. ImageFolder, per-sample decoding, no workers
#
# Notebook 09's pipeline: `DataLoader` over an `ImageFolder` that decodes each JPEG and resizes, crops, flips
# and normalises it one sample at a time, in the main process. **Prediction:** with a load time per batch of
# `L = batch_size x (one image's decode + transforms)` and a step of `S`, the loop does one after the other, so
# the wait share is `L / (L + S)` and the headspace `(L + S) / S`. We time one image now to fill in `L`.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
loops = exp.loops(device)
per_image = exp.seconds_per_image(exp.image_dataset())
load_s, step_s = batch_size * per_image, step_ms / 1000
expect0 = exp.predict(load_s, step_s, num_workers=0, cores=cores)
print(f"one image {per_image * 1e3:.2f} ms x {batch_size} = L {load_s * 1e3:.0f} ms per batch, S {step_ms} ms")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
folder0 = exp.run_diagnose(loops["ImageFolder, 0 workers"])
rows.append(exp.row("ImageFolder, 0 workers", folder0))
ok = 0.7 <= folder0.headspace / expect0["headspace"] <= 1.5
print(f"predicted wait {expect0['wait_share']:.0%}, measured {folder0.wait_share:.0%}; "
      f"predicted headspace {expect0['headspace']:.2g}x, measured {folder0.headspace:.2g}x: {'within' if ok else 'missed'} -30 %/+50 %")
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
# ## 3. The same loop with two workers
#
# **Prediction:** two workers decode two batches at once on `min(2, cores)` cores, so a steady batch takes
# `max(S, L / 2)`. Without `persistent_workers`, every epoch forks the workers again, and its first batch waits
# for a worker to start and decode a whole batch: so we compare the prediction with the *median* batch, which
# leaves out the few epoch starts, and print what those starts cost.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
expect2 = exp.predict(load_s, step_s, num_workers=2, cores=cores)
folder2 = exp.run_diagnose(loops["ImageFolder, 2 workers"])
rows.append(exp.row("ImageFolder, 2 workers", folder2))
ok = 0.7 <= folder2.batch_p50_s / expect2["batch_s"] <= 1.5
print(f"steady batch: predicted max(S, L/2) = {expect2['batch_s'] * 1e3:.1f} ms, measured median "
      f"{folder2.batch_p50_s * 1e3:.1f} ms: {'within' if ok else 'missed'} -30 %/+50 %")
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
# ## 4. memmap + BatchLoader: decoded once, transformed per batch
#
# Notebook 09's fast path: the images were decoded and resized once into a memmap; each batch is one gather
# plus one batched crop, flip and normalise, in the main process (no workers). **Prediction:** the load per
# batch is now a gather and a few vectorised passes over `batch_size x 3 x 256 x 256` bytes, much less than the
# decode above, so the wait share falls by about `L / L_memmap`; we time one batch of the loader to fill it in.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
memmap_loader, _ = loops["memmap + BatchLoader"]
it = iter(memmap_loader)
load_memmap_s = measure.median(measure.measure(lambda: next(it), repeat=3, warmup=1))
del it
expect_mm = exp.predict(load_memmap_s, step_s, num_workers=0, cores=cores)
mm = exp.run_diagnose(loops["memmap + BatchLoader"])
rows.append(exp.row("memmap + BatchLoader", mm))
print(f"load per batch {load_memmap_s * 1e3:.1f} ms; predicted wait {expect_mm['wait_share']:.0%}, measured {mm.wait_share:.0%}; "
      f"predicted headspace {expect_mm['headspace']:.2g}x, measured {mm.headspace:.2g}x")
mm.advice()

# %% [markdown] slideshow={"slide_type": "subslide"}
# `BatchLoader` is not a `DataLoader`, so there is no worker timeline; the wait is the main thread gathering and
# transforming. What is left of it can overlap with the step in a background thread (`ThreadPrefetcher`,
# notebook 07): numpy and torch release the GIL during the copies, so the predicted batch time is
# `max(S, L_memmap)` instead of their sum.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. The Otto MLP: in-memory rows, one `__getitem__` per sample
#
# Notebook 10's loop: a `DataLoader` with one worker over 93-float rows already in memory, batch 1024, and the
# MLP's real training step. **Prediction:** each sample costs a Python call, a row copy and its share of the
# collate, a few microseconds, times 1024 samples per batch: a few milliseconds of loading, as long as or longer
# than the MLP's step on a CPU. With no decoding, the cure is to fetch whole batches (notebooks 02 and 03).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
otto_d = exp.run_diagnose(loops["Otto MLP"])
rows.append(exp.row("Otto MLP", otto_d))
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
# ## 6. Headspace, measured by SPDL's `CacheDataLoader`
#
# SPDL (`spdl-core`, the `threads` extra) estimates the same figure differently: `CacheDataLoader` yields the
# first `live` batches from your loader, keeping the first few, then yields those cached batches again; the
# loop's speed in the second phase over the first is the headspace.
#
# **Prediction:** both replay the same step on batches already in memory, so the two figures agree within the
# noise of a few batches (the claims registry's range, printed below).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
try:
    import spdl.dataloader  # noqa: F401
    have_spdl = True
except ImportError:
    have_spdl = False
    print("spdl-core is not installed (pip install -e '.[threads]'): skipping the comparison")
if have_spdl:
    fresh = exp.loops(device)["ImageFolder, 0 workers"]
    live = min(len(fresh[0]), knobs["batches"])
    spdl = exp.spdl_headspace(fresh, live=live, cached=min(knobs["replay"], live))
    close = 1 / 1.3 <= spdl["headspace"] / folder0.headspace <= 1.3
    print(f"headspace: diagnose {folder0.headspace:.2g}x, CacheDataLoader {spdl['headspace']:.2g}x: "
          f"{'within' if close else 'missed'} +-30 %")

# %% [markdown] slideshow={"slide_type": "-"}
# They can differ where the two runs see different batches (SPDL's live phase is one epoch's first batches,
# diagnose's spans epochs, each restart included) and where the cached phase is short. `CacheDataLoader` gives
# only the ratio; `diagnose` adds the wait share, the timeline, memory and the knob.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. Your own loop
#
# Replace the two lines below by your loader and your step (any iterable; any callable taking a batch). Pass
# `copy=partial(move_to, device=device, non_blocking=True)` to time the host-to-device copy apart from the step.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
my_loader = exp.SleepyLoader(load_ms=5, batch_size=64)        # your DataLoader, BatchLoader, generator...
my_step = exp.timeline.gpu_like_step(0.004)                  # your training step: def step(batch): ...
mine = diagnose(my_loader, my_step, **knobs)
print(mine)
mine.advice()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# Measure before you tune: the share of wall time in `next(loader)` and the step's speed on cached batches tell
# whether loading matters; the per-stage timeline tells where its time goes; the ranked knobs come from those
# figures. The four loops of this notebook, from this run:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
table = pd.DataFrame(rows).set_index("loop")
figures.update({f"wait_share_{i}": r["wait_share"] for i, r in enumerate(rows)})
figures.update({f"headspace_{i}": r["headspace"] for i, r in enumerate(rows)})
figures.update({"sleep20_wait_share": slow_loader.wait_share, "sleep20_headspace": slow_loader.headspace,
                "instant_wait_share": fast_loader.wait_share})
figures["diagnose_input_bound_found"] = float(rows[0]["verdict"] == "input-bound")
if have_spdl:
    figures["spdl_headspace_imagefolder0"] = spdl["headspace"]
    figures["diagnose_headspace_over_spdl_cache"] = rows[0]["headspace"] / spdl["headspace"]
path = measure.save_results("15_is_my_loop_input_bound", figures, rows, knobs={**knobs, "step_ms": step_ms,
                            "batch_size": batch_size, "cores": cores}, repeats=1)
print("saved", path.name)
table.round(3)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# No seed makes a claim about `diagnose`; what this notebook checks is that the verdicts hold where the answer is
# known by construction, with wide margins (tests/test_diagnose.py checks the same, the cell prints the
# thresholds): a loader that sleeps ten times as long as its step is input-bound, waits most of the time and has
# a large headspace; an instant loader before a long step is compute-bound and hardly waits. The claims below
# (in the registry, like every seed claim) are about the real loops, so they depend on this machine.

# %% slideshow={"slide_type": "subslide"}
print("20 ms loader, 2 ms step is input-bound:", slow_loader.verdict == "input-bound")
print("  waits > 70 % and headspace > 3x:", slow_loader.wait_share > 0.7 and slow_loader.headspace > 3)
print("instant loader, 20 ms step is compute-bound:", fast_loader.verdict == "compute-bound")
print("  waits < 20 %:", fast_loader.wait_share < 0.2)
print("every loop got a verdict and ranked knobs:", all(r["verdict"] in ("input-bound", "balanced", "compute-bound")
                                                         for r in rows), len(rows) == 4)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
claims.check("diagnose_input_bound_found", rows[0]["verdict"] == "input-bound")
if have_spdl:
    claims.check("diagnose_headspace_over_spdl_cache", figures)
else:
    claims.check("diagnose_headspace_over_spdl_cache", None, why="spdl-core is not installed (the threads extra)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Set `step_ms` to 4 times its value in the defaults block (`config.SIZES["anatomy.step_ms"]`) and re-run
#    sections 2 and 3. Which loop changes verdict, and does the first knob change?
# 2. Give the two-worker loader of section 3 `persistent_workers=True` (in `exp.loops`) and diagnose it again.
#    How much of the predicted gain do you get?
# 3. Wrap the memmap loader of section 4 in `ThreadPrefetcher` and diagnose it. Compare the measured gain with
#    the one `.advice()` predicted.
