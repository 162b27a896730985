"""Memory copy bandwidth (GB/s, read + write) from cache-sized to RAM-sized buffers.

Explained in notebooks/00_setup.ipynb, which renders `torch_copy` and `numpy_copy` (the copies timed) and
passes them to `compare`; notebooks 04, 05, 06 and 08 set their predictions against `copy_bandwidth`, which
times the same two.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from .. import measure
from . import BenchResult

LIBRARIES = ("torch", "numpy")


def torch_copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Copy `src` into `dst` once: torch splits a large copy over its intra-op threads."""
    dst.copy_(src)


def numpy_copy(src: np.ndarray, dst: np.ndarray) -> None:
    """Copy `src` into `dst` once: numpy copies on one thread."""
    np.copyto(dst, src)


COPIES: dict[str, Callable[[Any, Any], object]] = {"torch": torch_copy, "numpy": numpy_copy}


def copier(
    nbytes: int, library: str = "torch", copy: Callable[[Any, Any], object] | None = None
) -> tuple[int, Callable[[], object]]:
    """Return (bytes moved per call, fn) where fn copies an `nbytes` float32 buffer of `library` into another once.

    `copy(src, dst)` does the copy (default: `COPIES[library]`; a student may pass their own).
    """
    n = max(nbytes // 4, 1)
    src: Any
    dst: Any
    if library == "torch":
        src, dst = torch.rand(n), torch.empty(n)
    elif library == "numpy":
        src, dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
    else:
        raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")
    return 2 * n * 4, functools.partial(copy or COPIES[library], src, dst)


def copy_rates(
    nbytes: int,
    libraries: tuple[str, ...] = LIBRARIES,
    repeat: int | None = None,
    threads: int | None = None,
    copies: Mapping[str, Callable[[Any, Any], object]] | None = None,
) -> dict[str, float]:
    """Return {library: GB/s} copying an `nbytes` buffer (read + write counted), libraries interleaved.

    `copies` gives each library's copy function (default: the package's `COPIES`).
    """
    made = {lib: copier(nbytes, lib, (copies or {}).get(lib)) for lib in libraries}
    inner = max(1, 2**26 // nbytes)  # small buffers: many copies per round so the clock can see them
    with measure.torch_threads(threads):
        seconds = measure.per_call({lib: fn for lib, (_, fn) in made.items()}, number=inner, repeat=repeat)
    return {lib: made[lib][0] / measure.median(seconds[lib]) / 1e9 for lib in libraries}


def copy_bandwidth(nbytes: int, library: str = "torch", repeat: int | None = None, threads: int | None = None) -> float:
    """Return GB/s for copying an `nbytes` float32 buffer into another (counting read and write)."""
    return copy_rates(nbytes, (library,), repeat, threads)[library]


def compare(
    sizes_mb: list[float],
    repeat: int,
    threads: int | None = None,
    copies: Mapping[str, Callable[[Any, Any], object]] | None = None,
) -> BenchResult:
    """Measure torch and numpy copies at each size; figures: the best rate at the smallest and largest size.

    `copies` gives {library: copy function} (default: `COPIES`; notebook 00 passes them by name).
    """
    libraries = tuple(copies) if copies else LIBRARIES
    rows: list[dict[str, Any]] = [
        {"size_mb": mb, "library": lib, "gb_per_s": rate}
        for mb in sizes_mb
        for lib, rate in copy_rates(int(mb * 2**20), libraries, repeat, threads, copies).items()
    ]
    best = {mb: max(r["gb_per_s"] for r in rows if r["size_mb"] == mb) for mb in sizes_mb}
    figures = {"copy_gb_per_s_ram": best[max(sizes_mb)], "copy_gb_per_s_cache": best[min(sizes_mb)]}
    knobs = {"sizes_mb": list(sizes_mb), "threads": threads or torch.get_num_threads(), "repeat": repeat}
    return BenchResult(rows, figures, knobs=knobs, repeats=repeat)
