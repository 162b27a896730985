# %% [markdown] slideshow={"slide_type": "slide"}
# # 00 · What machine am I on?
#
# | | |
# |---|---|
# | **Question** | What hardware and software does this machine have, which optional parts of the course work here, and how big will the experiments be? |
# | **Seeds** | all: every later figure is only meaningful next to the machine that produced it |
# | **GPU** | optional: this notebook reports what it finds |
# | **Run time** | <!-- run-time --> workshop ~38 s (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# Every measurement in this course is a property of a machine, not of a library. Before racing loaders we
# write down what we race them on, check which optional pieces (GPU, FFCV, TensorFlow, libjpeg-turbo,
# `torch.compile`) work, and measure the one number that predicts many later results: how fast this
# machine copies memory.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import pandas as pd

from fastloops_helpers.measure import capabilities, plots
from fastloops_helpers import config, measure
from fastloops_helpers.experiments import bandwidth

print(config.describe())
print(measure.hardware_line())

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The machine, in one line
#
# `measure.hardware_line()` is printed at the top of every notebook and saved with every result
# (`results/*.json`, key `provenance`). It names the CPU (physical cores / threads), the RAM, the GPU if
# there is one, and the versions of the packages that shape the figures. The two cells below show the same
# facts as a table; their output differs between machines, so nbval does not compare it.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
import os
import psutil
import torch

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

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
bw = bandwidth.run()
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
# `FASTLOOPS_SCALE=full make lab` or `make reproduce SCALE=full`; inside a running kernel,
# `os.environ["FASTLOOPS_SCALE"] = "smoke"` takes effect for the cells after it. An unknown value is
# refused with the list of valid ones:

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

sleeps = measure.measure(lambda: __import__("time").sleep(0.05), repeat=3, warmup=0)
claims.check("timer_sleep_ratio", measure.median(sleeps) / 0.05)
claims.check("cache_over_ram_copy", bw.figures)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Run this notebook with `FASTLOOPS_SCALE=full`. Does `copy_gb_per_s_ram` change once the buffer is 1 GiB?
#    What does that tell you about the size of this machine's last-level cache?
# 2. Call `torch.set_num_threads(1)` before `bandwidth.run()`. Does one core saturate the memory bus here?
# 3. If a part is missing in the table above, follow its `how_to_add` and run the table again.
