"""Train the Otto MLP under DistributedDataParallel, each rank loading its own shard.

Launch: `torchrun --standalone --nproc_per_node=2 -m fastloops_helpers.experiments.distributed --log-dir DIR`
(`placement` picks nccl with a GPU per rank, or gloo on the CPU). `--reference` runs the same global batches in
one process, for the comparison of final weights. Each rank writes what it saw (the row ids of every epoch), its
epoch times and, on rank 0, the final weights and validation accuracy into DIR. Notebook 12 launches both loaders
under torchrun, the one-process reference, and one rank with the global batch (`bench distributed` executes it).

Explained in notebooks/12_scaling_out.ipynb.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from .. import measure
from ..data import otto_csv as otto
from ..load.batch_loader import BatchLoader
from ..models import MLP

LOADERS = ("helpers", "dataloader")
LR = 0.05  # SGD's learning rate (momentum 0.9) unless a caller gives another
WEIGHT_TOLERANCE = 0.01  # largest weight difference DDP vs one process, relative to the largest weight
ACCURACY_TOLERANCE = 0.005  # validation accuracy DDP vs one process, absolute


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the training options."""
    p = argparse.ArgumentParser(prog="python -m fastloops_helpers.experiments.distributed")
    p.add_argument("--log-dir", type=Path, required=True, help="where each rank writes its log")
    p.add_argument("--loader", choices=["helpers", "dataloader"], default="helpers")
    p.add_argument("--rows", type=int, default=None, help="Otto rows (default: config size otto.rows)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256, help="per rank; the global batch is this x world size")
    p.add_argument("--lr", type=float, default=LR)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpus", type=int, default=torch.cuda.device_count(), help="GPUs the ranks may use (see placement)")
    p.add_argument(
        "--reference",
        type=int,
        default=0,
        metavar="W",
        help="run in one process the global batches that W ranks would see",
    )
    return p.parse_args(argv)


def placement(world_size: int, gpus: int) -> tuple[str, list[torch.device]]:
    """Return the backend and each rank's device: nccl and GPU r for rank r if every rank has one, else gloo on the CPU.

    With fewer GPUs than ranks the world keeps its size on the CPU rather than shrinking to the GPUs: a world
    of one has nothing to shard, no padding to show and no all-reduce to compare with one process.
    Explained in notebooks/12_scaling_out.ipynb.
    """
    if world_size < 1 or gpus < 0:
        raise ValueError(f"need world_size >= 1 and gpus >= 0, got world_size={world_size}, gpus={gpus}")
    if gpus >= world_size:
        return "nccl", [torch.device("cuda", r) for r in range(world_size)]
    return "gloo", [torch.device("cpu")] * world_size


def otto_tensors(rows: int | None, seed: int) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Return the training rows as {"X", "y", "id"} tensors and the validation X, y (log1p features)."""
    X, y, X_val, y_val = otto.load_otto(rows=rows, seed=seed)
    train = {"X": torch.log1p(torch.from_numpy(X)), "y": torch.from_numpy(y), "id": torch.arange(len(X))}
    return train, torch.log1p(torch.from_numpy(X_val)), torch.from_numpy(y_val)


def sampler_batches(
    train: dict[str, torch.Tensor], batch_size: int, rank: int, world_size: int, seed: int, epoch: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Yield this rank's batches of `epoch`: DataLoader + DistributedSampler, PyTorch's usual way."""
    ds = TensorDataset(train["X"], train["y"], train["id"])
    # DistributedSampler's item type cannot be inferred from a dataset (notebook 12 shows this line as is)
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)  # type: ignore[var-annotated]
    sampler.set_epoch(epoch)  # a new permutation per epoch, the same on every rank
    for X, y, ids in DataLoader(ds, batch_size=batch_size, sampler=sampler):
        yield {"X": X, "y": y, "id": ids}


def helpers_batches(
    train: dict[str, torch.Tensor],
    batch_size: int,
    rank: int,
    world_size: int,
    seed: int,
    epoch: int,
    shuffle: bool | str = True,
) -> Iterator[dict[str, torch.Tensor]]:
    """Yield this rank's batches of `epoch`: the helpers' BatchLoader takes its own shard of the common order."""
    bl = BatchLoader(train, batch_size, shuffle=shuffle, seed=seed, rank=rank, world_size=world_size)
    bl.set_epoch(epoch)
    yield from bl


def batches(
    train: dict[str, torch.Tensor], loader: str, batch_size: int, rank: int, world_size: int, seed: int, epoch: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Yield this rank's batches of `epoch` from the helpers' loader or DataLoader + DistributedSampler."""
    make = helpers_batches if loader == "helpers" else sampler_batches
    return make(train, batch_size, rank, world_size, seed, epoch)


def reference_batches(
    train: dict[str, torch.Tensor], args: argparse.Namespace, epoch: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Yield, in one process, the concatenation of what each of `args.reference` ranks would get per step."""
    per_rank = [
        batches(train, args.loader, args.batch_size, r, args.reference, args.seed, epoch) for r in range(args.reference)
    ]
    for parts in zip(*per_rank):
        yield {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def ddp_model(seed: int, device: torch.device) -> tuple[nn.Module, nn.Module]:
    """Return (the model, what to train): the same initial weights on every rank, in DDP when under torchrun."""
    torch.manual_seed(seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = MLP().to(device)
    if not (dist.is_available() and dist.is_initialized()):
        return model, model  # one process: the reference run
    ids = [device] if device.type == "cuda" else None  # one GPU per rank; None on the CPU (gloo)
    return model, nn.parallel.DistributedDataParallel(model, device_ids=ids)


def train_epoch(
    net: nn.Module, opt: torch.optim.Optimizer, source: Iterable[dict[str, torch.Tensor]], device: torch.device
) -> list[torch.Tensor]:
    """Train on every batch of this rank's epoch; return the row ids of each batch, as trained on."""
    loss_fn = nn.CrossEntropyLoss()
    seen = []
    for batch in source:
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        opt.zero_grad(set_to_none=True)
        loss_fn(net(batch["X"]), batch["y"]).backward()  # DDP averages the gradients across ranks here
        opt.step()
        seen.append(batch["id"].cpu())
    return seen


def train(args: argparse.Namespace) -> dict:
    """Run the training loop on this rank (or the one-process reference) and return its log."""
    distributed = dist.is_available() and dist.is_initialized()
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    device = placement(world if distributed else max(1, args.reference), args.gpus)[1][rank]  # the ranks' rule
    if distributed and rank != 0:
        dist.barrier()  # rank 0 generates the cached data set first; the others then only read it
    data, X_val, y_val = otto_tensors(args.rows, args.seed)
    if distributed and rank == 0:
        dist.barrier()
    model, net = ddp_model(args.seed, device)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    log = {
        "rank": rank,
        "world_size": world,
        "loader": args.loader,
        "reference": args.reference,
        "backend": dist.get_backend() if distributed else None,
        "device": str(device),
        "epochs": [],
    }
    for epoch in range(args.epochs):
        with measure.Timer(device) as timer:
            source = (
                reference_batches(data, args, epoch)
                if args.reference
                else batches(data, args.loader, args.batch_size, rank, world, args.seed, epoch)
            )
            seen = train_epoch(net, opt, source, device)
        ids = torch.cat(seen).numpy()
        log["epochs"].append({"epoch": epoch, "steps": len(seen), "samples": int(len(ids)), "seconds": timer.seconds})
        np.save(args.log_dir / f"{_tag(args, rank)}-epoch{epoch}.npy", ids)
    with torch.no_grad():
        log["val_accuracy"] = float((model(X_val.to(device)).argmax(1).cpu() == y_val).float().mean())
    log["train_rows"] = len(data["X"])
    if rank == 0:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, args.log_dir / f"{_tag(args, 0)}-weights.pt")
    return log


def _tag(args: argparse.Namespace, rank: int) -> str:
    return f"{args.loader}-reference{args.reference}" if args.reference else f"{args.loader}-rank{rank}"


def shard_check(shards: Sequence[np.ndarray], rows: int) -> dict[str, int | bool]:
    """Check one epoch's shards (the row ids each rank trained on): overlap, coverage, DistributedSampler's padding."""
    allids = np.concatenate(shards)
    unique = np.unique(allids)
    padding = -rows % len(shards)  # DistributedSampler repeats this many indices so every rank gets as many
    return {
        "per_rank": int(len(shards[0])),
        "equal_sizes": len({len(s) for s in shards}) == 1,
        "covered": bool(len(unique) == rows and unique[0] == 0 and unique[-1] == rows - 1),
        "repeated": int(len(allids) - len(unique)),
        "expected_padding": padding,
        "disjoint": bool(len(allids) - len(unique) == padding),
    }


def check_shards(log_dir: Path, loader: str, world_size: int, epoch: int, rows: int) -> dict[str, int | bool]:
    """Check one epoch's shards from the ranks' logs in `log_dir` (see `shard_check`)."""
    return shard_check([np.load(log_dir / f"{loader}-rank{r}-epoch{epoch}.npy") for r in range(world_size)], rows)


def launch(
    log_dir: Path,
    loader: str,
    world_size: int,
    rows: int,
    epochs: int,
    batch_size: int,
    seed: int = 0,
    reference: bool = False,
    lr: float = LR,
    gpus: int | None = None,
) -> list[dict]:
    """Run the training with torchrun (or the one-process reference) and return each rank's log.

    The ranks (and the reference) go where `placement(world_size, gpus)` puts them; `gpus` defaults to torch's count.
    """
    flags = {
        "log-dir": log_dir,
        "loader": loader,
        "rows": rows,
        "epochs": epochs,
        "batch-size": batch_size,
        "seed": seed,
        "lr": lr,
        "gpus": torch.cuda.device_count() if gpus is None else gpus,
    }
    opts = [arg for flag, value in flags.items() for arg in (f"--{flag}", str(value))]
    entry = [sys.executable, "-c", f"from {__name__} import main; raise SystemExit(main())"]  # by name, not __main__
    if reference:
        cmd = [*entry, *opts, "--reference", str(world_size)]
    else:
        run = ["torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}", "--no-python"]
        cmd = [sys.executable, "-m", *run, *entry, *opts]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed with exit code {done.returncode}:\n{done.stderr[-3000:]}")
    tags = [f"{loader}-reference{world_size}"] if reference else [f"{loader}-rank{r}" for r in range(world_size)]
    return [json.loads((log_dir / f"{t}.json").read_text()) for t in tags]


def relative_weight_difference(a: Path, b: Path) -> float:
    """Return the largest absolute difference between two saved state dicts, over their largest weight."""
    wa, wb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    scale = max(float(w.abs().max()) for w in wa.values())
    return max(float((wa[k] - wb[k]).abs().max()) for k in wa) / scale


def throughput(logs: list[dict], label: str) -> dict[str, float | int | str]:
    """Return samples/s per rank and in total of a run, from its ranks' logs (median epoch, epoch 0 left out)."""
    steady = logs[0]["epochs"][1:] or logs[0]["epochs"]  # epoch 0 includes the warm-up
    seconds = float(np.median([e["seconds"] for e in steady]))
    return {
        "run": label,
        "ranks": len(logs),
        "samples/s per rank": steady[0]["samples"] / seconds,
        "samples/s total": steady[0]["samples"] * len(logs) / seconds,
    }


def figures(
    checks: Sequence[dict], diff: float, ddp_accuracy: float, single_accuracy: float, speed: Sequence[dict]
) -> dict[str, float]:
    """Return the flat figures: shards ok, DDP equal to one process, its weight difference, throughputs."""
    same = diff < WEIGHT_TOLERANCE and abs(ddp_accuracy - single_accuracy) < ACCURACY_TOLERANCE
    return {
        "ddp_matches_single": float(same),
        "relative_weight_difference": float(diff),
        "shards_ok": float(all(c["covered"] and c["disjoint"] for c in checks)),
        "ddp_total_over_single": float(speed[0]["samples/s total"] / speed[-1]["samples/s total"]),
    } | {f"samples_per_s_total_{i}": float(s["samples/s total"]) for i, s in enumerate(speed)}


def data_parallel_here(model: nn.Module, x: torch.Tensor, repeat: int | None = None) -> dict:
    """Wrap `model` in nn.DataParallel and report what it does on this machine: its devices, output, time.

    Without a GPU, DataParallel has no devices (`device_ids == []`) and its forward just calls the module.
    Explained in notebooks/12_scaling_out.ipynb.
    """
    dp = nn.DataParallel(model)
    device = torch.device("cuda", dp.device_ids[0]) if dp.device_ids else torch.device("cpu")
    model.to(device)
    x = x.to(device)
    with torch.no_grad():
        same = torch.allclose(dp(x), model(x), atol=1e-5)
        times = measure.interleaved(
            {"module": lambda: model(x), "DataParallel": lambda: dp(x)}, repeat=repeat, device=device
        )
    return {
        "gpus": torch.cuda.device_count(),
        "device_ids": list(dp.device_ids),
        "same_output": bool(same),
        "module_s": measure.median(times["module"]),
        "dataparallel_s": measure.median(times["DataParallel"]),
        "dataparallel_over_module": measure.ratio(times, "DataParallel", "module"),
    }


def main(argv: list[str] | None = None) -> int:
    """Initialise the process group when launched by torchrun, train, and write this rank's log."""
    args = parse(argv)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    if "RANK" in os.environ and not args.reference:
        dist.init_process_group(placement(int(os.environ["WORLD_SIZE"]), args.gpus)[0])
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // dist.get_world_size()))
    try:
        log = train(args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    rank = log["rank"]
    (args.log_dir / f"{_tag(args, rank)}.json").write_text(json.dumps(log, indent=2) + "\n")
    print(
        f"[{_tag(args, rank)}] val_accuracy={log['val_accuracy']:.4f} "
        f"epochs={[round(e['seconds'], 3) for e in log['epochs']]}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
