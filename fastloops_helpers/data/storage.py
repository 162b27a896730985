"""Read throughput of a data file: from the page cache, and cold (O_DIRECT, or the best this OS allows).

A read from the page cache is one copy, so notebook 00's numpy copy rate (`bandwidth.copy_bandwidth(n, "numpy")`,
one thread, read and write counted) is its prediction; notebook 06 sets `torch.save`'s copies against it too.

Explained in notebooks/08_read_and_decode.ipynb.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from .. import measure

CHUNK = 4 << 20  # 4 MiB reads: large enough that per-call overhead vanishes, a multiple of any block size

# Typical sequential read rates (MB/s) for the seed's storage ladder: orders of magnitude from vendors'
# datasheets and common benchmarks, not measurements of this machine.
LADDER = [
    ("RAM (page cache)", 10_000),
    ("NVMe SSD RAID", 10_000),
    ("NVMe SSD", 3_000),
    ("SATA SSD RAID", 1_000),
    ("SATA SSD", 500),
    ("HDD RAID", 400),
    ("HDD SATA", 150),
    ("1 GbE network share", 110),
    ("internet download", 10),
]


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


def read_cached(path: str | Path, repeat: int = 3, chunk: int = CHUNK) -> float:
    """Return MB/s (median of `repeat` reads, `chunk` bytes per call) reading `path` after an untimed read cached it."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 byte, got {chunk}")
    buf = mmap.mmap(-1, chunk)
    fd = os.open(path, os.O_RDONLY)
    try:

        def read() -> None:
            os.lseek(fd, 0, os.SEEK_SET)
            _read_all(fd, buf)

        return os.fstat(fd).st_size / 2**20 / measure.median(measure.measure(read, repeat=repeat, warmup=1))
    finally:
        os.close(fd)


def read_cold(path: str | Path, repeat: int = 2) -> tuple[float, str]:
    """Return (MB/s, method) reading `path` past the page cache: O_DIRECT, else dropping its pages first.

    Each of the `repeat` reads is cold; the median is returned.
    """
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT requires
    size_mb = Path(path).stat().st_size / 2**20
    if hasattr(os, "O_DIRECT"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError:  # tmpfs and some network or overlay file systems refuse O_DIRECT (EINVAL)
            fd = -1
        if fd >= 0:
            try:

                def direct() -> None:
                    os.lseek(fd, 0, os.SEEK_SET)
                    _read_all(fd, buf)

                return size_mb / measure.median(measure.measure(direct, repeat=repeat, warmup=0)), "O_DIRECT"
            except OSError:
                pass
            finally:
                os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        fadvise = hasattr(os, "posix_fadvise")
        method = "posix_fadvise(DONTNEED), then a plain read" if fadvise else "page cache (no way to bypass it here)"

        def dropped_then_read() -> None:  # the drop is timed too: a system call, small beside the read
            if fadvise:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.lseek(fd, 0, os.SEEK_SET)
            _read_all(fd, buf)

        return size_mb / measure.median(measure.measure(dropped_then_read, repeat=repeat, warmup=0)), method
    finally:
        os.close(fd)
