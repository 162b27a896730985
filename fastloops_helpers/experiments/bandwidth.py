"""Memory copy bandwidth (GB/s, read + write) from cache-sized to RAM-sized buffers.

Explained in notebooks/00_setup.ipynb; notebooks 04 and 05 set their predictions against `copy_bandwidth`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from .. import config, measure
from . import BenchResult

LIBRARIES = ("torch", "numpy")


def copier(nbytes: int, library: str = "torch") -> tuple[int, Callable[[], object]]:
    """Return (bytes moved per call, fn) where fn copies an `nbytes` float32 buffer into another once."""
    n = max(nbytes // 4, 1)
    if library == "torch":
        src, dst = torch.rand(n), torch.empty(n)
        return 2 * n * 4, lambda: dst.copy_(src)  # torch splits a large copy over its intra-op threads
    if library == "numpy":
        np_src, np_dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
        return 2 * n * 4, lambda: np.copyto(np_dst, np_src)  # numpy copies on one thread
    raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the block with `threads` torch intra-op threads (None: as they are), then restore the count."""
    before = torch.get_num_threads()
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1 (or None to keep {before}), got {threads}")
    torch.set_num_threads(threads or before)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def copy_rates(
    nbytes: int, libraries: tuple[str, ...] = LIBRARIES, repeat: int | None = None, threads: int | None = None
) -> dict[str, float]:
    """Return {library: GB/s} copying an `nbytes` buffer (read + write counted), libraries interleaved."""
    made = {lib: copier(nbytes, lib) for lib in libraries}
    inner = max(1, 2**26 // nbytes)  # small buffers: many copies per round so the clock can see them
    with torch_threads(threads):
        seconds = measure.per_call({lib: fn for lib, (_, fn) in made.items()}, number=inner, repeat=repeat)
    return {lib: made[lib][0] / measure.median(seconds[lib]) / 1e9 for lib in libraries}


def copy_bandwidth(nbytes: int, library: str = "torch", repeat: int | None = None, threads: int | None = None) -> float:
    """Return GB/s for copying an `nbytes` float32 buffer into another (counting read and write)."""
    return copy_rates(nbytes, (library,), repeat, threads)[library]


def compare(sizes_mb: list[float], repeat: int, threads: int | None = None) -> BenchResult:
    """Measure torch and numpy copies at each size; figures: the best rate at the smallest and largest size."""
    rows: list[dict[str, Any]] = [
        {"size_mb": mb, "library": lib, "gb_per_s": rate}
        for mb in sizes_mb
        for lib, rate in copy_rates(int(mb * 2**20), repeat=repeat, threads=threads).items()
    ]
    best = {mb: max(r["gb_per_s"] for r in rows if r["size_mb"] == mb) for mb in sizes_mb}
    figures = {"copy_gb_per_s_ram": best[max(sizes_mb)], "copy_gb_per_s_cache": best[min(sizes_mb)]}
    knobs = {"sizes_mb": list(sizes_mb), "threads": threads or torch.get_num_threads(), "repeat": repeat}
    return BenchResult(rows, figures, knobs=knobs, repeats=repeat)


def run(scale: str) -> BenchResult:
    """Measure torch and numpy copies at 256 KiB, 4 MiB and the scale's `copy_mb`."""
    return compare([0.25, 4, config.size("copy_mb", scale)], config.size("repeat", scale))
