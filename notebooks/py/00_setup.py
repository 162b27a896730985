# %% [markdown] slideshow={"slide_type": "slide"}
# # 00 · What machine am I on?
#
# | | |
# |---|---|
# | **Question** | What hardware and software does this machine have, which optional parts of the course work here, and how big will the experiments be? |
# | **Seeds** | all: every later figure is only meaningful next to the machine that produced it |
# | **GPU** | optional: this notebook reports what it finds |
# | **Run time** | <!-- run-time --> workshop ~19 s (measured on Intel(R) Xeon(R) Processor, 2 cores, 2026-11-24) |
#
# Every measurement in this course is a property of a machine, not of a library. Before racing loaders we
# write down what we race them on, check which optional pieces (GPU, FFCV, TensorFlow, libjpeg-turbo,
# `torch.compile`) work, and measure the one number that predicts many later results: how fast this
# machine copies memory.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
from __future__ import annotations  # the package's annotations, as written, in the cell that shows its code

import os

import pandas as pd
import psutil
import torch

from fastloops_helpers import config, measure
from fastloops_helpers.experiments import bandwidth
from fastloops_helpers.measure import capabilities, plots

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
cache_mb = 0.25                    # the smallest buffer: fits in a core's L2 cache (much smaller: the clock's cost shows)
middle_mb = 4                      # a buffer that fits in the last-level cache of most CPUs
copy_mb = config.size("copy_mb")   # the "RAM" buffer: must be far larger than the last-level cache, costs memory
repeat = config.size("repeat")     # timed rounds per buffer (median): more steadies it, costs time
threads = torch.get_num_threads()  # torch's intra-op threads for the copy: 1 shows what one core streams

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The machine, in one line
#
# `measure.hardware_line()` is printed at the top of every notebook and saved with every result
# (`results/*.json`, key `provenance`). It names the CPU (physical cores / threads), the RAM, the GPU if
# there is one, and the versions of the packages that shape the figures. The two cells below show the same
# facts as a table; their output differs between machines, so nbval does not compare it.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
facts = {
    "CPU": measure.cpu_name(),
    "physical cores / threads": f"{psutil.cpu_count(logical=False)} / {os.cpu_count()}",
    "torch intra-op threads": torch.get_num_threads(),
    "RAM (GiB)": round(psutil.virtual_memory().total / 2**30, 1),
    "GPU": measure.gpu_name() or "none",
}
pd.Series(facts, name="value").to_frame()

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
pd.Series(measure.versions(), name="version").fillna("not installed").to_frame()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Which optional parts work here
#
# Nothing in the course *requires* a GPU, FFCV or TensorFlow: a notebook that needs one of them says what it
# skipped. `capabilities.check_all()` tries each part for real (it imports FFCV, compiles a small function
# with `torch.compile`, asks Pillow which JPEG library it was built with) and says how to add what is missing.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
found = capabilities.check_all()
table = pd.DataFrame([vars(c) for c in found]).set_index("name")
table

# %% [markdown] slideshow={"slide_type": "-"}
# Whatever this machine has, the table has one row per optional part and says how to add each missing one
# (this cell's output is compared by nbval):

# %% slideshow={"slide_type": "subslide"}
assert all(c.ok or c.how_to_add for c in found), "a missing part without instructions"
print(len(found), "parts checked:", ", ".join(c.name for c in found))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## How fast does this machine move memory?
#
# Many of the later results are *bandwidth* results: a shuffle writes an index, a gather copies rows, a
# fused kernel saves round trips to RAM. So we measure it once here.
#
# **Prediction:** a laptop or cloud-VM core
# streams about 5-10 GB/s each way from RAM, so a copy (bytes read plus bytes written) should run at about
# 5-20 GB/s on a few cores, a whole server socket several times more; a buffer that fits in cache should copy at
# least 2x faster than one that must come from RAM.
#
# The copy being timed is one line per library: torch's `dst.copy_(src)` (split over `threads` intra-op
# threads when the buffer is large) and numpy's `np.copyto(dst, src)` (one thread). Each copy reads the
# buffer and writes another, so it moves twice the buffer's bytes. A small buffer copies in microseconds,
# shorter than a clock read is precise, so each timed round runs many copies and divides.

# %% slideshow={"slide_type": "subslide"}
# shown from fastloops_helpers.experiments.bandwidth
# the package's, which notebooks 04, 05, 06 and 08 call for their own predictions
LIBRARIES = ("torch", "numpy")


def copier(nbytes: int, library: str = "torch") -> tuple[int, Callable[[], object]]:
    """Return (bytes moved per call, fn) where fn copies an `nbytes` float32 buffer into another once."""
    n = max(nbytes // 4, 1)
    if library == "torch":
        src, dst = torch.rand(n), torch.empty(n)
        return 2 * n * 4, lambda: dst.copy_(src)  # torch splits a large copy over its intra-op threads
    if library == "numpy":
        np_src, np_dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
        return 2 * n * 4, lambda: np.copyto(np_dst, np_src)  # numpy copies on one thread
    raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")


def copy_rates(
    nbytes: int, libraries: tuple[str, ...] = LIBRARIES, repeat: int | None = None, threads: int | None = None
) -> dict[str, float]:
    """Return {library: GB/s} copying an `nbytes` buffer (read + write counted), libraries interleaved."""
    made = {lib: copier(nbytes, lib) for lib in libraries}
    inner = max(1, 2**26 // nbytes)  # small buffers: many copies per round so the clock can see them
    with torch_threads(threads):
        seconds = measure.per_call({lib: fn for lib, (_, fn) in made.items()}, number=inner, repeat=repeat)
    return {lib: made[lib][0] / measure.median(seconds[lib]) / 1e9 for lib in libraries}


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
bw = bandwidth.compare([cache_mb, middle_mb, copy_mb], repeat, threads)
bw.table().pivot(index="size_mb", columns="library", values="gb_per_s").round(1)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.lines(bw.table(), x="size_mb", y="gb_per_s", hue="library", logy=False,
                  title="Copy bandwidth (read + write)", xlabel="buffer size (MiB)", ylabel="GB/s")
plots.save(fig, "00_setup-bandwidth")
for key, value in bw.figures.items():
    print(f"{key}: {value:.1f} GB/s")
_ = measure.predicted("copy from RAM", 5, 20, bw.figures["copy_gb_per_s_ram"], "GB/s")
_ = measure.predicted("cache copy / RAM copy", 2, float("inf"),
                      bw.figures["copy_gb_per_s_cache"] / bw.figures["copy_gb_per_s_ram"], "x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The figure to remember is `copy_gb_per_s_ram`: the rate at which the machine streams a buffer far larger than
# its caches. Notebook 04 compares the cost of a shuffle against it and notebook 05 uses it to predict what
# operator fusion saves. The RAM estimate misses on a server (more memory channels) or under a neighbour that
# streams memory too; the cache ratio depends on the cache sizes of this CPU, and at the smoke scale the "RAM"
# buffer may still partly fit in a large L3.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The scale knob
#
# One environment variable, `FASTLOOPS_SCALE`, sets the size of every experiment: `smoke` (CI, each notebook
# under a minute on 2 cores), `workshop` (the default; the outputs stored in these notebooks), `full` (the
# seeds' own sizes). Every size lives in one table, `config.SIZES`; a notebook reads its own rows with
# `config.size(name)` or `config.sizes(prefix)`.

# %% slideshow={"slide_type": "subslide"}
sizes = pd.DataFrame(config.SIZES, index=list(config.SCALES)).T
sizes

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print("active scale:", config.scale())

# %% [markdown] slideshow={"slide_type": "subslide"}
# To change it, set the variable before starting Jupyter or running a command, for example
# `FASTLOOPS_SCALE=full make lab` or `make reproduce SCALE=full`. Each notebook reads its sizes once, in its
# defaults cell at the top, and passes them to the functions that measure: to try another size in a running
# notebook, change that cell (or read another scale's row, `config.size("copy_mb", "full")`) and re-run the
# cells below it. An unknown scale is refused with the list of valid ones:

# %% slideshow={"slide_type": "-"}
try:
    config.scale("huge")
except ValueError as err:
    print(err)

# %% [markdown] slideshow={"slide_type": "-"}
# `FASTLOOPS_DEVICE` picks the device the same way (`cpu`, `cuda`, `cuda:1`); by default it is CUDA when torch
# sees a GPU and the CPU otherwise. `FASTLOOPS_DATA` and `FASTLOOPS_RESULTS` move the data and results folders.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Saving what we measured
#
# Each notebook ends by saving its figures with their provenance, so `make reproduce` can gather them into
# `results/REPORT.md`:

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures = dict(bw.figures, **{f"has_{c.name.split(' ')[0].lower()}": float(c.ok) for c in found})
sleeps = measure.measure(lambda: __import__("time").sleep(0.05), repeat=3, warmup=0)  # is the timer honest?
figures["timer_sleep_ratio"] = measure.median(sleeps) / 0.05
path = measure.save_results("00_setup", figures, rows=bw.rows, knobs=bw.knobs, repeats=bw.repeats)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# This machine's line above is the context for every number that follows. The table of optional parts tells
# which later sections will run here and which will only explain what a GPU or FFCV would show. The measured
# RAM copy rate, `copy_gb_per_s_ram`, is the yardstick that later notebooks set their predictions against.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# There is no seed claim to reproduce yet, only the tools the later checks rely on: the timer must be honest
# (a sleep measures as long as it was asked to, within scheduler noise), and the copy from RAM must not be faster than
# the copy from cache. The claims registry holds the thresholds.

# %% slideshow={"slide_type": "-"}
from fastloops_helpers.book import claims

claims.check("timer_sleep_ratio", figures)  # measured and saved with the other figures above
claims.check("cache_over_ram_copy", bw.figures)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each solution measures with the functions above and changes none of the notebook's variables.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Does one core saturate the memory bus here? Measure the RAM-sized copy with one torch thread,
# `bandwidth.copy_bandwidth(copy_mb * 2**20, "torch", repeat, threads=1)`, and with the defaults' `threads`.
# *Look for* the ratio: near one, one core already streams what the memory delivers (typical of a laptop or a
# small VM); near the thread count, each core adds bandwidth (typical of a server with many memory channels).

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
ex1_before = torch.get_num_threads()
ex1_one = bandwidth.copy_bandwidth(copy_mb * 2**20, "torch", repeat, threads=1)
ex1_all = bandwidth.copy_bandwidth(copy_mb * 2**20, "torch", repeat, threads=threads)
print(f"{copy_mb} MiB copy: 1 thread {ex1_one:.1f} GB/s, {threads} threads {ex1_all:.1f} GB/s: "
      f"{ex1_all / ex1_one:.2f}x from {threads} threads")
assert ex1_one > 0 and ex1_all > 0 and torch.get_num_threads() == ex1_before  # the thread count is restored

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Where does this machine's cache end? Measure `bandwidth.copy_bandwidth` for buffers from 1/16 MiB
# up to twice `copy_mb`, in steps of four, and find the step with the largest fall in GB/s. *Look for* a
# plateau at the small sizes (the caches), a fall, and a second plateau (RAM); compare the size of the fall
# with the last-level cache that `lscpu` reports, and check that `copy_mb` lies on the RAM plateau.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
ex2_sizes = sorted({4.0**k for k in range(-2, 10) if 4.0**k < copy_mb} | {copy_mb, 2 * copy_mb})
ex2_rates = {mb: bandwidth.copy_bandwidth(int(mb * 2**20), "torch", repeat, threads) for mb in ex2_sizes}
for mb, rate in ex2_rates.items():
    print(f"{mb:9.4g} MiB: {rate:6.1f} GB/s")
ex2_falls = {(a, b): ex2_rates[a] / ex2_rates[b] for a, b in zip(ex2_sizes, ex2_sizes[1:])}
ex2_edge = max(ex2_falls, key=ex2_falls.get)
print(f"largest fall: {ex2_falls[ex2_edge]:.2f}x between {ex2_edge[0]:g} and {ex2_edge[1]:g} MiB")
print(f"copy_mb = {copy_mb} MiB copies {ex2_rates[copy_mb] / ex2_rates[2 * copy_mb]:.2f}x as fast as twice that "
      f"(near 1x: it measures RAM, not a cache)")
assert len(ex2_rates) == len(ex2_sizes) >= 4 and all(rate > 0 for rate in ex2_rates.values())

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3.** Which notebooks lose a section on this machine? From the table of optional parts (`found`), list
# the notebooks named in `used_by` of each missing part, and the command that would add it. *Look for* the
# parts a GPU machine or a `make setup` with the system libraries would add.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
ex3_missing = [c for c in found if not c.ok]
ex3_losing = sorted({nb.strip() for c in ex3_missing for nb in c.used_by.split(",")})
for c in ex3_missing:
    print(f"missing {c.name}: notebooks {c.used_by} skip a part; to add it: {c.how_to_add}")
print(f"{len(ex3_missing)} of {len(found)} parts missing; notebooks affected: {', '.join(ex3_losing) or 'none'}")
assert all(c.how_to_add and c.used_by for c in ex3_missing)
