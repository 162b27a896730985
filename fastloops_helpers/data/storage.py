"""Read throughput of a data file: from the page cache, and cold (O_DIRECT, or the best this OS allows).

Explained in notebooks/08_read_and_decode.ipynb.
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

CHUNK = 4 << 20  # 4 MiB reads: large enough that per-call overhead vanishes, a multiple of any block size

# Typical sequential read rates (MB/s) for the seed's storage ladder: orders of magnitude from vendors'
# datasheets and common benchmarks, not measurements of this machine.
LADDER = [("RAM (page cache)", 10_000), ("NVMe SSD RAID", 10_000), ("NVMe SSD", 3_000), ("SATA SSD RAID", 1_000),
          ("SATA SSD", 500), ("HDD RAID", 400), ("HDD SATA", 150), ("1 GbE network share", 110),
          ("internet download", 10)]


def write_file(path: str | Path, megabytes: int) -> Path:
    """Write `megabytes` MB of incompressible bytes to `path` (kept if it already has that size), and fsync it."""
    path = Path(path)
    size = megabytes * 2**20
    if path.exists() and path.stat().st_size == size:
        return path
    block = os.urandom(CHUNK)
    with open(path, "wb") as f:
        for _ in range(size // CHUNK):
            f.write(block)
        f.write(block[: size % CHUNK])
        f.flush()
        os.fsync(f.fileno())  # dirty pages cannot be dropped from the cache; clean ones can
    return path


def _read_all(fd: int, buf: mmap.mmap) -> int:
    total = 0
    while True:
        n = os.readv(fd, [buf])
        if n == 0:
            return total
        total += n


def read_cached(path: str | Path) -> float:
    """Return MB/s reading `path` after one untimed read put it in the page cache."""
    buf = mmap.mmap(-1, CHUNK)
    fd = os.open(path, os.O_RDONLY)
    try:
        _read_all(fd, buf)
        start = time.perf_counter()
        n = _read_all(fd, buf) if os.lseek(fd, 0, os.SEEK_SET) == 0 else 0
        return n / 2**20 / (time.perf_counter() - start)
    finally:
        os.close(fd)


def read_cold(path: str | Path) -> tuple[float, str]:
    """Return (MB/s, method) reading `path` past the page cache: O_DIRECT, else dropping its pages first."""
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT requires
    if hasattr(os, "O_DIRECT"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                start = time.perf_counter()
                n = _read_all(fd, buf)
                return n / 2**20 / (time.perf_counter() - start), "O_DIRECT"
            finally:
                os.close(fd)
        except OSError:  # tmpfs and some network or overlay file systems refuse O_DIRECT (EINVAL)
            pass
    fd = os.open(path, os.O_RDONLY)
    try:
        method = "page cache (no way to bypass it here)"
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            method = "posix_fadvise(DONTNEED), then a plain read"
        start = time.perf_counter()
        n = _read_all(fd, buf)
        return n / 2**20 / (time.perf_counter() - start), method
    finally:
        os.close(fd)
