"""Memory copy bandwidth (GB/s, read + write) from cache-sized to RAM-sized buffers."""

from __future__ import annotations

import numpy as np
import torch

from .. import config, measure
from . import BenchResult


def copy_bandwidth(nbytes: int, library: str = "torch", repeat: int | None = None) -> float:
    """Return GB/s for copying an `nbytes` float32 buffer into another (counting read and write)."""
    n = max(nbytes // 4, 1)
    if library == "torch":
        src, dst = torch.rand(n), torch.empty(n)
        fn = lambda: dst.copy_(src)  # noqa: E731
    elif library == "numpy":
        src, dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
        fn = lambda: np.copyto(dst, src)  # noqa: E731
    else:
        raise ValueError(f"library must be 'torch' or 'numpy', got {library!r}")
    inner = max(1, 2**26 // nbytes)  # small buffers: time many copies per sample so the clock can see them
    samples = measure.measure(lambda: [fn() for _ in range(inner)], repeat=repeat)
    return 2 * n * 4 * inner / float(np.median(samples)) / 1e9


def run() -> BenchResult:
    """Measure torch and numpy copies at 256 KiB, 4 MiB and the scale's `copy_mb`."""
    sizes_mb = [0.25, 4, config.size("copy_mb")]
    rows = [{"size_mb": mb, "library": lib, "gb_per_s": copy_bandwidth(int(mb * 2**20), lib)}
            for mb in sizes_mb for lib in ("torch", "numpy")]
    best = {mb: max(r["gb_per_s"] for r in rows if r["size_mb"] == mb) for mb in sizes_mb}
    figures = {"copy_gb_per_s_ram": best[sizes_mb[-1]], "copy_gb_per_s_cache": best[sizes_mb[0]]}
    return BenchResult(rows, figures, knobs={"sizes_mb": sizes_mb, "threads": torch.get_num_threads()},
                       repeats=config.size("repeat"))
