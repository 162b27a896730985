# %% [markdown] slideshow={"slide_type": "slide"}
# # 12 · Scaling out: sharded loading under DistributedDataParallel
#
# | | |
# |---|---|
# | **Question** | When one process is not enough, how does each process load only its share of the data, does training on shards give the same model as one process with the same global batch, and what did `DataParallel` do before DDP? |
# | **Seeds** | 000/001 ("use DataParallel / DistributedDataParallel" as the automatic answer to the device problem); no other seed mentions DDP, so the per-rank sharding here is PyTorch's and the project's |
# | **GPU** | optional: with a GPU for every rank, each rank trains on its own GPU (nccl); with fewer GPUs than ranks, or none, all ranks run on the CPU (gloo), and the notebook prints which; with GPUs, one more cell and exercise 4 time DataParallel on them |
# | **Optional** | ffcv: FFCV's distributed order is skipped without it |
# | **Run time** | <!-- run-time --> workshop ~37 s (measured on AMD EPYC, 2 cores, 2026-12-07) |
#
# PyTorch's established engine for data-parallel training is `DistributedDataParallel` (DDP) launched by
# `torchrun`: one process per device, each with a full copy of the model, each reading a different shard of
# every epoch, and an all-reduce that averages the gradients after every backward pass. The loader's whole job
# changes to: give rank `r` of `W` its own disjoint share of a common per-epoch order. `DistributedSampler`
# does that for `DataLoader`; `BatchLoader(rank=r, world_size=W)` does the same for the helpers' loader.
#
# The training script is `fastloops_helpers/experiments/distributed.py` (the Otto MLP of notebook 10). Its
# per-rank loading and training step are shown below; this notebook launches it with
# `torchrun --standalone --nproc_per_node=2` and reads what the ranks logged.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import atexit
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from fastloops_helpers import config, measure
from fastloops_book.source import show_code
from fastloops_helpers.experiments import distributed
from fastloops_helpers.measure import plots
from fastloops_helpers.models import MLP

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults"]
rows = config.size("ddp.rows")              # Otto rows (train + validation): an odd train split shows the padding rule
epochs = config.size("ddp.epochs")          # every rank sees its shard once per epoch; more epochs, steadier samples/s
batch_size = config.size("ddp.batch_size")  # per rank; the global batch is batch_size x world_size
world_size = config.size("ddp.world_size")  # processes (ranks): a GPU each (nccl) if there are enough, else the CPU (gloo)
gpus = torch.cuda.device_count() if config.device().type == "cuda" else 0  # GPUs the ranks may use (0 with FASTLOOPS_DEVICE=cpu)
lr = 0.05                                   # SGD's learning rate: larger learns faster and amplifies rounding
seed = 0                                    # the ranks' common permutation and the initial weights

# %% [markdown] slideshow={"slide_type": "slide"}
# ## What each rank runs
#
# Every rank builds its own loader over the whole data set and asks it for *its* batches of an epoch. With
# PyTorch's usual tools that is a `DistributedSampler` in a `DataLoader`: the sampler draws a permutation from
# (`seed`, epoch), the same on every rank, pads it to a multiple of `world_size`, and keeps every
# `world_size`-th index from position `rank`. The helpers' `BatchLoader(rank=r, world_size=W)` applies the same
# rule to its own permutation and gathers each batch with one indexing call instead of one `__getitem__` per row.
# These functions run inside the torchrun processes, so they live in the package; the cell below renders them
# from it.

# %% slideshow={"slide_type": "subslide"}
show_code(distributed.sampler_batches, distributed.helpers_batches)  # PyTorch's sharding, then the helpers'

# %% [markdown] slideshow={"slide_type": "-"}
# The training step is the plain one of notebook 10, with one difference: the model is wrapped in
# `DistributedDataParallel`, whose `backward` all-reduces (averages) the gradients of all ranks, bucket by
# bucket while the backward pass is still running, so every rank's optimizer takes the same step.

# %% slideshow={"slide_type": "subslide"}
show_code(distributed.ddp_model, distributed.train_epoch)  # run in the torchrun processes, one per rank

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Launching two ranks
#
# `distributed.launch` runs `python -m torch.distributed.run --standalone --nproc_per_node=2 -m
# fastloops_helpers.experiments.distributed ...` and waits. `torchrun` starts the processes and sets `RANK`, `WORLD_SIZE`
# and `LOCAL_RANK` in each. Where the ranks run is decided by one function, `placement(world_size, gpus)`: the
# notebook calls it to print the plan, and every rank calls it to find its own backend and device (no rank
# guesses `cuda:{LOCAL_RANK}` by itself, which on a machine with one GPU would send rank 1 to a GPU that does not
# exist). The rule:
#
# - a GPU for every rank: the nccl backend, rank `r` on GPU `r` (spare GPUs stay idle);
# - fewer GPUs than ranks, or none: the gloo backend, every rank on the CPU.
#
# Why not shrink the world to the GPUs there are? With one GPU that is a world of one rank: nothing to shard, no
# padding, an all-reduce over a single gradient, and the comparison with one process below would compare a
# process with itself. Keeping `world_size` ranks on the CPU keeps every lesson of this notebook (sharding,
# padding, DDP equal to one process) and gives up only speed, which the throughput section treats on its own.

# %% slideshow={"slide_type": "subslide"}
show_code(distributed.placement)  # called by the notebook here and by every rank for itself

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
backend, devices = distributed.placement(world_size, gpus)  # the plan every rank will compute for itself
print(f"{gpus} GPU(s) for {world_size} ranks -> backend: {backend}")
for rank, device in enumerate(devices):
    print(f"rank {rank}: {device}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The script joins the process group with that backend, wraps the model in DDP and trains. Each rank records
# the row ids it trained on in every epoch (the data carries an `id` column, so this is what the rank actually
# saw, not what it was meant to see), its backend, device and epoch times, and rank 0 saves the final weights.
#
# We run it twice: with the helpers' `BatchLoader` and with `DataLoader` + `DistributedSampler`.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
log_dir = Path(tempfile.mkdtemp(prefix="fastloops-ddp-"))  # the ranks' logs, row ids and weights
atexit.register(shutil.rmtree, log_dir, ignore_errors=True)  # tens of MB: removed at the end, or when the kernel exits
runs = {}
for loader in ("helpers", "dataloader"):
    with measure.Timer() as t:
        runs[loader] = distributed.launch(log_dir, loader, world_size, rows, epochs, batch_size, seed, lr=lr,
                                          gpus=gpus)
    measure.show(f"torchrun with the {loader} loader, {world_size} ranks, {epochs} epochs (start-up included)", t.seconds)

# %% slideshow={"slide_type": "subslide"}
for loader, logs in runs.items():
    planned = all(log["backend"] == backend and log["device"] == str(devices[log["rank"]]) for log in logs)
    print(loader, "ranks:", [log["rank"] for log in logs], "| every rank on its planned backend and device:", planned,
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
# and rank 1 would get (`reference_batches`, below).
#
# "Up to float rounding" needs a tolerance. The all-reduce adds the two ranks' gradients in a different order
# than one process sums its batch, so the two runs differ in the last bits after the first step (about 1e-8),
# and training amplifies such differences step after step (momentum, ReLUs switching on or off). So we state
# the tolerance on the weights relative to the largest weight, and on the validation accuracy (both set in the check
# below); a real bug in sharding or averaging (a rank seeing the wrong rows, gradients summed
# instead of averaged) moves both far beyond that.

# %% slideshow={"slide_type": "subslide"}
show_code(distributed.reference_batches)  # runs in the reference process, which torchrun does not start

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
reference = distributed.launch(log_dir, "helpers", world_size, rows, epochs, batch_size, seed, reference=True, lr=lr,
                               gpus=gpus)  # on rank 0's device
diff = distributed.relative_weight_difference(log_dir / "helpers-rank0-weights.pt",
                                         log_dir / f"helpers-reference{world_size}-weights.pt")
acc = {"DDP, 2 ranks (helpers)": runs["helpers"][0]["val_accuracy"],
       "DDP, 2 ranks (DataLoader)": runs["dataloader"][0]["val_accuracy"],
       "1 process, same global batches": reference[0]["val_accuracy"]}
print(f"largest weight difference DDP vs one process, relative to the largest weight: {diff:.2e}")
pd.Series(acc, name="validation accuracy").to_frame()

# %% slideshow={"slide_type": "subslide"}
tolerance = distributed.WEIGHT_TOLERANCE        # 1 % of the largest weight: rounding grows, but stays far below
acc_tolerance = distributed.ACCURACY_TOLERANCE  # half a point of validation accuracy
same_acc = abs(acc["DDP, 2 ranks (helpers)"] - acc["1 process, same global batches"]) < acc_tolerance
print("weights match within 1 %:", diff < tolerance)
print("validation accuracy matches within 0.5 points:", same_acc)

# %% [markdown] slideshow={"slide_type": "-"}
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
# The four steps, one by one (it runs on GPUs only):

# %% slideshow={"slide_type": "subslide"}
def data_parallel_by_hand(model: nn.Module, x: torch.Tensor, device_ids: list[int]) -> torch.Tensor:
    """Do what DataParallel's forward does on GPUs, step by step; needs CUDA and `model` on device_ids[0]."""
    from torch.nn.parallel import gather, parallel_apply, replicate, scatter

    chunks = scatter(x, device_ids)                        # split the batch along dim 0, one chunk per GPU
    replicas = replicate(model, device_ids[:len(chunks)])  # copy the weights to every GPU, at every call
    outputs = parallel_apply(replicas, [(c,) for c in chunks])  # one Python thread per GPU, sharing one GIL
    return gather(outputs, device_ids[0])                  # concatenate the outputs on the first GPU


# %% [markdown] slideshow={"slide_type": "-"}
# **Prediction** for a machine without a GPU: DataParallel has no devices to scatter to (`device_ids` is
# empty), so its forward calls the module directly: the same output, and a time ratio of about 1x (one extra
# Python call, microseconds beside the forward pass). The measurement wraps the model and times both calls in
# turns:

# %% slideshow={"slide_type": "subslide"}
show_code(distributed.data_parallel_here)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
dp_x = torch.randn(batch_size * world_size, 93)
here = distributed.data_parallel_here(MLP(), dp_x)
print("GPUs:", here["gpus"], "| DataParallel device_ids:", here["device_ids"], "| output equals the module's:", here["same_output"])

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if here["gpus"]:
    print(f"DataParallel over the plain module: {here['dataparallel_over_module']:.2f}x on {here['gpus']} GPU(s)")
else:
    _ = measure.predicted("DataParallel over the plain module, no GPU (~1x, +-20 %)", 0.8, 1.2,
                          here["dataparallel_over_module"], "x", ".2f")
if torch.cuda.is_available():
    ids = list(range(torch.cuda.device_count()))
    gpu_model, gpu_x = MLP().cuda(), dp_x.cuda()
    with torch.no_grad():
        by_hand = data_parallel_by_hand(gpu_model, gpu_x, ids)  # the cell above
        print(f"scatter -> replicate -> parallel_apply -> gather on {len(ids)} GPU(s) equals the module:",
              torch.allclose(by_hand, gpu_model(gpu_x), atol=1e-5))
else:
    print("no GPU: skipped scatter -> replicate -> parallel_apply -> gather (data_parallel_by_hand)")

# %% [markdown] slideshow={"slide_type": "-"}
# On a machine with several GPUs, `data_parallel_by_hand` performs the four steps one by one and
# matches `DataParallel`'s output; with one GPU, the scatter makes one chunk and the replicate one copy.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Throughput per process
#
# **Prediction.** When every rank owns a GPU (nccl), the loader of each rank only has to keep its own GPU fed:
# total throughput grows with the number of GPUs until the all-reduce or the input pipeline limits it. When the
# ranks run on the CPU (gloo: no GPU, or fewer GPUs than ranks), the "devices" are the machine's cores, shared:
# each rank gets cores / `world_size` threads, so the ranks do the same arithmetic on the same cores as one
# process with all of them, plus an all-reduce per step. Then expect the total samples/s of the ranks to be about
# that of one process, not a multiple of it. The one process runs on the ranks' kind of device (the CPU when they
# are on the CPU), so the ratio compares like with like; the cell prints which case this machine is.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
single_gpus = gpus if backend == "nccl" else 0  # one process on the kind of device the ranks used
single = distributed.launch(log_dir / "single", "helpers", 1, rows, epochs, batch_size * world_size, seed, lr=lr,
                            gpus=single_gpus)
speed = pd.DataFrame([distributed.throughput(runs["helpers"], "DDP, helpers' loader"),  # median epoch, not the 1st
                      distributed.throughput(runs["dataloader"], "DDP, DataLoader + DistributedSampler"),
                      distributed.throughput(single, "1 process (torchrun, 1 rank)")])
speed.round(0)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
fig = plots.bars(speed, "samples/s total", "run", baseline="1 process (torchrun, 1 rank)",
                 title="Otto MLP training, whole job", unit="samples/s")
plots.save(fig, "12_scaling_out-throughput")
ratio = speed["samples/s total"].iloc[0] / speed["samples/s total"].iloc[2]
low, high, why = (0, world_size, "one GPU per rank") if backend == "nccl" else (0.8, 1.2, "the same cores: ~1x, +-20 %")
_ = measure.predicted(f"{world_size} ranks over 1 process, total samples/s ({why})", low, high, ratio, "x", ".2f")
print(f"ranks on {', '.join(map(str, devices))} ({backend}); {os.cpu_count()} CPU cores")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Read the ratio above against the prediction. With as many processes as devices (GPUs) it would approach the number of processes.
# With the ranks on the same CPU cores there is nothing extra to compute with, and each step also pays an
# all-reduce and a second copy of the Python overhead, which can pull the ratio below one: the speed-up
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
figures = distributed.figures(checks.to_dict("records"), diff, acc["DDP, 2 ranks (helpers)"],
                              acc["1 process, same global batches"], speed.to_dict("records"))
knobs = {"rows": rows, "epochs": epochs, "batch_size": batch_size, "world_size": world_size, "lr": lr, "seed": seed,
         "backend": backend, "gpus": gpus}
print("saved", measure.save_results("12_scaling_out", figures, rows=speed.to_dict("records") + checks.to_dict("records"),
                                   knobs=knobs, repeats=epochs).name)
shutil.rmtree(log_dir)  # every log is read: the folder goes

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
# The slides' claim (seed 000/001): DDP is the automatic, correct way to spread training over processes, each with its own data.
# Here: shards disjoint and covering every epoch, and DDP's weights and accuracy equal to one process's on the
# same global batches (within the tolerances stated above).

# %% slideshow={"slide_type": "-"}
holds = bool(checks.covered.all() and checks.disjoint.all() and diff < tolerance and same_acc)
print("holds:", holds)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# The sharding functions above run in any process, so exercises 2 and 3 call them directly, without torchrun.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** More ranks. Compute one epoch's shards for `world_size` 3 and 4 with both sharding functions shown
# above (`sampler_batches` and `helpers_batches`, one call per rank) and check them with
# `distributed.shard_check`. *Predict on paper first:* every rank must get the same number of rows, so how many
# indices must be repeated for 3 and for 4 ranks, from the number of training rows? Then check your count, and
# find which rows are repeated: compare them with the first row of each rank.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex1_shards(make, train, ranks):
    return [torch.cat([b["id"] for b in make(train, batch_size, rank, ranks, seed, 0)]).numpy()
            for rank in range(ranks)]


ex1_train, _, _ = distributed.otto_tensors(rows, seed)
ex1_rows = len(ex1_train["X"])
ex1_ok = []
for ex1_ranks in (3, 4):
    for ex1_name, ex1_make in (("DistributedSampler", distributed.sampler_batches),
                               ("helpers", distributed.helpers_batches)):
        ex1_s = ex1_shards(ex1_make, ex1_train, ex1_ranks)
        ex1_check = distributed.shard_check(ex1_s, ex1_rows)
        ex1_ids, ex1_counts = np.unique(np.concatenate(ex1_s), return_counts=True)
        ex1_firsts = [int(s[0]) for s in ex1_s]
        ex1_pad = -ex1_rows % ex1_ranks  # DistributedSampler's padding
        print(f"{ex1_ranks} ranks, {ex1_name:>18}: {ex1_check['repeated']} repeated (padding {ex1_pad}): "
              f"rows {ex1_ids[ex1_counts > 1].tolist()}; first row of each rank {ex1_firsts}")
        ex1_ok.append(ex1_check["covered"] and ex1_check["disjoint"] and ex1_check["repeated"] == ex1_pad
                      and set(ex1_ids[ex1_counts > 1].tolist()) == set(ex1_firsts[:ex1_pad]))
assert all(ex1_ok) and len(ex1_ok) == 4

# %% [markdown] slideshow={"slide_type": "-"}
# **2.** Different seeds. Give rank 1 the seed `seed + 1` (the ranks then draw different permutations) and
# check one epoch's shards with `distributed.shard_check`. Which check fails? Count the rows no rank trains on
# in that epoch and the rows trained on twice: that is what the model would see.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex2_shards(train, seeds, epoch=0):
    return [torch.cat([b["id"] for b in distributed.helpers_batches(train, batch_size, rank, len(seeds), s, epoch)]
                      ).numpy() for rank, s in enumerate(seeds)]


ex2_train, _, _ = distributed.otto_tensors(rows, seed)
ex2_rows = len(ex2_train["X"])
ex2_same = distributed.shard_check(ex2_shards(ex2_train, [seed, seed]), ex2_rows)
ex2_mixed = ex2_shards(ex2_train, [seed, seed + 1])
ex2_other = distributed.shard_check(ex2_mixed, ex2_rows)
ex2_missing = ex2_rows - len(np.unique(np.concatenate(ex2_mixed)))
print("same seed:      ", {k: ex2_same[k] for k in ("covered", "disjoint", "repeated")})
print("different seeds:", {k: ex2_other[k] for k in ("covered", "disjoint", "repeated")},
      f"| {ex2_missing} of {ex2_rows} rows never seen this epoch")
assert ex2_same["covered"] and ex2_same["disjoint"] and not ex2_other["covered"] and ex2_missing > 0

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3.** The grouped shuffle. `helpers_batches` passes `shuffle` to the `BatchLoader`: give it
# `shuffle="grouped"` (notebook 04's quasi-random order, which FFCV refuses in distributed mode) and check the
# shards of two epochs. Are they still disjoint and covering, and does the order change between epochs? Look
# at the first ids of a batch too: runs of neighbouring rows, as the grouped order reads them.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex3_shards(train, epoch):
    return [torch.cat([b["id"] for b in distributed.helpers_batches(train, batch_size, rank, world_size, seed, epoch,
                                                                    shuffle="grouped")]).numpy()
            for rank in range(world_size)]


ex3_train, _, _ = distributed.otto_tensors(rows, seed)
ex3_epochs = [ex3_shards(ex3_train, e) for e in range(2)]
ex3_checks = [distributed.shard_check(s, len(ex3_train["X"])) for s in ex3_epochs]
for ex3_epoch, ex3_check in enumerate(ex3_checks):
    print(f"epoch {ex3_epoch}:", {k: ex3_check[k] for k in ("covered", "disjoint", "repeated", "expected_padding")})
print("rank 0, first ids of epoch 0:", ex3_epochs[0][0][:8], "| epoch 1:", ex3_epochs[1][0][:8])
assert len(ex3_checks) == 2 and all(c["covered"] and c["disjoint"] for c in ex3_checks)
assert not np.array_equal(ex3_epochs[0][0], ex3_epochs[1][0])

# %% [markdown] slideshow={"slide_type": "-"}
# **4.** (Needs a CUDA GPU, two to see the batch split; skipped without one.) Time the four steps of
# `data_parallel_by_hand` one by one on the global batch (`batch_size * world_size` rows of the MLP): `scatter`,
# `replicate`, `parallel_apply` and `gather`. Where does DataParallel spend its time besides the forward pass
# itself? Look at `replicate`, and ask what it copies at every call that DDP copies once.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
def ex4_steps(model, x, device_ids, repeat=20):
    from torch.nn.parallel import gather, parallel_apply, replicate, scatter

    chunks = scatter(x, device_ids)
    replicas = replicate(model, device_ids[:len(chunks)])
    outputs = parallel_apply(replicas, [(c,) for c in chunks])
    with torch.no_grad():
        times = measure.interleaved(
            {"scatter": lambda: scatter(x, device_ids),
             "replicate": lambda: replicate(model, device_ids[:len(chunks)]),
             "parallel_apply": lambda: parallel_apply(replicas, [(c,) for c in chunks]),
             "gather": lambda: gather(outputs, device_ids[0])}, repeat=repeat, warmup=2, device=torch.device("cuda"))
    return times, outputs


if torch.cuda.is_available():
    ex4_ids = list(range(torch.cuda.device_count()))
    ex4_model = MLP().cuda()
    ex4_x = torch.randn(batch_size * world_size, 93, device="cuda")
    ex4, ex4_outputs = ex4_steps(ex4_model, ex4_x, ex4_ids)
    for ex4_name, ex4_seconds in ex4.items():
        print(f"{ex4_name:>15}: {measure.median(ex4_seconds) * 1e6:8.1f} us on {len(ex4_ids)} GPU(s)")
    ex4_weights = sum(p.numel() for p in ex4_model.parameters())
    print(f"replicate copies all {ex4_weights} weights to each of {len(ex4_outputs)} GPU(s), at every call")
    # each GPU ran a whole copy of the model on its chunk: the outputs come from every GPU and equal the model's
    from torch.nn.parallel import gather
    with torch.no_grad():
        ex4_same = torch.allclose(gather(ex4_outputs, ex4_ids[0]), ex4_model(ex4_x), atol=1e-5)
    assert [o.device.index for o in ex4_outputs] == ex4_ids[:len(ex4_outputs)] and ex4_same
else:
    print("needs a GPU, skipped (DataParallel only scatters, replicates and gathers across GPUs)")
