# %% [markdown] slideshow={"slide_type": "slide"}
# # 13 · Conclusion: every result side by side
#
# | | |
# |---|---|
# | **Question** | Which of the seeds' claims hold on this machine, by how much, and what should a fast training loop do first? |
# | **Seeds** | all |
# | **GPU** | no: it reads what the other notebooks saved; claims that need a GPU are marked as such |
# | **Run time** | a few seconds at every scale (it measures nothing itself) |
#
# Every notebook saved its figures, with the machine and scale they came from, as JSON under `results/`
# (`timing.save_results`), and `python -m fastloops_helpers.bench` saved the benchmarks' figures beside them.
# This notebook reads them all. Run it after the others (`make reproduce` does); a figure whose notebook has
# not run yet shows as "not measured".

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import pandas as pd

from fastloops_helpers import claims, config, measure, report

folder = config.results_dir()
docs = claims.load_figures(folder)
print(config.describe())
print(measure.hardware_line())
print(f"{len(docs)} saved results in {folder}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## What was saved, where and at which scale
#
# One row per saved result: the scale it ran at, the device, and how many figures it holds. Results from
# different scales or machines should not be compared with each other; the ratios inside one result can.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
saved = pd.DataFrame([{"result": name, "scale": d["provenance"].get("scale"), "device": d["provenance"].get("device"),
                       "figures": len(d["figures"]), "date": d["provenance"].get("date")} for name, d in docs.items()])
saved

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The seeds' claims, measured here
#
# Each claim of the seeds is tied to one saved figure (a ratio measured within one run) and a threshold
# (`fastloops_helpers.claims.CLAIMS`). The status is:
# - **reproduced**: the figure passes the threshold on this machine;
# - **not reproduced here**: it was measured and does not pass; the notebook named in `source` explains why
#   (usually the hardware: two CPU cores instead of a GPU server);
# - **needs a GPU**: the seed's effect comes from a GPU (asynchronous copies, kernels running while the CPU
#   loads the next batch); the CPU figure is shown for reference but says nothing about the claim;
# - **not measured**: its notebook or benchmark has not run yet.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
table = claims.evaluate(folder)
with pd.option_context("display.max_colwidth", 70, "display.float_format", "{:.3g}".format):
    display(table[["seed", "claim", "seed figure", "measured", "needed", "status", "source"]])

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print(table.status.value_counts().to_string())

# %% [markdown] slideshow={"slide_type": "subslide"}
# The table has one row per claim, and every status is one of the four above (this cell's output is compared
# by nbval):

# %% slideshow={"slide_type": "-"}
allowed = {"reproduced", "not reproduced here", "needs a GPU", "not measured"}
print("claims evaluated:", len(table), "| statuses valid:", set(table.status) <= allowed)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The checklist, ordered by what it paid here
#
# The advice of the whole course, each item with the speed-up it gave on this machine (the figure it comes
# from is named), largest first. On another machine the order can change: a GPU moves the balance towards
# the input pipeline, more cores make workers cheaper, a faster disk makes decoding the bottleneck sooner.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
with pd.option_context("display.max_colwidth", 90, "display.float_format", "{:.3g}".format):
    display(claims.checklist(folder))

# %% [markdown] slideshow={"slide_type": "-"}
# Two items have no single figure but follow from notebooks 06 and 07: move nested batches to the device with
# one tree map (`devices.move_to`), with pinned memory and `non_blocking=True` only when a GPU copy can overlap
# with compute; and measure where the time goes (`timeline`) before tuning anything.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The report
#
# `make reproduce` runs every notebook and benchmark and writes `results/REPORT.md` with these two tables, every
# saved figure and plot, and each notebook's run time. The same builder can run on any folder of results:

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
path = report.build(folder)
print("wrote", path, f"({len(path.read_text().splitlines())} lines)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# The largest payoffs on a CPU-only machine come from doing per-batch what was done per-sample: fetching,
# decoding once ahead of time, transforming. The seeds' GPU claims (overlap of loading with a heavy model,
# pinned asynchronous copies) cannot be checked here and are marked as such, not guessed.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# This notebook reproduces nothing itself; its check is that the table above covers every claim in
# `claims.CLAIMS` with a valid status (printed in the compared cell above).

# %% slideshow={"slide_type": "-"}
print("holds:", len(table) == len(claims.CLAIMS) and set(table.status) <= allowed)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Run `make reproduce SCALE=full` on a GPU machine and compare the two reports: which statuses change?
# 2. Add a claim to `claims.CLAIMS` for a figure that notebook 08 saves (e.g. the cached-over-cold read ratio)
#    and re-run this notebook.
