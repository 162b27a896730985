"""The store's own ceiling: what the loopback store delivers to the simplest reader, and the readers against it.

The simplest reader sends plain GETs of whole shards, `in_flight` at a time (as many as the reader it is compared
with keeps open), and reads each answer in large pieces into a buffer it reuses: no parsing, no copies. What it gets
is the most the store can send with that many requests in flight; a streaming reader's bytes/s over it says how much
of the store's real capacity that reader uses, beside its share of the profile's nominal bandwidth. The store
process's CPU seconds over the wall seconds say whether the store itself is busy (one Python process, one GIL).

Reported by `bench streaming` (fastloops_helpers.book.bench). Explained in notebooks/16_when_data_no_longer_fits.ipynb.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import psutil

from .. import measure

PIECE = 1 << 20  # bytes per read: large, so the reader's own Python overhead is a few calls per shard


def get_object(url: str, buf: bytearray, sink: Callable[[memoryview], object] | None = None) -> int:
    """GET the whole object at `url` in one request, reading it into `buf` (reused) piece by piece; return its bytes.

    `sink`, if given, receives each piece (a view into `buf`, valid until the next read). A short answer raises
    (`http.client.IncompleteRead`), an HTTP error status raises `OSError`.
    """
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        conn.request("GET", parts.path)
        answer = conn.getresponse()
        if answer.status != 200:
            raise OSError(f"GET {url}: HTTP {answer.status}")
        view, n = memoryview(buf), 0
        while k := answer.readinto(view):
            if sink is not None:
                sink(view[:k])
            n += k
        return n
    finally:
        conn.close()


def parallel_gets(urls: Sequence[str], in_flight: int, piece: int = PIECE) -> int:
    """GET every object of `urls`, `in_flight` requests at a time (one buffer per thread); return the bytes read."""
    local = threading.local()

    def one(url: str) -> int:
        if not hasattr(local, "buf"):
            local.buf = bytearray(piece)
        return get_object(url, local.buf)

    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        return sum(pool.map(one, urls))


def cpu_s(pid: int) -> float:
    """Return the user + system CPU seconds process `pid` has used (all its threads)."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def ceiling_round(store_pid: int, urls: Sequence[str], in_flight: int) -> dict[str, float]:
    """Read all of `urls` once with `parallel_gets`; return the bytes/s and the store's CPU share while it ran.

    The bytes/s is timed as a contender (the warp sees it); the CPU share is store CPU seconds over real seconds.
    """
    cpu0, start = cpu_s(store_pid), measure.now()
    with measure.Timer(contender=("raw GETs", in_flight)) as t:
        n = parallel_gets(urls, in_flight)
    wall = measure.now() - start
    return {"bytes_per_s": n / t.seconds, "store_cpu_share": (cpu_s(store_pid) - cpu0) / wall}


def against_reader(
    store_pid: int, urls: Sequence[str], in_flight: int, reader_bytes_s: Callable[[], float], rounds: int
) -> dict[str, list[float]]:
    """Time the raw GETs against a reader's pass (`reader_bytes_s` reads and returns its bytes/s), interleaved.

    One warm-up of each, then `rounds` rounds in a shuffled order; returns per round the ceiling's bytes/s, the
    store's CPU share during it and the reader's bytes/s.
    """
    ceiling: list[dict[str, float]] = []
    reader: list[float] = []
    measure.interleaved(
        {
            "raw GETs": lambda: ceiling.append(ceiling_round(store_pid, urls, in_flight)),
            "reader": lambda: reader.append(reader_bytes_s()),
        },
        repeat=rounds,
        warmup=1,
        shuffle=True,
    )
    return {
        "ceiling_bytes_s": [c["bytes_per_s"] for c in ceiling[-rounds:]],
        "store_cpu_share": [c["store_cpu_share"] for c in ceiling[-rounds:]],
        "reader_bytes_s": reader[-rounds:],
    }


def efficiencies(rounds: dict[str, list[float]], available_bytes_s: float) -> dict[str, list[float]]:
    """Return per round the reader over the profile's bandwidth, the reader over the ceiling, the ceiling over it."""
    reader, ceiling = rounds["reader_bytes_s"], rounds["ceiling_bytes_s"]
    return {
        "vs_profile": [r / available_bytes_s for r in reader],
        "vs_ceiling": [r / c for r, c in zip(reader, ceiling, strict=True)],
        "ceiling_over_profile": [c / available_bytes_s for c in ceiling],
    }


def figures(rounds: dict[str, list[float]], available_bytes_s: float) -> dict[str, float]:
    """Return the ceiling's figures for `bench streaming`: medians over rounds with their 95 % intervals."""
    eff = efficiencies(rounds, available_bytes_s)
    return {
        **measure.interval_figures("stream_store_ceiling_bytes_per_s", rounds["ceiling_bytes_s"]),
        **measure.interval_figures("stream_store_cpu_share", rounds["store_cpu_share"]),
        **measure.interval_figures("stream_store_ceiling_over_profile", eff["ceiling_over_profile"]),
        **measure.interval_figures("stream_wire_efficiency_vs_profile", eff["vs_profile"]),
        **measure.interval_figures("stream_wire_efficiency_vs_ceiling", eff["vs_ceiling"]),
    }
