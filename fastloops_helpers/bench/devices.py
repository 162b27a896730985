"""Moving the slide's nested xs to a device: helpers' move_to vs pytree, optree, dm-tree, tensordict, torch.save."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import config, devices
from . import BenchResult

LEAF_SIDES = {"small": 8, "large": 224}  # image side of the slide's xs: tiny leaves show pure overhead


def _block(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, block_s: float) -> dict[str, list[float]]:
    """Time each fn in turn, `rounds` times, so that machine noise hits all of them alike; seconds per call."""
    calls = {}
    for name, fn in fns.items():
        fn()  # warm-up
        calls[name] = max(1, int(block_s / max(_block(fn, 1), 1e-7)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(_block(fn, calls[name]))
    return samples


def cuda_copy_rows(nbytes: int, repeat: int = 10) -> list[dict[str, Any]]:
    """Time host-to-GPU copies of `nbytes`: pageable vs pinned, blocking vs non_blocking, pinning each time."""
    from .. import timing

    dev = torch.device("cuda")
    pageable = torch.rand(nbytes // 4)
    pinned = pageable.pin_memory()
    ways = {"pageable .to()": lambda: pageable.to(dev),
            "pageable .to(non_blocking=True)": lambda: pageable.to(dev, non_blocking=True),
            "pinned .to()": lambda: pinned.to(dev),
            "pinned .to(non_blocking=True)": lambda: pinned.to(dev, non_blocking=True),
            "pin_memory() then .to(non_blocking=True)": lambda: pageable.pin_memory().to(dev, non_blocking=True)}
    rows = []
    for name, fn in ways.items():
        t = float(np.median(timing.measure(fn, repeat=repeat, warmup=2, device=dev)))
        rows.append({"way": name, "mb": nbytes / 2**20, "ms": t * 1e3, "gb_per_s": nbytes / t / 1e9})
    return rows


def run() -> BenchResult:
    """Time every available method on the slide's xs with small and large leaves, CPU target; check each result."""
    found, skipped = devices.methods()
    target = torch.device("cpu")
    rounds, block_s = config.size("devices.rounds"), config.size("devices.block_ms") / 1e3
    rows, figures = [], {}
    for leaves, side in LEAF_SIDES.items():
        xs = devices.slide_xs(side)
        samples = interleaved({n: (lambda f=f: f(xs, target)) for n, f in found.items()}, rounds, block_s)
        median = {n: float(np.median(s)) for n, s in samples.items()}
        fastest = min(median.values())
        for name, fn in found.items():
            rows.append({"leaves": leaves, "method": name, "us_per_call": median[name] * 1e6,
                         "over_fastest": median[name] / fastest,
                         "correct_cpu": devices.check_moved(xs, fn(xs, target), target),
                         "correct_meta": devices.check_moved(xs, fn(xs, torch.device("meta")), "meta")})
        figures[f"move_to_over_fastest_{leaves}"] = median["move_to (helpers)"] / fastest
    figures["move_to_over_fastest"] = max(figures.values())
    knobs = {"rounds": rounds, "block_ms": block_s * 1e3, "target": str(target), "skipped": skipped,
             "statistic": "median over interleaved rounds", "leaf_sides": LEAF_SIDES}
    return BenchResult(rows, figures, knobs=knobs, repeats=rounds)
