# %% [markdown] slideshow={"slide_type": "slide"}
# # 12 · Scaling out: sharded loading under DistributedDataParallel
#
# | | |
# |---|---|
# | **Question** | When one process is not enough, how does each process load only its share of the data, does training on shards give the same model as one process with the same global batch, and what did `DataParallel` do before DDP? |
# | **Seeds** | 000/001 ("use DataParallel / DistributedDataParallel" as the automatic answer to the device problem), 002 (one loader per GPU process) |
# | **GPU** | no: 2 CPU processes with the gloo backend here; the same script uses nccl, one GPU per process, on a GPU machine |
# | **Run time** | <!-- run-time --> workshop ~52 s (measured on AMD EPYC, 2 cores, 2026-11-23) |
#
# PyTorch's established engine for data-parallel training is `DistributedDataParallel` (DDP) launched by
# `torchrun`: one process per device, each with a full copy of the model, each reading a different shard of
# every epoch, and an all-reduce that averages the gradients after every backward pass. The loader's whole job
# changes to: give rank `r` of `W` its own disjoint share of a common per-epoch order. `DistributedSampler`
# does that for `DataLoader`; `BatchLoader(rank=r, world_size=W)` does the same for the helpers' loader.
#
# The training script is `fastloops_helpers/experiments/distributed.py` (the Otto MLP of notebook 10). This notebook
# launches it with `torchrun --standalone --nproc_per_node=2` and reads what the ranks logged.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from fastloops_helpers import config, measure
from fastloops_helpers.experiments import distributed
from fastloops_helpers.measure import plots
from fastloops_helpers.models import MLP

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"}
ddp = config.sizes("ddp")
rows = ddp["rows"]              # Otto rows (train + validation): an odd train split shows the padding rule
epochs = ddp["epochs"]          # each epoch: every rank sees its shard once
batch_size = ddp["batch_size"]  # per rank; the global batch is batch_size x world_size
world_size = ddp["world_size"]  # processes (2 CPU processes here, gloo backend)
log_dir = Path(tempfile.mkdtemp(prefix="fastloops-ddp-"))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Launching two ranks
#
# `distributed.launch` runs `python -m torch.distributed.run --standalone --nproc_per_node=2 -m
# fastloops_helpers.experiments.distributed ...` and waits. `torchrun` starts the processes and sets `RANK`, `WORLD_SIZE`
# and `LOCAL_RANK` in each; the script joins the process group (gloo on the CPU, nccl when there are GPUs),
# wraps the model in DDP and trains. Each rank records the row ids it trained on in every epoch (the data
# carries an `id` column, so this is what the rank actually saw, not what it was meant to see), its epoch
# times, and rank 0 saves the final weights.
#
# We run it twice: with the helpers' `BatchLoader` and with `DataLoader` + `DistributedSampler`.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
runs = {}
for loader in ("helpers", "dataloader"):
    with measure.Timer() as t:
        runs[loader] = distributed.launch(log_dir, loader, world_size, rows, epochs, batch_size)
    measure.show(f"torchrun with the {loader} loader, {world_size} ranks, {epochs} epochs (start-up included)", t.seconds)

# %% slideshow={"slide_type": "-"}
for loader, logs in runs.items():
    print(loader, "ranks:", [log["rank"] for log in logs], "backend:", logs[0]["backend"],
          "| every rank logged every epoch:", all(len(log["epochs"]) == epochs for log in logs))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Are the shards disjoint, and do they cover the data?
#
# **Prediction.** Every epoch, both ranks draw the same permutation (same seed, same epoch), and rank `r`
# takes every second index starting at `r`; so the two shards never overlap and together hold every row.
# One exception, by design: when the number of rows is not a multiple of the world size, `DistributedSampler`
# pads the order by repeating its first indices so that every rank runs the same number of steps (a rank
# with one step fewer would leave the other waiting forever in the all-reduce). `BatchLoader` follows the same
# rule. The check below reads the ranks' own logs.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
train_rows = runs["helpers"][0]["train_rows"]
checks = pd.DataFrame([{"loader": loader, "epoch": e, **distributed.check_shards(log_dir, loader, world_size, e, train_rows)}
                       for loader in runs for e in range(epochs)])
checks

# %% slideshow={"slide_type": "subslide"}
print("repeated ids == DistributedSampler's padding, every epoch:", bool((checks.repeated == checks.expected_padding).all()))
for loader, part in checks.groupby("loader"):
    print(f"{loader}: every epoch covered={part.covered.all()}, disjoint up to the padding={part.disjoint.all()}, "
          f"equal shard sizes={part.equal_sizes.all()}")

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
orders = [np.load(log_dir / f"helpers-rank0-epoch{e}.npy") for e in range(min(2, epochs))]
print("rank 0, first ids of epoch 0:", orders[0][:8], "| epoch 1:", orders[1][:8])
print("the order changes between epochs (set_epoch):", not np.array_equal(orders[0], orders[-1]) or epochs == 1)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Does DDP train the same model as one process?
#
# DDP averages the ranks' gradients; each rank's loss is a mean over its own batch of `batch_size` rows, and
# both ranks' batches have the same size, so the averaged gradient equals the gradient of the mean loss over
# the *union* of the two batches. A single process that trains on exactly those unions (the "global batch"),
# from the same initial weights, must therefore end with the same weights, up to float rounding in the
# all-reduce. `launch(..., reference=True)` runs that single process: at each step it concatenates what rank 0
# and rank 1 would get.
#
# "Up to float rounding" needs a tolerance. The all-reduce adds the two ranks' gradients in a different order
# than one process sums its batch, so the two runs differ in the last bits after the first step (about 1e-8),
# and training amplifies such differences step after step (momentum, ReLUs switching on or off). So we state
# the tolerance on the weights relative to the largest weight, and on the validation accuracy (both set in the check
# below); a real bug in sharding or averaging (a rank seeing the wrong rows, gradients summed
# instead of averaged) moves both far beyond that.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
reference = distributed.launch(log_dir, "helpers", world_size, rows, epochs, batch_size, reference=True)
diff = distributed.relative_weight_difference(log_dir / "helpers-rank0-weights.pt",
                                         log_dir / f"helpers-reference{world_size}-weights.pt")
acc = {"DDP, 2 ranks (helpers)": runs["helpers"][0]["val_accuracy"],
       "DDP, 2 ranks (DataLoader)": runs["dataloader"][0]["val_accuracy"],
       "1 process, same global batches": reference[0]["val_accuracy"]}
print(f"largest weight difference DDP vs one process, relative to the largest weight: {diff:.2e}")
pd.Series(acc, name="validation accuracy").to_frame()

# %% slideshow={"slide_type": "-"}
tolerance = 0.01      # relative weight difference: rounding grows over training but stays far below this
acc_tolerance = 0.005  # validation accuracy, absolute
same_acc = abs(acc["DDP, 2 ranks (helpers)"] - acc["1 process, same global batches"]) < acc_tolerance
print("weights match within 1 %:", diff < tolerance)
print("validation accuracy matches within 0.5 points:", same_acc)

# %% [markdown] slideshow={"slide_type": "subslide"}
# The `DataLoader` run reaches a similar accuracy but not the same weights: `DistributedSampler` draws its
# permutation with its own generator, so its batches differ from the helpers' (same rule, different random
# order).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## DataParallel: the older automatic solution
#
# The slide names two automatic solutions. `nn.DataParallel(model)` is the older one: one process, one Python
# thread per GPU. At every forward it **scatters** the batch (splits dimension 0 into one chunk per GPU),
# **replicates** the model (copies every weight from the first GPU to each of the others), runs the replicas
# in threads (`parallel_apply`), and **gathers** the outputs on the first GPU, where the loss is computed;
# backward runs through the same operations, so the gradients add up on the first GPU's parameters.
#
# Why DDP replaced it: the threads share one GIL, so the Python side of the replicas' forward passes runs one
# at a time; the weights travel from the first GPU at every step and the outputs and gradients pile up there
# (unbalanced memory and traffic); and one process cannot span several machines. DDP runs one process per
# GPU, broadcasts the weights once at the start, and overlaps the all-reduce of gradient buckets with the
# backward pass. PyTorch's documentation recommends DDP even on a single machine.
#
# **Prediction** for a machine without a GPU: DataParallel has no devices to scatter to (`device_ids` is
# empty), so its forward calls the module directly: the same output, and a time ratio of about 1x (one extra
# Python call, microseconds beside the forward pass).

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
dp_x = torch.randn(batch_size * world_size, 93)
here = distributed.data_parallel_here(MLP(), dp_x)
print("GPUs:", here["gpus"], "| DataParallel device_ids:", here["device_ids"], "| output equals the module's:", here["same_output"])

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
print(f"DataParallel over the plain module: predicted ~1x with no GPU, measured {here['dataparallel_over_module']:.2f}x"
      + (f": {'within' if abs(here['dataparallel_over_module'] - 1) < 0.2 else 'missed'} (20 %)" if not here["gpus"] else " (GPUs here)"))
if torch.cuda.is_available():
    ids = list(range(torch.cuda.device_count()))
    gpu_model, gpu_x = MLP().cuda(), dp_x.cuda()
    with torch.no_grad():
        by_hand = distributed.data_parallel_by_hand(gpu_model, gpu_x, ids)
        print(f"scatter -> replicate -> parallel_apply -> gather on {len(ids)} GPU(s) equals the module:",
              torch.allclose(by_hand, gpu_model(gpu_x), atol=1e-5))
else:
    print("no GPU: skipped scatter -> replicate -> parallel_apply -> gather (distributed.data_parallel_by_hand)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# On a machine with several GPUs, `distributed.data_parallel_by_hand` performs the four steps one by one and
# matches `DataParallel`'s output; with one GPU, the scatter makes one chunk and the replicate one copy.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Throughput per process
#
# **Prediction.** On a GPU machine each rank owns a GPU, and the loader of each rank only has to keep its own
# GPU fed: total throughput grows with the number of GPUs until the all-reduce or the input pipeline limits it.
# This machine has 2 CPU cores and the "device" is the same 2 cores: two ranks with one thread each do the same
# arithmetic as one process with two threads, plus an all-reduce per step. So expect the total samples/s of two
# ranks to be about that of one process, not double it.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
single = distributed.launch(log_dir / "single", "helpers", 1, rows, epochs, batch_size * world_size)
def per_epoch(logs, label):
    steady = [e for e in logs[0]["epochs"]][1:] or logs[0]["epochs"]  # epoch 0 includes warm-up
    secs = float(np.median([e["seconds"] for e in steady]))
    return {"run": label, "ranks": len(logs), "samples/s per rank": steady[0]["samples"] / secs,
            "samples/s total": steady[0]["samples"] * len(logs) / secs}
speed = pd.DataFrame([per_epoch(runs["helpers"], "DDP, helpers' loader"),
                      per_epoch(runs["dataloader"], "DDP, DataLoader + DistributedSampler"),
                      per_epoch(single, "1 process (torchrun, 1 rank)")])
speed.round(0)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.bars(speed, "samples/s total", "run", baseline="1 process (torchrun, 1 rank)",
                 title="Otto MLP training, whole job", unit="samples/s")
plots.save(fig, "12_scaling_out-throughput")
ratio = speed["samples/s total"].iloc[0] / speed["samples/s total"].iloc[2]
gpus = torch.cuda.device_count()
predicted = f"up to {min(world_size, gpus)}x (one GPU per rank)" if gpus else "~1x (the same cores)"
print(f"2 ranks vs 1 process, total samples/s: predicted {predicted}, measured {ratio:.2f}x "
      f"on {config.device().type.upper()} with {os.cpu_count()} cores")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Read the ratio above against the prediction. With as many processes as devices (GPUs) it would approach the number of processes.
# With two processes on the same CPU cores there is nothing extra to compute with, and each step also pays an
# all-reduce and a second copy of the Python overhead, which is what pulls the ratio below one: the speed-up
# of DDP is a property of having more devices, not of having more processes.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## FFCV in a distributed job
#
# FFCV's `Loader(..., distributed=True)` does what `DistributedSampler` does (it even uses it inside its
# RANDOM and SEQUENTIAL orders, seed 0 by default, one shard per rank, `set_epoch` via the loader's epoch
# counter). Its QUASI_RANDOM order, the one that saves disk reads when the data set does not fit in RAM
# (notebooks 04 and 11), is *not available* in distributed mode: the loader refuses it. The cell below asks
# the installed FFCV, when it is here.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
from fastloops_helpers.data import ffcv_io
from fastloops_helpers.data import otto_csv as otto

if ffcv_io.have_ffcv():
    import ffcv
    X, y, _, _ = otto.load_otto(rows=rows)
    beton = ffcv_io.write_table_beton(log_dir / "otto.beton", X, y)
    try:
        ffcv.loader.Loader(str(beton), batch_size=batch_size, order=ffcv.loader.OrderOption.QUASI_RANDOM,
                           distributed=True, os_cache=False, pipelines={})
        print("FFCV accepted QUASI_RANDOM with distributed=True")
    except Exception as exc:
        print(f"FFCV refuses it: {type(exc).__name__}: {exc}")
else:
    print("ffcv is not installed here (see notebook 00): FFCV's Loader raises NotImplementedError "
          "for QUASI_RANDOM with distributed=True.")

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures = {"ddp_matches_single": float(diff < tolerance and same_acc), "relative_weight_difference": diff,
           "shards_ok": float(checks.covered.all() and checks.disjoint.all()),
           "ddp_total_over_single": float(ratio)}
figures |= {f"samples_per_s_total_{i}": float(v) for i, v in enumerate(speed["samples/s total"])}
print("saved", measure.save_results("12_scaling_out", figures, rows=speed.to_dict("records") + checks.to_dict("records"),
                                   knobs=ddp, repeats=epochs).name)

# %% [markdown] slideshow={"slide_type": "subslide"}
# The helpers' grouped shuffle (`BatchLoader(shuffle="grouped", rank=r, world_size=W)`) has no such limit: the
# grouped permutation is computed from (seed, epoch) like the full one, so every rank computes the same order
# and takes its own share of it.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# Under DDP the loader's job is sharding: the same permutation on every rank, every `W`-th index per rank,
# padding so all ranks take the same number of steps. The ranks' own logs show the shards disjoint and covering
# the data, and the final weights equal those of one process on the same global batches. More processes only
# help when there are more devices to feed (the ratio measured here is printed above). `DataParallel`, the
# slide's other automatic solution, scatters, replicates and gathers in one process every step; without a GPU
# it only calls the module.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The seeds' claim: DDP is the automatic, correct way to spread training over processes, each with its own data.
# Here: shards disjoint and covering every epoch, and DDP's weights and accuracy equal to one process's on the
# same global batches (within the tolerances stated above).

# %% slideshow={"slide_type": "-"}
holds = bool(checks.covered.all() and checks.disjoint.all() and diff < tolerance and same_acc)
print("holds:", holds)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Launch with `world_size = 3`. How many indices are padded per epoch now, and which ones are repeated?
# 2. Give the two ranks different seeds (edit `distributed.batches`). Which check above fails, and what would
#    that do to training?
# 3. Replace `shuffle=True` by `shuffle="grouped"` in `distributed.batches` and re-run the shard checks.
# 4. On a machine with two GPUs, time `nn.DataParallel(MLP().cuda())` against one rank of the DDP run with the same
#    global batch. Where does DataParallel spend the difference (profile `replicate` and `gather`)?
