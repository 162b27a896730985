# %% [markdown] slideshow={"slide_type": "slide"}
# # 07 · Inside the DataLoader
#
# | | |
# |---|---|
# | **Question** | What does each DataLoader knob (`num_workers`, `pin_memory`, `prefetch_factor`, `persistent_workers`, prefetchers in a thread or a process, `__getitems__`) change in *when* things happen, and what do workers cost in memory and randomness? |
# | **Seeds** | 002: "Read images in parallel", "Prefetching on CPU / GPU", "Memory optimization", the collate that discards broken images, and its timeline diagrams |
# | **GPU** | optional: without one, the training step is a stand-in that sleeps (the CPU is free, as during a GPU step) and the CUDA prefetcher passes batches through |
# | **Run time** | <!-- run-time --> workshop ~48 s (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# Seed 002 draws the DataLoader as boxes on a timeline: workers read batches, the main process copies them to
# the GPU, the GPU runs the model. Here we *record* that timeline from a real `torch.utils.data.DataLoader`:
# each worker notes when it fetched and collated each batch and ships those times back inside the batch; the
# main process notes when it waited, copied and stepped (`fastloops_helpers.measure.timeline`). Every knob is then a
# change you can see.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import multiprocessing
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader

from fastloops_helpers.data import broken
from fastloops_helpers import config, measure
from fastloops_helpers.measure import plots, timeline
from fastloops_helpers.load import prefetch
from fastloops_helpers.load.process_prefetch import ProcessPrefetcher
from fastloops_helpers.teach import worker_data as workerdata
from fastloops_helpers.experiments import workers as bench_workers
from fastloops_helpers.data.jpeg_folder import write_synthetic_imagefolder

print(config.describe())
print(measure.hardware_line())
warnings.filterwarnings("ignore", message=".*worker processes in total.*")  # we ask for more workers than cores on purpose

# %% slideshow={"slide_type": "subslide"}
px = config.size("anatomy.px")                  # decoded images are resized to px x px: bigger costs more per image
batch_size = config.size("anatomy.batch_size")  # images per batch: bigger amortises per-batch overhead
step_ms = config.size("anatomy.step_ms")        # the stand-in GPU step per batch: longer hides more loading
memory_mb = config.size("anatomy.memory_mb")    # dataset size in the worker-memory experiment
cores = os.cpu_count()                          # the most workers that can run at once
main_threads = 1                                # torch threads in the main process, as DataLoader sets in workers
torch.set_num_threads(main_threads)
figures, rows = {}, []

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. The baseline: one process does everything
#
# With `num_workers=0` the main process reads and decodes every JPEG of a batch, collates it, then runs the
# step, then starts on the next batch: the seed's "naive implementation". **Prediction:** an epoch takes the
# sum of the two, `images x decode time + batches x step time`, and the loop waits for data most of the time
# when decoding a batch costs more than a step.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
dataset = bench_workers.jpeg_dataset(px)
_ = bench_workers.measure_loader(bench_workers.make_loader(dataset, 0), step_ms=0)  # warm the page cache
base, base_tl = bench_workers.measure_loader(bench_workers.make_loader(dataset, 0))
decode_s = base_tl.frame().query("stage == 'fetch'").seconds.sum() / len(dataset)
predicted = len(dataset) * decode_s + len(base_tl.frame().query("stage == 'step'")) * step_ms / 1000
print(f"{len(dataset)} images, decode + resize {decode_s * 1e3:.1f} ms each, step {step_ms} ms per batch")
measure.show("epoch, predicted as a sum", predicted)
measure.show("epoch, measured", base["wall_s"])
print(f"epoch: predicted {predicted:.2f} s (a sum), measured {base['wall_s']:.2f} s: "
      f"{'within' if abs(base['wall_s'] / predicted - 1) < 0.15 else 'missed'} (15 %)")
print(f"waiting for data: {base['wait_share']:.0%} of the epoch")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = timeline.gantt(base_tl, title="num_workers=0: load, then step, never both")
plots.save(fig, "07_dataloader_anatomy-workers0")
plt.show()

# %% [markdown] slideshow={"slide_type": "subslide"}
# (We run torch with one thread in the main process, as DataLoader does in each worker. With more, the
# `torch.stack` inside collate splits each copy over intra-op threads, and on a busy machine those threads can
# wait on each other for longer than the copy takes; exercise 4 shows it.)
#
# Red is the main loop waiting in `next(loader)`, blue the fetch (decode) of a batch, green its collate, cyan
# the step. Nothing can overlap with one process, so the epoch is the sum. The measured epoch can be longer:
# Python runs between the stages, other processes may take the core, and the recording itself costs time,
# which we measure now: each event costs two clock reads and a list append, and a batch carries about four.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
per_event = timeline.record_overhead()
events_per_batch = len(base_tl.frame()) / max(1, base_tl.frame().batch.max() + 1)
print(f"recording: {per_event * 1e6:.2f} us per event, {events_per_batch:.1f} events per batch, "
      f"{per_event * len(base_tl.events) / base['wall_s']:.3%} of this epoch")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. `num_workers`: decode batches in parallel
#
# Each worker is a separate process with its own Python interpreter (and its own GIL) that fetches and
# collates whole batches, round robin. **Prediction:** with `w` workers on `c` cores, up to `min(w, c)`
# batches decode at once, and the decoding overlaps the step. With `L` the load time of a batch in one
# process and `S` the step, a batch then takes `max(L / min(w, c), S)` instead of `L + S`, so the speed-up is
# at most `(L + S) / max(L / min(w, c), S)`; starting the workers costs a fixed delay before the first batch.
# More workers than cores only share the same cores.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
ladder = {f"num_workers={n}": {"num_workers": n} for n in bench_workers.ladder()}
ladder_rows, ladder_tls = bench_workers.sweep(dataset, ladder)
ladder_table = pd.DataFrame(ladder_rows).set_index("config")
ladder_table.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
two = ladder_tls["num_workers=2"]
fig = timeline.gantt(two, title="num_workers=2: batches decode in two processes while the loop steps")
plots.save(fig, "07_dataloader_anatomy-workers2")
plt.show()
L, S = batch_size * decode_s, step_ms / 1000  # one batch's load in one process, and the step
for n in bench_workers.ladder()[1:]:
    speedup = ladder_table.img_per_s[f"num_workers={n}"] / ladder_table.img_per_s.iloc[0]
    bound = (L + S) / max(L / min(n, cores), S)
    print(f"num_workers={n}: predicted up to {bound:.2f}x, measured {speedup:.2f}x: "
          f"{'within' if speedup <= bound * 1.1 else 'missed'} ({speedup / bound:.0%} of the bound)")
print(f"with 2 workers, {timeline.parallelism(two):.2f} batches were being loaded at once on average")

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
knobs = {
    "prefetch_factor=1": {"num_workers": 2, "prefetch_factor": 1},
    "prefetch_factor=4": {"num_workers": 2, "prefetch_factor": 4},
    "pin_memory": {"num_workers": 2, "pin_memory": True},
}
knob_rows, knob_tls = bench_workers.sweep(dataset, knobs)
print("pinning happened:", (knob_tls["pin_memory"].frame().stage == "pin").any(),
      "(DataLoader pins only when an accelerator is present)")
knob_table = pd.DataFrame(knob_rows).set_index("config")
print(f"prefetch_factor 4 over 1: {knob_table.img_per_s['prefetch_factor=4'] / knob_table.img_per_s['prefetch_factor=1']:.2f}x img/s")
knob_table.round(3)


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
def epoch_starts(persistent: bool) -> list[float]:
    """Return the delay before the first batch of each of two epochs."""
    loader = bench_workers.make_loader(dataset, 2, persistent_workers=persistent)
    _, tl = bench_workers.measure_loader(loader, epochs=2)
    df = tl.frame()
    starts = df[df.stage == "start"].start.tolist()
    return [float(df[(df.stage == "wait") & (df.start >= s)].end.min() - s) for s in starts]


persist = {"persistent_workers=False": epoch_starts(False), "persistent_workers=True": epoch_starts(True)}
for label, (first, second) in persist.items():
    measure.show(f"{label}: first batch of epoch 1", first)
    measure.show(f"{label}: first batch of epoch 2", second)
one_batch = batch_size * decode_s
second = persist["persistent_workers=True"][1]
print(f"persistent workers, epoch 2's first batch: predicted about {one_batch:.3f} s (one batch's decode), "
      f"measured {second:.3f} s: {'within' if second < 2 * one_batch else 'missed'} (2x)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The prefetch depth cannot make decoding faster: when the loop is input-bound, a deeper queue only holds
# batches that are not there yet, so expect the `prefetch_factor` rows near each other (their ratio is printed
# above). `prefetch_factor` matters when batch times vary (one slow batch) and the step is longer than the
# average decode: then the queue absorbs the slow batch. `persistent_workers` saves the workers' start-up at each epoch: small under `fork` (a copy of the
# running process), larger under `spawn` (a fresh interpreter per worker that imports torch and unpickles the
# dataset; exercise 3). Either way the first batch of an epoch still waits for one batch to be decoded; the
# printed line compares it with that prediction (a busy machine, or both workers racing for one core, makes it
# miss).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Prefetchers: loading while the step runs, in a thread or in one process
#
# Seed 002 names two ways to prefetch beside DataLoader's own queue:
#
# - **Implementation #1**, NVIDIA apex's `data_prefetcher` (examples/imagenet/main_amp.py): copy batch i+1 to
#   the GPU on a side CUDA stream while batch i computes. `prefetch.CUDAPrefetcher` follows that pattern (pinned
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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
pre_rows, pre_tls = bench_workers.sweep(dataset, {
    "num_workers=0": {"num_workers": 0},
    "ThreadPrefetcher(depth=2)": {"num_workers": 0, "wrap": lambda dl: prefetch.ThreadPrefetcher(dl, depth=2)},
    "ProcessPrefetcher(depth=2)": {"num_workers": 0, "wrap": lambda dl: ProcessPrefetcher(dl, depth=2)},
    "CUDAPrefetcher": {"num_workers": 0, "wrap": prefetch.CUDAPrefetcher},
})
pre_table = pd.DataFrame(pre_rows).set_index("config")
pre_table.round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = timeline.gantt(pre_tls["ProcessPrefetcher(depth=2)"], title="a prefetcher process decodes while the loop steps")
plots.save(fig, "07_dataloader_anatomy-process-prefetcher")
plt.show()
n_batches = len(base_tl.frame().query("stage == 'step'"))
for label in ["ThreadPrefetcher(depth=2)", "ProcessPrefetcher(depth=2)"]:
    predicted = n_batches * max(L, S) + L
    wall = pre_table.wall_s[label]
    print(f"{label}: predicted {predicted:.2f} s, measured {wall:.2f} s: {'within' if wall < 1.2 * predicted else 'missed'} (20 %)"
          f" | step time with a decode beside it: {timeline.overlap_share(pre_tls[label]):.0%}")

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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
images = torch.stack([dataset[i][0] for i in range(len(dataset))])
labels = torch.tensor(dataset.targets)
costs = bench_workers.getitem_costs(workerdata.BatchedStackedImages(images, labels), batch_size)
predicted_getitems = (costs["calls_s"] + costs["collate_s"]) / costs["getitems_s"]
print(f"batch of {batch_size}: {batch_size} calls {costs['calls_s'] * 1e6:.0f} µs, collate (a copy of "
      f"{costs['batch_bytes'] / 1e6:.2f} MB) {costs['collate_s'] * 1e6:.0f} µs, one __getitems__ {costs['getitems_s'] * 1e6:.0f} µs")
get_rows = []
for label, data, collate in [("__getitem__ + default_collate", workerdata.StackedImages(images, labels), None),
                             ("__getitems__", workerdata.BatchedStackedImages(images, labels), workerdata.no_collate)]:
    loader = bench_workers.make_loader(data, 0, collate_fn=collate)
    summary, tl = bench_workers.measure_loader(loader, step_ms=0)
    per_batch = tl.frame().query("stage in ['fetch', 'collate']").groupby("batch").seconds.sum().median()
    get_rows.append({"config": label, "fetch+collate_us_per_batch": per_batch * 1e6, "img_per_s": summary["samples_per_s"]})
get_table = pd.DataFrame(get_rows).set_index("config")
measured_getitems = get_table.iloc[0, 0] / get_table.iloc[1, 0]
print(f"__getitems__ speed-up of fetch + collate: predicted {predicted_getitems:.1f}x (from the parts), "
      f"measured {measured_getitems:.1f}x in the DataLoader: {'within' if abs(measured_getitems / predicted_getitems - 1) < 0.5 else 'missed'} (50 %)")
get_table.round(1)

# %% [markdown] slideshow={"slide_type": "subslide"}
# The batch size is not what sets the saving here: both paths copy every byte of the batch once (the
# stack in collate, the gather in `__getitems__`), and for decoded images that copy costs more than the
# Python calls it replaces. The calls cost `B c`, printed above; the saving is `B c` out of `B c + copy`. It
# approaches `B` for small samples (a few numbers per row, notebook 02) and fades for large ones. What makes
# the DataLoader's ratio miss the parts' prediction: the timeline's events also hold the DataLoader's
# fetcher and our recording, a per-batch cost both paths pay, and a busy machine adds noise to each batch.

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

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
rows_np = workerdata.make_rows(memory_mb)
mm_path = config.data_dir() / f"workerdata-{memory_mb}mb.f32"
rows_np.tofile(mm_path)
kinds = {"list of objects": workerdata.ListRows(rows_np), "numpy array": workerdata.ArrayRows(rows_np),
         "memmap": workerdata.MemmapRows(mm_path, rows_np.shape[1])}
del rows_np  # keep only the datasets' own copies in the main process
mem_rows = [dict(kind=kind, **workerdata.worker_memory(ds, n))
            for kind, ds in measure.progress(kinds.items(), desc="datasets") for n in config.size("anatomy.memory_workers")]
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
for kind, bound in [("list of objects", f"up to {memory_mb} MB (one dataset)"), ("memmap", "near 0 MB (shared)")]:
    print(f"{kind}, beyond that: {growth[kind] - growth['numpy array']:.0f} MB per worker; predicted {bound}")

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
# that seeds it from the per-worker seed (`workerdata.seed_worker`).

# %% slideshow={"slide_type": "subslide"}
n = 32
random_rows = [
    ("dataset-owned Generator, 2 workers", workerdata.duplicated_draws(workerdata.NoisyIndex(n), 2)),
    ("same, worker_init_fn=seed_worker", workerdata.duplicated_draws(workerdata.NoisyIndex(n), 2, workerdata.seed_worker)),
    ("numpy global RNG, 2 workers", workerdata.duplicated_draws(workerdata.GlobalNoisyIndex(n), 2)),
]
for label, dup in random_rows:
    print(f"{label:38s} repeated draws: {dup} of {n}")

# %% [markdown] slideshow={"slide_type": "-"}
# Without the fix, worker 1 replays worker 0's numbers exactly: with two workers, half the draws repeat.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 8. Broken samples: drop them in collate, and say so
#
# Real folders hold truncated downloads, empty files and things that are not images. The seed's collate
# filters out `None` samples; here the dataset (`broken.SafeImageFolder`) turns a file it cannot decode into a
# `Broken(path, reason)` marker and warns with the file name, `broken.collate_drop_broken` collates the good
# samples and ships the dropped names with the batch (it runs in a worker, so that is the only way back), and
# `broken.BrokenReport` skips all-broken batches and prints the count and names at the end of the epoch.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
bad_root = write_synthetic_imagefolder(config.data_dir() / "imagefolder-broken-demo", 10, 2, size=64)
good_file = sorted((bad_root / "train" / "ants").glob("*.jpg"))[0]
planted = broken.plant_broken(bad_root / "train" / "bees", good_file)

# %% slideshow={"slide_type": "subslide"}
safe = broken.SafeImageFolder(bad_root / "train", transform=workerdata.ResizeToTensor(32))
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
# releases the GIL; a prefetcher process gives it without the GIL, at the price of a fork and shared memory. Workers copy any dataset held as many Python objects; keep samples in arrays or memmaps.
# Seed RNGs the dataset owns per worker, and drop broken samples in collate with a report, never silently. This run's figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
print(f"num_workers=2 over 0: {ladder_table.img_per_s['num_workers=2'] / ladder_table.img_per_s.iloc[0]:.2f}x img/s; "
      f"{timeline.parallelism(two):.2f} batches loading at once")
for label in ["ThreadPrefetcher(depth=2)", "ProcessPrefetcher(depth=2)"]:
    print(f"{label} over the plain loop: {pre_table.img_per_s[label] / pre_table.img_per_s.iloc[0]:.2f}x img/s")
print(f"__getitems__ over __getitem__ + collate: {measured_getitems:.2f}x per batch")

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures.update({f"ladder_img_per_s_{k.split('=')[1]}": v for k, v in ladder_table.img_per_s.items()})
figures.update({"workers2_parallelism": timeline.parallelism(two), "record_us_per_event": per_event * 1e6,
                "thread_prefetch_speedup": pre_table.img_per_s.iloc[1] / pre_table.img_per_s.iloc[0],
                "process_prefetch_speedup": pre_table.img_per_s.iloc[2] / pre_table.img_per_s.iloc[0],
                "getitems_predicted_speedup": predicted_getitems,
                "getitems_speedup": get_table.iloc[0, 0] / get_table.iloc[1, 0]})
figures.update({f"pss_mb_{kind.split()[0]}_w{w}": v for w, row in pss.iterrows() for kind, v in row.items()})
path = measure.save_results("07_dataloader_anatomy", figures, rows=ladder_rows + knob_rows + pre_rows + get_rows + mem_rows,
                           knobs={"px": px, "batch_size": batch_size, "step_ms": step_ms, "memory_mb": memory_mb,
                                  "images": len(dataset)}, repeats=1)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# Seed 002 claims that workers read batches in parallel, that a queue lets loading overlap the model, that a
# dataset copied into each worker wastes memory, and that collate can discard broken images. The compared cell
# states what holds with a wide margin on a busy machine: under `fork` each worker holds, beyond what it holds
# with the numpy array, a large share of a dataset (the registry's threshold) of private memory (USS) with the list of objects; the
# planted broken files are all reported and only they are dropped; a dataset-owned RNG repeats across workers
# until `seed_worker`. The timing claims (two workers load more than 1.2 batches at once; the prefetchers
# load during most of the step time) are printed in the cell after it, whose output depends on the run.

# %% slideshow={"slide_type": "subslide"}
most = mem[mem.num_workers == mem.num_workers.max()].set_index("kind")
copied = (most.workers_uss_mb["list of objects"] - most.workers_uss_mb["numpy array"]) / (memory_mb * most.num_workers.iloc[0])
if multiprocessing.get_start_method() == "fork":
    print("workers copy the list of objects, not the numpy array:", copied > 0.4)
else:
    print("copy-on-read check needs the fork start method; this machine uses", multiprocessing.get_start_method())
print("every planted broken file reported, nothing else dropped:",
      sorted(report.dropped) == sorted(map(str, planted)) and used == len(safe) - len(planted))
print("dataset-owned RNG repeats across workers, seed_worker fixes it:", random_rows[0][1] > 0 and random_rows[1][1] == 0)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print("workers load in parallel (2 workers > 1.2 batches at once):", timeline.parallelism(two) > 1.2)
for label in ["ThreadPrefetcher(depth=2)", "ProcessPrefetcher(depth=2)"]:
    print(f"{label} overlaps the step (> 50 % of step time):", timeline.overlap_share(pre_tls[label]) > 0.5)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Set `step_ms = 100` in the defaults block and re-run section 2. At which `num_workers` does the wait share
#    fall to nearly zero, and why does adding workers beyond that change nothing?
# 2. Replace `"list of objects"` by a list of Python floats per row (`r.tolist()`) in section 6. How much larger
#    is the dataset, and how much more does each worker copy?
# 3. Run section 3 with `multiprocessing_context="spawn"` added to the loader's keywords. How long does the
#    first batch take now, and what does `persistent_workers` save?
# 4. Set `main_threads = os.cpu_count()` in the defaults block and re-run sections 1 and 4. How long does the
#    `collate` stage take now with `num_workers=0`, and what happens to it inside the prefetch thread?
# 5. Wrap a `DataLoader(dataset, num_workers=1)` in `ProcessPrefetcher` and compare it with `num_workers=2`: this is
#    seed 002's "sacrifice one loader process". Which one uses the two cores better, and why?
