"""diagnose() on four earlier loops: ImageFolder without and with workers, memmap + BatchLoader, Otto MLP."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..data import memmap
from ..data import otto_csv as otto
from ..data.jpeg_folder import ImageFolder, synthetic_imagefolder
from ..load.batch_loader import BatchLoader
from ..measure import timeline
from ..measure.input_bound import Diagnosis, diagnose
from ..models import MLP
from . import BenchResult
from . import imagefolder as imf
from .training import train_step

Loop = tuple[Any, Callable[[Any], Any]]  # (loader, step)


class SleepyLoader:
    """Yield `n` batches of `batch_size` zeros, each after sleeping `load_ms`: a loader whose cost is known.

    Explained in notebooks/15_is_my_loop_input_bound.ipynb.
    """

    def __init__(self, load_ms: float, n: int = 1000, batch_size: int = 32) -> None:
        self.load_s, self.n, self.batch_size = load_ms / 1000, n, batch_size

    def __iter__(self) -> Any:
        for _ in range(self.n):
            timeline.gpu_like_step(self.load_s)(None)  # sleeps: the CPU stays free, as an I/O-bound loader leaves it
            yield torch.zeros(self.batch_size, 4)


def image_dataset(prepared: imf.Prepared) -> ImageFolder:
    """Return notebook 09's train split with its per-sample pipeline (decode, resize, crop, flip, normalise)."""
    return ImageFolder(prepared.folder / "train", transform=imf.sample_transform("train"))


def image_loop(
    data: ImageFolder, batch_size: int, num_workers: int, step_ms: float, persistent_workers: bool = False
) -> Loop:
    """Return notebook 09's per-sample loop: DataLoader over ImageFolder, and a stand-in GPU step of `step_ms`."""
    loader = DataLoader(
        data,
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        persistent_workers=persistent_workers and num_workers > 0,
    )
    return loader, timeline.gpu_like_step(step_ms / 1000)  # sleeps: the CPU stays free, as under a GPU step


def memmap_loop(train: memmap.ImageData, batch_size: int, step_ms: float) -> Loop:
    """Return notebook 09's fast loop: BatchLoader over the decoded memmap, batched transforms, the same step."""
    fields = {"images": train.images, "labels": train.labels}  # BatchLoader gathers each with one np.take
    loader = BatchLoader(fields, batch_size, shuffle=True, seed=0, transform=imf.batch_transform("train"))
    return loader, timeline.gpu_like_step(step_ms / 1000)


def otto_loop(device: torch.device, rows: int, batch_size: int) -> Loop:
    """Return notebook 10's Otto loop: a per-sample DataLoader (1 worker) and the MLP's training step."""
    X, y, _, _ = otto.load_otto(rows)
    loader = DataLoader(
        otto.OttoRows(X, y), batch_size=batch_size, shuffle=True, num_workers=1, pin_memory=device.type == "cuda"
    )
    torch.manual_seed(0)
    model = MLP(otto.NUM_FEATURES, len(otto.CLASSES)).to(device)
    step = train_step(model, torch.optim.Adam(model.parameters(), 5e-4), device)
    return loader, lambda batch: step(*batch)


def loops(
    device: torch.device, prepared: imf.Prepared, batch_size: int, step_ms: float, otto_rows: int, otto_batch_size: int
) -> dict[str, Loop]:
    """Return the four loops, each as (loader, step), built with the sizes given."""
    data = image_dataset(prepared)
    return {
        "ImageFolder, 0 workers": image_loop(data, batch_size, 0, step_ms),
        "ImageFolder, 2 workers": image_loop(data, batch_size, 2, step_ms),
        "memmap + BatchLoader": memmap_loop(prepared.train, batch_size, step_ms),
        "Otto MLP": otto_loop(device, otto_rows, otto_batch_size),
    }


def run_diagnose(loop: Loop, batches: int, warmup: int, replay: int) -> Diagnosis:
    """Diagnose one loop with these batch counts (warnings about worker counts silenced)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(worker processes|pin_memory).*")
        return diagnose(*loop, batches=batches, warmup=warmup, replay=replay)


def predict(load_s: float, step_s: float, num_workers: int, cores: int) -> dict[str, float]:
    """Predict wait share and headspace: a batch takes max(step, load / parallel loaders) (load + step with none)."""
    batch_s = load_s + step_s if num_workers == 0 else max(step_s, load_s / min(num_workers, cores))
    return {"batch_s": batch_s, "wait_share": 1 - step_s / batch_s, "headspace": batch_s / step_s}


def seconds_per_image(data: ImageFolder, n: int = 8) -> float:
    """Return the median seconds to fetch one sample (decode + per-sample transforms), over the first `n`."""
    return measure.median(measure.measure(lambda: [data[i] for i in range(n)], repeat=3, warmup=1)) / n


def seconds_per_batch(loader: Any, repeat: int = 3) -> float:
    """Return the median seconds `loader` takes to yield one batch (after one untimed batch)."""
    its = [iter(loader)]  # clearing the list frees the iterator (and its workers), even after an error
    try:
        return measure.median(measure.measure(lambda: next(its[0]), repeat=repeat, warmup=1))
    finally:
        its.clear()


def spdl_headspace(loop: Loop, live: int, cached: int, warmup: int = 2) -> dict[str, float]:
    """Return SPDL's headspace: seconds per batch while CacheDataLoader loads, over while it replays its cache.

    `live` batches come from the loader (the first `cached` of them are kept), then `cached` batches are
    replayed from memory; both phases run the step. Needs spdl-core (the `threads` extra).
    """
    from spdl.dataloader import CacheDataLoader

    loader, step = loop
    if hasattr(loader, "__len__") and len(loader) < live:
        raise ValueError(
            f"live={live} batches, but the loader has {len(loader)} per epoch: CacheDataLoader "
            f"would start replaying early; use live <= {len(loader)}"
        )
    wrapped = CacheDataLoader(loader, num_caches=cached, return_caches_after=live, stop_after=live + cached)
    ends = [measure.now()]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(worker processes|pin_memory).*")
        for batch in wrapped:
            step(batch)
            measure.sync()
            ends.append(measure.now())
    per_batch = np.diff(ends)
    live_s, replay_s = float(per_batch[warmup:live].mean()), float(per_batch[live:].mean())
    return {"live_batch_s": live_s, "replay_batch_s": replay_s, "headspace": live_s / replay_s}


def row(name: str, d: Diagnosis) -> dict[str, Any]:
    """Return one table row of a loop's diagnosis."""
    top = d.recommendations[0] if d.recommendations else None
    return {
        "loop": name,
        "verdict": d.verdict,
        "samples_per_s": d.samples_per_s,
        "wait_share": d.wait_share,
        "headspace": d.headspace,
        "first_batch_s": d.first_batch_s,
        "batch_p50_ms": d.batch_p50_s * 1e3,
        "batch_p95_ms": d.batch_p95_s * 1e3,
        "pss_total_mb": d.pss_mb["total"],
        "first_knob": top.knob if top else "",
        "first_knob_gain": top.gain if top else 1.0,
    }


def compare(
    named: dict[str, Loop], batches: int, warmup: int, replay: int
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Diagnose each loop; return its table rows and the figures (each loop's wait share and headspace)."""
    rows = [row(name, run_diagnose(loop, batches, warmup, replay)) for name, loop in named.items()]
    slug = {name: name.lower().replace(", ", "_").replace(" + ", "_").replace(" ", "_") for name in named}
    figures = {f"{kind}_{slug[r['loop']]}": r[kind] for r in rows for kind in ("wait_share", "headspace")}
    return rows, figures


def run(scale: str) -> BenchResult:
    """Diagnose the four loops; figures are each loop's wait share and headspace."""
    counts = config.sizes("diagnose", scale)
    sizes = {
        "batch_size": config.size("imagefolder.batch_size", scale),
        "step_ms": config.size("anatomy.step_ms", scale),
        "otto_rows": config.size("otto.rows", scale),
        "otto_batch_size": config.size("otto.batch_size", scale),
    }
    built = loops(config.device(), imf.prepare(folder=synthetic_imagefolder(scale)), **sizes)
    rows, figures = compare(built, counts["batches"], counts["warmup"], counts["replay"])
    return BenchResult(rows, figures, knobs={**counts, **sizes, "cores": os.cpu_count()}, repeats=1)
