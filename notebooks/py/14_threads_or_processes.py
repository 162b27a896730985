# %% [markdown] slideshow={"slide_type": "slide"}
# # 14 · Threads or processes?
#
# | | |
# |---|---|
# | **Question** | On decode-every-epoch work, do threads in one process load images as fast as DataLoader's worker processes, with less CPU and memory, and how close do they get to what the cores can decode? |
# | **Seeds** | beyond the seeds (issue 13): SPDL's thread pipelines (arXiv 2504.20067), torchdata.nodes, the helpers' `ThreadLoader` |
# | **GPU** | not needed: everything here is CPU work |
# | **Run time** | <!-- run-time --> workshop ~40 s (measured on AMD EPYC, 2 cores, 2026-11-24) |
#
# The DataLoader parallelises `__getitem__` over worker *processes*: each worker starts (fork, forkserver or
# spawn), gets a copy of the dataset, and ships every batch back through shared memory. Threads avoid all three
# costs, but only run in parallel where the work releases the GIL. JPEG decoding and Pillow's resize are C code
# that can release it. This notebook measures, in one run on this machine:
#
# 1. which installed JPEG decoders release the GIL,
# 2. the physical limit: one thread's per-image rate times the cores,
# 3. every pipeline on the same synthetic ImageFolder (decode, resize, center crop, uint8 tensor, every epoch):
#    images/s, CPU seconds per image, first-batch latency and the PSS of all its processes,
# 4. the DataLoader's start-up under fork, forkserver and spawn,
# 5. a timeline of the thread loader against the DataLoader,
# 6. what free-threaded Python and Python 3.14's forkserver default would change.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import os

import pandas as pd
import torch

from fastloops_helpers import ThreadLoader, config, measure
from fastloops_helpers.book import claims
from fastloops_helpers.experiments import threads as exp
from fastloops_helpers.measure import timeline

print(config.describe().split(", data=")[0])
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
ds = exp.dataset()                                  # the synthetic ImageFolder's train split, decoded every access
batch_size = config.size("threads.batch_size")      # images per batch
epochs = config.size("threads.epochs")              # timed epochs per pipeline, after one warm-up epoch
cores = os.cpu_count()                              # the most CPU work that can run at once
threads = config.size("threads.threads_per_core") * cores  # thread pipelines: threads overlap file reads with decode
torch_threads = torch.get_num_threads()
torch.set_num_threads(1)                            # as DataLoader does in each worker
skipped = exp.skipped()
for what, why in skipped.items():
    print(f"skipped {what}: {why}")

# %% slideshow={"slide_type": "-"}
print("ThreadLoader batches per epoch == ceil(images / batch size):",
      len(ThreadLoader(ds, batch_size)) == -(-len(ds) // batch_size))
print("sample shape and dtype:", tuple(ds[0][0].shape), ds[0][0].dtype)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. Which decoders release the GIL?
#
# **Prediction:** a decoder that releases the GIL for the whole decode runs two images at once on two threads,
# so with at least two free cores the 2-thread over 1-thread speedup is close to 2 (say 1.6 to 2.1, allowing for
# the Python call and the array allocation, which hold the GIL, and for a shared machine). One that holds the GIL
# gives 1.0. Pillow releases it inside `ImageFile.load`'s decoder loop; simplejpeg and PyTurboJPEG are Cython and
# ctypes wrappers whose C call runs without it.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
gil = exp.gil_speedups(config.size("threads.gil_images"), config.size("imagefolder.px"))
print(pd.Series(gil, name="2-thread / 1-thread speedup").round(2).to_string())
best_gil = max(gil, key=gil.get)
_ = measure.predicted(f"{best_gil}'s 2-thread speedup", 1.6, 2.1, gil[best_gil], "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# When the speedup stays near 1, either the decoder holds the GIL or the second core is busy with other work:
# the same code reaches about 2 on an idle machine with two or more cores. The per-call Python overhead
# (a bytes object in, a numpy array out) is the part that always holds the GIL; for a few-hundred-pixel image it
# is a few percent of the decode, which is why threads can scale at all.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. The physical limit
#
# **Prediction:** a 500-pixel JPEG has about 0.2 megapixels; libjpeg-turbo decodes about 100 to 200 megapixels
# per second per core, so 1 to 2 ms per image, plus about 1 ms for the antialiased resize to 256 and the crop:
# one thread does roughly 300 to 700 images per second (200 to 1000 allowing for the image sizes and the
# file read). The limit is that rate times the cores, if nothing else runs.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
lim = exp.limit_rounds(ds, batch_size, config.size("threads.limit_images"), config.size("threads.limit_rounds"))
one_thread, limit = lim["one_thread_img_per_s"], lim["limit_img_per_s"]
print(f"limit: {one_thread:.0f} img/s per thread x {cores} cores = {limit:.0f} img/s")
_ = measure.predicted("one thread's decode + resize + crop rate", 200, 1000, one_thread, "img/s")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The per-image rate depends on the image sizes (the synthetic folder jitters them), on whether Pillow was built
# with libjpeg-turbo, and on the clock speed of a shared core. The limit ignores the collate and the loop itself,
# so no loader reaches it exactly. `exp.limit_rounds` times the one thread in turns with epochs of the thread
# loader of section 3, so the ratio of the two (printed there) compares timings from the same spells of a shared
# machine.

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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
rows = [{"pipeline": name, **exp.epoch_stats(make, epochs)}
        for name, make in measure.progress(exp.configurations(ds, batch_size).items(), desc="pipelines")]
table = pd.DataFrame(rows).set_index("pipeline")
table["of_limit"] = table["img_per_s"] / limit
table.round(4)

# %% slideshow={"slide_type": "subslide"}
print("pipelines measured:", len(rows))
print("columns:", list(table.columns))

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
dl = table[table.index.str.startswith("DataLoader")]
dl_best = dl["img_per_s"].idxmax()
tl_name = next(n for n in table.index if n.startswith("ThreadLoader"))
tl_over_dl = table.loc[tl_name, "img_per_s"] / table.loc[dl_best, "img_per_s"]
print(f"best DataLoader: {dl_best}")
_ = measure.predicted("ThreadLoader / best DataLoader (img/s)", 0.8, 1.25, tl_over_dl, "x")
_ = measure.predicted("ThreadLoader / limit (in turns, section 2)", 0.8, 1.0, lim["helpers_threads_over_limit"], "x")
print(f"PSS: ThreadLoader {table.loc[tl_name, 'pss_mb']:.0f} MB, best DataLoader {table.loc[dl_best, 'pss_mb']:.0f} MB")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Totals against what loading adds.** Call B the PSS of the process before a loader starts, t what the
# thread loader adds to it and d what the best DataLoader adds (the `added_pss_mb` column). The totals are
# B + t and B + d, so their ratio falls to 0.5 only when d >= B + 2t: the workers would have to add more than
# the whole process again. Forked workers share the parent's pages and add only the pages they write, so on a
# few cores the totals stay close whatever each loader adds. With many workers per GPU,
# or under forkserver and spawn (section 4), d grows with every worker, and so does the gap between the totals:
# that is the regime of SPDL's memory figure.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
mem = exp.memory_split(rows)
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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
start_rows = exp.startup(ds, batch_size)
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
tls = exp.timelines(ds, batch_size, config.size("anatomy.step_ms") / 1000, batches=min(12, len(ds) // batch_size))
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
# at 1 / s; with s about 0.1 the cap is 10x, far above this machine's cores, so here free threading should change
# the thread loader's rate by under 10 % when the decoder releases the GIL. It matters for transforms written in
# Python (a per-pixel augmentation, a tokenizer in pure Python): those hold the GIL for their whole run, and
# free threading would let them scale with the cores like processes do, without pickling or per-worker memory.
# The cost is the free-threaded build's single-thread slowdown (quoted below with its source) and the need for
# C extensions built for it. No free-threaded interpreter is installed here, so this section cannot measure it:
# the cell below prints the GIL-holding share this run implies, and the cells after it quote published figures
# and turn them into a prediction for this machine.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
share = min(1.0, max(0.0, 2 / gil[best_gil] - 1)) if gil else float("nan")  # speedup = 2 / (1 + s) for two threads
print(f"GIL-holding share implied by {best_gil}'s 2-thread speedup: {share:.2f}")

# %% [markdown] slideshow={"slide_type": "-"}
# The implied share also absorbs whatever else ran on the second core during the measurement (a busy core reads
# as a share of 1), so it is an upper bound on this machine; an idle machine gives the decoder's own share.

# %% [markdown] slideshow={"slide_type": "-"}
# What others measured where free-threaded builds exist, and what that predicts for this run: with no GIL every
# stage of the thread loader runs in parallel, so it should approach the limit of section 2, less the build's
# single-thread penalty. The prediction misses where the main thread's collate and loop become the bottleneck,
# where a decoder serialises its calls with its own lock, or where an extension without free-threaded support
# switches the GIL back on at import.

# %% slideshow={"slide_type": "subslide"}
for name in ("ft_single_thread_penalty_pct", "ft_thread_workers_disk", "ft_thread_workers_memory"):
    claims.check(name)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
measured = table.loc[tl_name, "img_per_s"]
ft = exp.free_threaded_prediction(limit, measured)
lo, hi = sorted(exp.FREE_THREADED_PENALTY)
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
figures = exp.figures(rows, lim, start_rows, gil)
for key in ("limit_img_per_s", "threadloader_img_per_s", "dataloader_best_img_per_s", "helpers_threads_over_limit",
            "helpers_threads_over_dataloader_best", "helpers_threads_over_spdl",
            "helpers_threads_pss_over_dataloader_best", "helpers_threads_added_pss_over_dataloader_best",
            "helpers_threads_pss_over_dataloader_forkserver",
            "helpers_threads_pss_over_dataloader_spawn", "helpers_threads_cpu_over_dataloader_best"):
    if key in figures:
        print(f"{key}: {figures[key]:.3g}")
path = measure.save_results("14_threads_or_processes", figures, rows, knobs={
    "batch_size": batch_size, "epochs": epochs, "cores": cores, "threads": threads, "skipped": skipped}, repeats=epochs)
print("saved", path.name)
torch.set_num_threads(torch_threads)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# SPDL's paper reports its figures on ImageNet with many cores and FFmpeg-based decoders; they are published, not
# measurable here (SPDL's own decoders need FFmpeg 6+, Debian 12 ships 5.1, so its pipeline ran the same Pillow
# function as every other row). The `bench threads` targets are checked on a quiet machine by the lead; the lines
# below print the registry's verdicts.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
for name in ("spdl_imagenet_faster_pct", "spdl_cpu_saving_pct", "spdl_memory_saving_gb"):
    claims.check(name, None, why="published on ImageNet with many cores")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Give `ThreadLoader` `threads=cores` instead of twice the cores and re-run section 3. Does the file read
#    overlap matter on this machine?
# 2. Replace the Pillow decode in `exp.Decode` with simplejpeg (section 1's registry) and re-run sections 2 and 3.
#    Which loader gains more, and why?
# 3. Add a pure-Python augmentation (a loop over a few thousand pixels) to the sample function. Predict from
#    section 6's share how the thread loader and the DataLoader change, then measure.
