"""Memory copy bandwidth (GB/s, read + write) from cache-sized to RAM-sized buffers.

Explained in notebooks/00_setup.ipynb; notebooks 04 and 05 set their predictions against `copy_bandwidth`.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import config, measure
from . import BenchResult


LIBRARIES = ("torch", "numpy")


def copier(nbytes: int, library: str = "torch") -> tuple[int, object]:
    """Return (bytes moved per call, fn) where fn copies an `nbytes` float32 buffer into another once."""
    n = max(nbytes // 4, 1)
    if library == "torch":
        src, dst = torch.rand(n), torch.empty(n)
        return 2 * n * 4, lambda: dst.copy_(src)
    if library == "numpy":
        src, dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
        return 2 * n * 4, lambda: np.copyto(dst, src)
    raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")


def copy_rates(nbytes: int, libraries: tuple[str, ...] = LIBRARIES, repeat: int | None = None) -> dict[str, float]:
    """Return {library: GB/s} copying an `nbytes` buffer (read + write counted), libraries interleaved."""
    made = {lib: copier(nbytes, lib) for lib in libraries}
    inner = max(1, 2**26 // nbytes)  # small buffers: many copies per round so the clock can see them
    seconds = measure.per_call({lib: fn for lib, (_, fn) in made.items()}, number=inner, repeat=repeat)
    return {lib: made[lib][0] / measure.median(seconds[lib]) / 1e9 for lib in libraries}


def copy_bandwidth(nbytes: int, library: str = "torch", repeat: int | None = None) -> float:
    """Return GB/s for copying an `nbytes` float32 buffer into another (counting read and write)."""
    return copy_rates(nbytes, (library,), repeat)[library]


def run() -> BenchResult:
    """Measure torch and numpy copies at 256 KiB, 4 MiB and the scale's `copy_mb`."""
    sizes_mb = [0.25, 4, config.size("copy_mb")]
    rows = [{"size_mb": mb, "library": lib, "gb_per_s": rate}
            for mb in sizes_mb for lib, rate in copy_rates(int(mb * 2**20)).items()]
    best = {mb: max(r["gb_per_s"] for r in rows if r["size_mb"] == mb) for mb in sizes_mb}
    figures = {"copy_gb_per_s_ram": best[sizes_mb[-1]], "copy_gb_per_s_cache": best[sizes_mb[0]]}
    return BenchResult(rows, figures, knobs={"sizes_mb": sizes_mb, "threads": torch.get_num_threads()},
                       repeats=config.size("repeat"))
