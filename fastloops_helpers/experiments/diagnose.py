"""diagnose() on four earlier loops: ImageFolder without and with workers, memmap + BatchLoader, Otto MLP."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import measure
from ..data.jpeg_folder import ImageFolder
from ..measure import timeline
from ..measure.input_bound import Diagnosis, diagnose

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
