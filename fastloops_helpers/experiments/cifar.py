"""FFCV vs DataLoader (per-sample Pillow) vs the helpers (memmap + batched transforms) on CIFAR-10 with a WideResNet."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import config, measure
from ..data import cifar10, ffcv_io, memmap
from ..load.batch_loader import BatchLoader
from ..load.move import move_to
from ..load.transforms import OnImages, ResizeCenterCrop
from ..measure.steps import Blocks, StepTimes, compare_steps
from ..models import SeedWideResNet, WideResNet
from . import BenchResult
from .training import Step, batch_times, table, train_step

RESIZE, CROP = 48, 32  # the seed's DataLoader transform: resize to 48, center-crop 32 (= FFCV's crop ratio 2/3)
HEADLINE = ("helpers", "FFCV")  # the benchmark's target helpers_over_ffcv_load: the pair it adds rounds for
BUDGET = 2.0  # the benchmark's load-only rounds may take up to twice the first rounds' time (a narrower interval)
# per loader and round: 1 step on a fresh iterator left out (start-up), 1 timed (rounded up to whole worker bursts);
# a one-worker DataLoader or FFCV's one thread is in its steady state from the second batch; more timed steps cost time
STEP_BLOCKS = Blocks(settle=1, timed=1)


def _uint8_hwc(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image))


def _resized_chw(image: np.ndarray, resize_crop: ResizeCenterCrop) -> torch.Tensor:
    return resize_crop(_uint8_hwc(image).permute(2, 0, 1)).contiguous()


def prepare(train: int, test: int, resize: int = RESIZE, crop: int = CROP, seed: int = 0) -> dict[str, Any]:
    """Load (or generate) `train` + `test` CIFAR-10 images; write them once as `.beton` (if ffcv) and as memmaps.

    The second memmap holds the images already resized to `resize` and center-cropped to `crop`.
    """
    images, labels, _, _ = cifar10.load_cifar10(train, test, seed=seed)
    folder = config.data_dir() / f"cifar10-synthetic-{train}-{test}-s{seed}"
    beton = None
    if ffcv_io.have_ffcv():
        beton = folder / "train.beton"
        if not beton.exists():
            ffcv_io.write_image_beton(beton, images, labels)
    # stored HWC (channels-last), the layout torch's uint8 resize kernel reads: no layout copy per batch
    mm = memmap.precompute(
        cifar10.ImageDataset(images, labels, _uint8_hwc),
        folder / "memmap",
        backend="numpy",
        key={"train": train, "seed": seed, "layout": "hwc"},
        desc="writing the memmap",
    )
    resized = functools.partial(_resized_chw, resize_crop=ResizeCenterCrop(images.shape[1], resize, crop))
    done = memmap.precompute(
        cifar10.ImageDataset(images, labels, resized),
        folder / "memmap-resized",
        backend="numpy",
        key={"train": train, "seed": seed, "resize": resize, "crop": crop},
        desc="writing the resized memmap",
    )
    return {"images": images, "labels": labels, "beton": beton, "memmap": mm, "memmap_resized": done}


def torch_loader(
    images: np.ndarray,
    labels: np.ndarray,
    batch_size: int,
    device: torch.device,
    resize: int,
    crop: int,
    seed: int = 0,
    num_workers: int = 1,
) -> torch.utils.data.DataLoader:
    """The seed's DataLoader: Pillow resize + center crop per sample in `num_workers` worker processes."""
    dataset = cifar10.ImageDataset(images, labels, cifar10.PillowResizeCrop(resize, crop))
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        pin_memory=device.type == "cuda",
        drop_last=True,
        generator=torch.Generator().manual_seed(seed),
    )


def helpers_loader(
    mm: memmap.ImageData, batch_size: int, device: torch.device, resize_crop: Callable, seed: int = 0
) -> BatchLoader:
    """The helpers' loader: grouped shuffle over the HWC memmap, then one batched window resize per batch."""

    def transform(x: torch.Tensor) -> torch.Tensor:
        return resize_crop(move_to(x, device, non_blocking=True).permute(0, 3, 1, 2))  # NHWC -> NCHW view

    return BatchLoader(
        (mm.images, mm.labels),
        batch_size=batch_size,
        shuffle="grouped",
        drop_last=True,
        seed=seed,
        transform=OnImages(transform),
    )


def ffcv_loader(beton: Any, batch_size: int, device: torch.device, resize: int, crop: int, seed: int = 0) -> Any:
    """The seed's FFCV Loader: a center crop of crop/resize of the side, resized to crop; QUASI_RANDOM, one thread."""
    return ffcv_io.Batches(
        ffcv_io.image_loader(
            beton,
            batch_size,
            num_workers=1,
            order="quasi_random",
            device=device,
            size=crop,
            ratio=crop / resize,
            seed=seed,
        )
    )


def make_loaders(
    data: dict[str, Any],
    batch_size: int,
    device: torch.device,
    resize: int,
    crop: int,
    seed: int = 0,
    num_workers: int = 1,
    resize_crop: Callable | None = None,
) -> dict[str, Any]:
    """Return the seed's FFCV Loader (QUASI_RANDOM), its DataLoader (Pillow) and the helpers' two loaders.

    All serve the same `crop` x `crop` center crops of the images resized to `resize`. `resize_crop` is the
    helpers' batched transform (default: `ResizeCenterCrop`); `num_workers` is the DataLoader's (the seed's 1).
    """
    loaders: dict[str, Any] = {}
    if data["beton"] is not None:
        loaders["FFCV"] = ffcv_loader(data["beton"], batch_size, device, resize, crop, seed)
    loaders["DataLoader"] = torch_loader(
        data["images"], data["labels"], batch_size, device, resize, crop, seed, num_workers
    )
    resize_crop = resize_crop or ResizeCenterCrop(data["images"].shape[1], resize, crop)
    loaders["helpers"] = helpers_loader(data["memmap"], batch_size, device, resize_crop, seed)
    done = data["memmap_resized"]  # the deterministic transform done once, at write time: nothing left per batch
    loaders["helpers-precomputed"] = BatchLoader(
        (done.images, done.labels), batch_size=batch_size, shuffle="grouped", drop_last=True, seed=seed
    )
    return loaders


def wrn_factory(
    depth: int, width: int, device: torch.device, seed: int = 0, channels_last: bool = True
) -> Callable[[], Step]:
    """Return a factory of fresh WRN-`depth`-`width` training steps (Adam lr 1e-2 as the seed).

    With `channels_last` every batch (and the model) is put in the channels-last layout first, whatever layout
    its loader yields: FFCV's `ToTorchImage` yields channels-last, the others plain NCHW, and the convolutions
    run at different speeds on the two, which would otherwise be counted as the loader's (notebook 11).
    """
    layout = torch.channels_last if channels_last else torch.contiguous_format

    def factory() -> Step:
        torch.manual_seed(seed)
        # Module.to takes memory_format (PyTorch's documentation); torch's type hints leave it out
        model = WideResNet(depth, width).to(device, memory_format=layout)  # type: ignore[call-overload]
        step = train_step(model, torch.optim.Adam(model.parameters(), 1e-2), device)

        def run(x: torch.Tensor, y: torch.Tensor) -> Any:
            x = x.contiguous(memory_format=layout)
            return step(x.float().div_(255) if x.dtype == torch.uint8 else x, y)

        return run

    return factory


def layout_cost(
    loaders: dict[str, Any], depth: int, width: int, device: torch.device, repeat: int = 5
) -> dict[str, float]:
    """Time one training step on each loader's first batch as it comes, interleaved; return median seconds."""
    factory = wrn_factory(depth, width, device, channels_last=False)
    steps = {name: (factory(), next(iter(loader))) for name, loader in loaders.items()}
    seconds = measure.interleaved(
        {name: functools.partial(s, *b) for name, (s, b) in steps.items()}, repeat=repeat, warmup=1, device=device
    )
    return {name: measure.median(v) for name, v in seconds.items()}


def step_times(
    loaders: Mapping[str, Iterable[Any]],
    factory: Callable[[], Step],
    steps: int,
    device: torch.device,
    blocks: Blocks = STEP_BLOCKS,
) -> StepTimes:
    """Train behind each loader in `steps` rounds of blocks, each loader waiting as it would alone; return the times.

    A step takes the next batch (timed apart: the wait) and trains on it. Each round runs one block per loader,
    in a new order every round, so a slow spell of a shared machine hits them all alike; a block starts a fresh
    iterator, leaves its first `blocks.settle` steps out and closes it after `blocks.timed`, so no loader's
    worker prepares batches during the others' steps (`measure.steps.compare_steps`). The wait is what loading
    costs the loop: near the load-only time when nothing loads in the background, near load - step when a worker
    slower than the step loads meanwhile, near 0 when it keeps up. Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    return compare_steps(loaders, factory, steps, blocks, device, desc="full step")


def load_only(
    loaders: Mapping[str, Iterable[Any]],
    epochs: int,
    batch_size: int,
    device: torch.device,
    budget: float = 1.0,
    halfwidth: float = 0.05,
) -> tuple[pd.DataFrame, dict[str, list[float]]]:
    """Time whole load-only epochs, the loaders taking turns; return the per-batch table and {loader: img/s per round}.

    One warm-up epoch each first (numba compiles FFCV's pipeline). Then every round runs one epoch of each
    loader in a new order, so a slow spell of a shared machine hits them all alike: compare two loaders with
    `measure.ratios(rates, a, b)`, their per-round ratios. With `budget` > 1 and FFCV here, rounds are added
    after the first `epochs` until the 95 % interval of helpers/FFCV is within +-`halfwidth` of its median or
    `budget` x the first rounds' time is spent (`measure.interleaved_until_steady`: it stops on the width, never
    on the verdict). Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    for loader in loaders.values():
        batch_times(loader, 1, None, skip=0, device=device)
    per_batch: dict[str, list[float]] = {name: [] for name in loaders}

    def epoch(name: str) -> Callable[[], None]:
        return lambda: per_batch[name].extend(batch_times(loaders[name], 1, None, skip=0, device=device))

    fns = {name: epoch(name) for name in loaders}
    if budget > 1 and HEADLINE[0] in loaders and HEADLINE[1] in loaders:  # seconds FFCV/helpers = img/s helpers/FFCV
        seconds = measure.interleaved_until_steady(
            fns, HEADLINE[1], HEADLINE[0], rounds=epochs, halfwidth=halfwidth, budget=budget, warmup=0, device=device
        )
    else:
        seconds = measure.interleaved(fns, epochs, warmup=0, device=device, desc="load only", shuffle=True)
    images = {name: len(per_batch[name]) // len(seconds[name]) * batch_size for name in loaders}  # every batch full
    rates = {name: [images[name] / s for s in seconds[name]] for name in loaders}
    return table(per_batch, batch_size), rates


def measure_all(
    loaders: dict[str, Any],
    batch_size: int,
    device: torch.device,
    epochs: int,
    steps: int,
    depth: int,
    width: int,
    seed: int = 0,
    budget: float = 1.0,
) -> dict[str, Any]:
    """Time `epochs` load-only rounds (more within `budget`), then `steps` rounds of WRN training steps per loader.

    Returns the tables "load", "step" and "wait" (waiting and computing apart, every timed step), the img/s per
    load-only round ("rates") and the mean seconds per step of each step round ("steps"), from which `figures`
    takes per-round ratios.
    """
    load, rates = load_only(loaders, epochs, batch_size, device, budget)
    stepped = {k: v for k, v in loaders.items() if k != "helpers-precomputed"}  # same step as helpers
    timed = step_times(stepped, wrn_factory(depth, width, device, seed), steps, device)
    return {
        "load": load,
        "step": table(timed.flat("steps"), batch_size),
        "wait": table(timed.flat("waits"), batch_size),
        "rates": rates,
        "steps": timed.per_round("steps"),
    }


def overlap(tables: Mapping[str, Any]) -> Any:
    """Return per loader: load-only ms per batch, ms waited for a batch while training, and % of loading hidden."""
    load_ms = tables["load"]["mean"] * 1e3
    wait_ms = tables["wait"]["mean"] * 1e3
    step_ms = tables["step"]["median"] * 1e3
    out = pd.DataFrame({"load_only_ms": load_ms[wait_ms.index], "waited_ms": wait_ms, "step_ms": step_ms})
    out["hidden_%"] = (1 - out["waited_ms"] / out["load_only_ms"]).clip(lower=0) * 100
    out["load_share_%"] = out["load_only_ms"] / out["step_ms"] * 100
    return out


def figures(t: Mapping[str, Any]) -> dict[str, float]:
    """Return the flat figures of `measure_all`'s tables: img/s, step ms, % hidden and the loaders' ratios.

    Every ratio of two loaders is the median of its per-round ratios (load-only rounds from "rates", step
    rounds from "steps"), saved with its 95 % interval (`_ci_low`, `_ci_high`) for the verdicts.
    """
    rate, step, over = t["load"]["samples_per_s"], t["step"]["median"], overlap(t)
    out = {f"{n.lower().replace('-', '_')}_load_img_per_s": float(rate[n]) for n in rate.index}
    out.update({f"{n.lower()}_step_ms": float(step[n] * 1e3) for n in step.index})
    out.update({f"{n.lower()}_hidden_pct": float(over.loc[n, "hidden_%"]) for n in over.index})
    out["cifar_dataloader_load_share_pct"] = float(over.loc["DataLoader", "load_share_%"])
    load, steps = t["rates"], t["steps"]  # img/s per load-only round (higher is faster); seconds per step round
    out.update(measure.interval_figures("helpers_over_dataloader_load", measure.ratios(load, "helpers", "DataLoader")))
    out.update(
        measure.interval_figures("dataloader_step_over_helpers_step", measure.ratios(steps, "DataLoader", "helpers"))
    )
    if "FFCV" in rate:
        out.update(measure.interval_figures("ffcv_over_dataloader_load", measure.ratios(load, "FFCV", "DataLoader")))
        out.update(measure.interval_figures("helpers_over_ffcv_load", measure.ratios(load, "helpers", "FFCV")))
        out.update(
            measure.interval_figures("dataloader_step_over_ffcv_step", measure.ratios(steps, "DataLoader", "FFCV"))
        )
    return out


# ------------------------------------------------------------------------ seed 003's own protocol, as written
SEED_SKIP = 11  # the seed times a batch only `if i > 10`: the first 11 batches of each pass are left out
SEED_WRN = (28, 10)  # the seed's WideResNet, replayed where a GPU makes it affordable


def replay_wrn(device: torch.device, depth: int, width: int) -> tuple[int, int]:
    """Return the (depth, width) the seed's protocol runs with: its WRN-28-10 on CUDA, else the scale's WRN."""
    return SEED_WRN if device.type == "cuda" else (depth, width)


def seed_skip(batches: int, skip: int = SEED_SKIP) -> int:
    """Return how many leading batches of a pass to leave out: `skip`, fewer where a pass would then time < 2."""
    if batches < 3:
        raise ValueError(
            f"a pass must have 3 or more batches (one left out, two timed), got {batches}: use more images"
        )
    return min(skip, batches - 2)


def seed_loaders(data: dict[str, Any], batch_size: int, device: torch.device, resize: int, crop: int) -> dict[str, Any]:
    """Return seed 003's loaders as written: FFCV (QUASI_RANDOM) and a DataLoader that does not shuffle."""
    loaders: dict[str, Any] = {}
    if data["beton"] is not None:
        loaders["FFCV"] = ffcv_loader(data["beton"], batch_size, device, resize, crop)
    dataset = cifar10.ImageDataset(data["images"], data["labels"], cifar10.PillowResizeCrop(resize, crop))
    loaders["DataLoader"] = torch.utils.data.DataLoader(  # no shuffle: the file's order, every pass
        dataset, batch_size=batch_size, num_workers=1, pin_memory=device.type == "cuda", drop_last=True
    )
    return loaders


def seed_steps(model: nn.Module, device: torch.device) -> dict[str, Step]:
    """Return seed 003's timed step behind each loader: forward and loss only, no backward, no optimizer step."""
    criterion = nn.CrossEntropyLoss()

    def ffcv_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x / 255  # FFCV's batch: uint8, already on `device` (ToDevice in its pipeline)
        return criterion(model(x), y)

    def torch_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x.to(device)  # the seed: x.cuda()
        y = y.to(device).flatten()
        return criterion(model(x), y)  # autograd records the graph all the same, as in the seed

    return {"FFCV": ffcv_step, "DataLoader": torch_step}


def seed_pass(
    loader: Iterable[Any], step: Step | None, device: torch.device, skip: int, contender: str = ""
) -> list[float]:
    """Time one pass as seed 003 does: from a batch's arrival (and `step`) to the next's; the first `skip` left out."""
    times = []
    now = measure.now()
    for i, b in enumerate(loader):
        if step is not None:
            step(*b)
        measure.sync(device)  # the seed: torch.cuda.synchronize()
        if i > skip - 1:  # the seed's `if i > 10`
            times.append(measure.elapsed(now, contender or None))
        now = measure.now()
    return times


def seed_protocol(
    loaders: Mapping[str, Iterable[Any]], steps: Mapping[str, Step], device: torch.device, skip: int
) -> dict[str, dict[str, list[float]]]:
    """Run seed 003's four passes in its order: FFCV full, FFCV load only, DataLoader load only, DataLoader full.

    Notebook 11 makes the same four `seed_pass` calls in one cell, as the seed's four cells.
    """
    times: dict[str, dict[str, list[float]]] = {"full": {}, "load only": {}}
    for name, phase in [("FFCV", "full"), ("FFCV", "load only"), ("DataLoader", "load only"), ("DataLoader", "full")]:
        if name in loaders:  # no FFCV where ffcv is not installed
            step = steps[name] if phase == "full" else None
            times[phase][name] = seed_pass(loaders[name], step, device, skip, f"{name} {phase}")
    return times


def seed_table(times: Mapping[str, list[float]], baseline: str = "DataLoader") -> pd.DataFrame:
    """Return seed 003's table: mean, median, 0.95 quantile per loader, then a row of FFCV's uplift % on each."""
    d = pd.DataFrame(
        {name: [np.mean(t), np.median(t), np.quantile(t, 0.95)] for name, t in times.items()},
        index=["Mean", "Median", "0.95-Quantile"],
    ).T
    if "FFCV" in d.index:
        d.loc["UPLIFT (%)"] = (d.loc["FFCV"] - d.loc[baseline]) / d.loc[baseline] * 100
    return d


def seed_figures(tables: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """Return the replay's figures: each loader's median ms per phase and FFCV's uplift % of the median."""
    out = {}
    for phase, d in tables.items():
        key = phase.split()[0]  # "full", "load"
        for name in d.index.drop("UPLIFT (%)", errors="ignore"):
            out[f"cifar_seed_protocol_{name.lower()}_{key}_median_ms"] = float(d.loc[name, "Median"] * 1e3)
        if "UPLIFT (%)" in d.index:
            out[f"cifar_seed_protocol_{key}_uplift_pct"] = float(d.loc["UPLIFT (%)", "Median"])
    return out


def replay(
    data: dict[str, Any], batch_size: int, device: torch.device, wrn: tuple[int, int], seed: int = 0
) -> tuple[dict[str, pd.DataFrame], int]:
    """Replay seed 003's protocol with the seed's WideResNet of `wrn` (depth, width); return its tables and skip."""
    loaders = seed_loaders(data, batch_size, device, RESIZE, CROP)
    torch.manual_seed(seed)
    steps = seed_steps(SeedWideResNet(*wrn).to(device), device)
    skip = seed_skip(len(loaders["DataLoader"]))
    return {phase: seed_table(t) for phase, t in seed_protocol(loaders, steps, device, skip).items()}, skip


def run(scale: str) -> BenchResult:
    """Measure load-only img/s and full WRN step times of FFCV, DataLoader and the helpers on CIFAR-10."""
    train, test, batch_size = (config.size(f"cifar.{k}", scale) for k in ("train", "test", "batch_size"))
    epochs, steps, (depth, width) = (config.size(f"cifar.{k}", scale) for k in ("epochs", "steps", "wrn"))
    device, seed = config.device(), 0
    data = prepare(train, test, RESIZE, CROP, seed)
    loaders = make_loaders(data, batch_size, device, RESIZE, CROP, seed)
    t = measure_all(loaders, batch_size, device, epochs, steps, depth, width, seed, BUDGET)
    wrn = replay_wrn(device, depth, width)  # a GPU run replays the seed with its WRN-28-10
    seed_tables, skip = replay(data, batch_size, device, wrn, seed)
    rows = [
        {"loader": name, "phase": phase, **{k: float(v) for k, v in t[phase].loc[name].items()}}
        for phase in ("load", "step", "wait")
        for name in t[phase].index
    ]
    rows += [
        {"loader": name, "phase": f"seed protocol, {phase}", **{k: float(v) for k, v in d.loc[name].items()}}
        for phase, d in seed_tables.items()
        for name in d.index
    ]
    knobs = {
        "train_images": train,
        "batch_size": batch_size,
        "model": f"WRN-{depth}-{width}",
        "load_epochs": epochs,
        "load_rounds": len(t["rates"]["helpers"]),
        "load_budget": BUDGET,
        "steps": steps,
        "step_blocks": {"settle": STEP_BLOCKS.settle, "timed": STEP_BLOCKS.timed},
        "resize": RESIZE,
        "crop": CROP,
        "device": str(device),
        "ffcv": data["beton"] is not None,
        "threads": torch.get_num_threads(),
        "seed_protocol": {"model": f"seed WRN-{wrn[0]}-{wrn[1]}", "skip": skip, "passes": 1, "shuffle": False},
    }
    return BenchResult(rows, figures(t) | seed_figures(seed_tables), knobs=knobs, repeats=steps)
