# %% [markdown] slideshow={"slide_type": "slide"}
# # 00 · What machine am I on?
#
# | | |
# |---|---|
# | **Question** | What hardware and software does this machine have, which optional parts of the course work here, and how big will the experiments be? |
# | **Seeds** | all: every later figure is only meaningful next to the machine that produced it |
# | **GPU** | optional: this notebook reports what it finds |
# | **Run time** | <!-- run-time --> workshop ~20 s (measured on AMD EPYC, 2 cores, 2026-12-07) |
#
# Every measurement in this course is a property of a machine, not of a library. Before racing loaders we
# write down what we race them on, check which optional pieces (GPU, [FFCV](https://ffcv.io), TensorFlow, libjpeg-turbo,
# `torch.compile`) work, and measure the one number that predicts many later results: how fast this
# machine copies memory.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import os

import numpy as np
import pandas as pd
import psutil
import torch

from fastloops_helpers import config, measure
from fastloops_book.source import show_code
from fastloops_helpers.experiments import bandwidth
from fastloops_helpers.experiments.bandwidth import numpy_copy, torch_copy
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
assert [c.name for c in found] == list(capabilities.CHECKS)  # one row per part, whatever this machine has
print(len(capabilities.CHECKS), "parts checked:", ", ".join(capabilities.CHECKS))


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
# The copy being timed is one line per library, in the cell below: torch's `dst.copy_(src)` (split over
# `threads` intra-op threads when the buffer is large) and numpy's `np.copyto(dst, src)` (one thread). They live
# in the package (`experiments.bandwidth`), because later notebooks time the copy again; the cell renders the
# code that runs. Each copy reads the buffer and writes another, so it moves twice the buffer's bytes.

# %% slideshow={"slide_type": "subslide"}
show_code(torch_copy, numpy_copy)

# %% [markdown] slideshow={"slide_type": "-"}
# A small buffer copies in microseconds, shorter than a clock read is precise, so each timed round runs many
# copies and divides. `copier` makes a library's two buffers; `copy_rates` times every library's copy in the same
# rounds and counts the bytes read and written:

# %% slideshow={"slide_type": "subslide"}
show_code(bandwidth.copier, bandwidth.copy_rates)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
copies = {"torch": torch_copy, "numpy": numpy_copy}  # the functions rendered above: what is timed
bw = bandwidth.compare([cache_mb, middle_mb, copy_mb], repeat, threads, copies)
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
# its caches. Notebooks 04, 05, 06 and 08 time the same copies (`bandwidth.copy_bandwidth`, with the package's
# `torch_copy`, or `numpy_copy` where the copy they predict is numpy's) when they run, and set their own predictions against the rate they measure, so a busy moment moves
# both alike. The RAM estimate misses on a server (more memory channels) or under a neighbour that streams memory
# too; the cache ratio depends on the cache sizes of this CPU, and at the smoke scale the "RAM" buffer may still
# partly fit in a large last-level cache.

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
# which later sections will run here and which will only explain what a GPU or FFCV would show. The RAM copy
# rate, `copy_gb_per_s_ram`, is the yardstick: the later notebooks that predict from it measure it again with
# the same function, in their own run.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# There is no seed claim to reproduce yet, only the tools the later checks rely on: the timer must be honest
# (a sleep measures as long as it was asked to, within scheduler noise), and the copy from RAM must not be faster than
# the copy from cache. The claims registry holds the thresholds; nbval compares only which claims are checked and
# what each needs:

# %% slideshow={"slide_type": "-"}
from fastloops_book import claims

checked = {"timer_sleep_ratio": figures, "cache_over_ram_copy": bw.figures}  # measured and saved above
for name in checked:
    print(f"{name}: {claims.get(name).claim}; needs {claims.get(name).needed()}")

# %% [markdown] slideshow={"slide_type": "-"}
# Both verdicts depend on this machine and its load (the cache ratio also on the sizes of its caches, and at the
# smoke scale the "RAM" buffer may partly fit in a large last-level cache), so nbval does not compare them:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for name, measured in checked.items():
    claims.check(name, measured)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each solution measures with the functions above and changes none of the notebook's variables.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** Does one core saturate the memory bus here? Measure the RAM-sized copy with one torch thread,
# `bandwidth.copy_bandwidth(copy_mb * 2**20, "torch", repeat, threads=1)`, and with the defaults' `threads`.
# *Look for* the ratio: near one, one core already streams what the memory delivers (typical of a laptop or a
# small VM); near the thread count, each core adds bandwidth (typical of a server with many memory channels).
# `copy_bandwidth` sets torch's thread count for the copy and must put it back: check that too.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex1_before = torch.get_num_threads()
# one thread, then all, in each of 6 rounds: a busy spell that slows one round's single thread moves one ratio of six
ex1_rates = [[bandwidth.copy_bandwidth(copy_mb * 2**20, "torch", repeat, threads=t) for t in (1, threads)]
             for _ in range(6)]
ex1_one, ex1_all = (measure.median([r[i] for r in ex1_rates]) for i in (0, 1))
ex1_gain = measure.median([all_ / one for one, all_ in ex1_rates])
ex1_answer = ("more threads slow the copy: a thread waits for a core that another process holds" if ex1_gain < 0.8
              else "one core already streams about what the memory delivers" if ex1_gain < (1 + threads) / 2
              else "each core adds bandwidth: one core does not saturate the memory bus")
print(f"{copy_mb} MiB copy: 1 thread {ex1_one:.1f} GB/s, {threads} threads {ex1_all:.1f} GB/s: "
      f"{ex1_gain:.2f}x from {threads} threads (medians of 6 paired rounds): {ex1_answer}")
assert torch.get_num_threads() == ex1_before, "copy_bandwidth left torch's thread count changed"
# threads that share one memory bus can at best add their own copies' bandwidth: a gain past the thread count is a
# clock or a buffer gone wrong, not the answer
assert ex1_gain < 1.25 * threads, f"{threads} threads gained {ex1_gain:.2f}x, more than their count"

# %% [markdown] slideshow={"slide_type": "subslide"}
# **2.** Where does this machine's cache end? Read the data caches' sizes (`capabilities.cache_sizes()`, from
# Linux's `/sys/devices/system/cpu/cpu0/cache`; `lscpu` shows the same), then measure `bandwidth.copy_bandwidth` for
# buffers from 1/16 MiB up past the last-level cache, in steps of four. A copy touches two buffers, so a size fits
# a cache while twice it does. *Look for* a plateau at the small sizes, falls where the buffers outgrow each cache
# level, and the RAM plateau, which starts only after the *last-level* cache (the largest fall may sit at an
# earlier level's edge). Is `copy_mb` on the RAM plateau?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
import math

ex2_caches = capabilities.cache_sizes()  # {"L1d": bytes, "L2": bytes, "L3": bytes}: {} where Linux does not say
ex2_llc_name = max(ex2_caches, key=lambda name: int(name[1]), default=None)
ex2_llc_mb = ex2_caches[ex2_llc_name] / 2**20 if ex2_llc_name else copy_mb / 2  # without it: assume copy_mb is past it
ex2_top = 4.0 ** math.ceil(math.log(2 * ex2_llc_mb, 4))  # the first step whose two buffers are 4x the cache or more
ex2_sizes = sorted({4.0**k for k in range(-2, 20) if 4.0**k <= ex2_top} | {copy_mb})
ex2_rates = {mb: bandwidth.copy_bandwidth(int(mb * 2**20), "torch", repeat, threads) for mb in ex2_sizes}
ex2_ram = [mb for mb in ex2_sizes if 2 * mb > ex2_llc_mb]  # two buffers no longer fit the last-level cache
ex2_fall = max(zip(ex2_sizes, ex2_sizes[1:]), key=lambda ab: ex2_rates[ab[0]] / ex2_rates[ab[1]])
print("data caches:", ", ".join(f"{k} {v / 2**20:g} MiB" for k, v in ex2_caches.items()) or "not reported here")
for mb, rate in ex2_rates.items():
    print(f"{mb:9.4g} MiB: {rate:6.1f} GB/s" + ("  (RAM: two buffers exceed the last-level cache)" * (mb in ex2_ram)))
print(f"largest fall (single run): {ex2_rates[ex2_fall[0]] / ex2_rates[ex2_fall[1]]:.2f}x between {ex2_fall[0]:g} "
      f"and {ex2_fall[1]:g} MiB; the RAM plateau starts after the {ex2_llc_name or 'last-level cache'} "
      f"({ex2_llc_mb:g} MiB), at {ex2_ram[0]:g} MiB, where it copies at {ex2_rates[ex2_ram[0]]:.1f} GB/s")
print(f"copy_mb = {copy_mb} MiB: its two buffers take {2 * copy_mb / ex2_llc_mb:.1f}x the last-level cache: "
      + ("on the RAM plateau" if copy_mb in ex2_ram else "still partly cached: raise copy_mb on this machine"))
assert ex2_ram and 2 * ex2_sizes[-1] >= 4 * ex2_llc_mb  # the sweep reached well past the last-level cache, into RAM
ex2_cached = max(rate for mb, rate in ex2_rates.items() if mb not in ex2_ram)  # the fastest cached copy
assert ex2_cached > 1.2 * ex2_rates[ex2_sizes[-1]], "a copy that fits a cache should beat one from RAM"

# %% [markdown] slideshow={"slide_type": "-"}
# **3.** Which notebooks lose a section on this machine? From the table of optional parts (`found`), list
# the notebooks named in `used_by` of each missing part, and the command that would add it. Every list is read
# from the notebooks' cards (`capabilities.used_by`: the GPU's from their **GPU** row, the others' from their
# **Optional** row), so it cannot drift from them.
# *Look for* the parts a GPU machine or a `make setup` with the system libraries would add.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex3_missing = [c for c in found if not c.ok]
ex3_losing = sorted({nb.strip()[:2] for c in ex3_missing for nb in c.used_by.split(",")})
for c in ex3_missing:
    print(f"missing {c.name}: notebooks {c.used_by} skip a part; to add it: {c.how_to_add}")
print(f"{len(ex3_missing)} of {len(found)} parts missing; notebooks affected: {', '.join(ex3_losing) or 'none'}")
ex3_gpu = capabilities.gpu_notebooks()  # {number: "optional" | "needed"}, from each card's GPU row
print("the cards say a GPU is optional or needed in:", ", ".join(f"{k} ({v})" for k, v in ex3_gpu.items()))
ex3_expected = set() if torch.cuda.is_available() else set(ex3_gpu)  # without CUDA, each of them loses a part
assert not [c.name for c in ex3_missing if not c.how_to_add], "a missing part without instructions"
assert len(ex3_gpu) >= 2 and ex3_expected <= set(ex3_losing)  # every GPU notebook is named where CUDA is missing
