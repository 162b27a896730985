"""A stand-in for object storage on this machine: files served over HTTP on 127.0.0.1, throttled.

`serve(root, profile)` starts the server in its own process and returns a `Store`; readers fetch
`store.url(reader, name)`. It answers HEAD and GET with Content-Length and byte ranges (what pyarrow, fsspec and
curl need), adds a latency per request and limits bandwidth per connection and in all, as the profile says, and
counts the bytes it sends per reader (the first path segment). The process listens on an ephemeral port on
loopback only, and exits when its parent dies, so it stops even when a notebook cell fails.

Experimental: the interface may change in a minor version.

Explained in notebooks/16_when_data_no_longer_fits.ipynb.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
CHUNK = 256 * 1024  # bytes per piece sent: 2.6 ms at 100 MB/s, inside the buckets' SLACK_S
SLACK_S = 0.005  # a sender this far ahead of its schedule sleeps; less is not worth a sleep's overshoot
STATS = "_stats"


@dataclass(frozen=True)
class Profile:
    """A storage tier as assumed (not measured): bandwidth per connection and in all, latency per request."""

    name: str
    per_connection_bytes_s: float
    total_bytes_s: float
    latency_s: float


PROFILES = {
    p.name: p
    for p in (
        Profile("local-nvme", 2e9, 2e9, 0.0001),
        Profile("same-region", 100e6, 500e6, 0.020),
        Profile("cross-region", 25e6, 25e6 * 64, 0.080),
        Profile("unthrottled", float("inf"), float("inf"), 0.0),
    )
}


def profile(name: str) -> Profile:
    """Return the named profile, with a message listing the known ones."""
    if name not in PROFILES:
        raise ValueError(f"unknown storage profile {name!r}; use one of {', '.join(PROFILES)}")
    return PROFILES[name]


class Bucket:
    """A rate schedule shared by threads: `reserve(n)` books n bytes at `rate` bytes/s and says when they are due."""

    def __init__(self, rate: float) -> None:
        self.rate, self.lock, self.next_free = rate, threading.Lock(), time.perf_counter()

    def reserve(self, n: int, not_before: float = 0.0) -> float:
        """Book `n` bytes after everything booked so far (and not before `not_before`); return when they are sent."""
        if self.rate == float("inf"):
            return not_before
        with self.lock:
            # a schedule that fell behind (its senders woke late) may catch up by SLACK_S: a token bucket's burst
            self.next_free = max(self.next_free, time.perf_counter() - SLACK_S, not_before) + n / self.rate
            return self.next_free


def wait_until(due: float) -> None:
    """Sleep until `due` (a perf_counter time) if that is more than SLACK_S away."""
    delay = due - time.perf_counter()
    if delay > SLACK_S:  # the schedule, not each sleep, keeps the rate: short bursts stay within SLACK_S
        time.sleep(delay)


class Handler(BaseHTTPRequestHandler):
    """HEAD and GET (with Range) under the server's root; the first path segment names the reader."""

    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, *args: Any) -> None:  # quiet: the notebook prints what matters
        pass

    def do_HEAD(self) -> None:
        """Answer with the file's length and range support, no body."""
        self._answer(body=False)

    def do_GET(self) -> None:
        """Send the file, or the byte range asked for, at the profile's pace; /_stats sends the counters."""
        if self.path.strip("/") == STATS:
            data = json.dumps(self.server.counts()).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        reader, path = self._resolve()
        if path is None or not path.is_file():
            self.send_error(404, f"no such object: {self.path}")
            return
        size = path.stat().st_size
        first, last = self._range(size)
        if first is None:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        time.sleep(self.server.profile.latency_s)
        ranged = "Range" in self.headers
        self.send_response(206 if ranged else 200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(last - first + 1))
        if ranged:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if body:
            self._send(path, first, last, reader)

    def _resolve(self) -> tuple[str, Path | None]:
        parts = self.path.split("?")[0].strip("/").split("/", 1)
        if len(parts) != 2 or ".." in parts[1].split("/"):
            return "", None
        return parts[0], self.server.root / parts[1]

    def _range(self, size: int) -> tuple[int | None, int]:
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
        if not match:
            return 0, size - 1
        a, b = match.groups()
        first, last = (int(a), min(int(b) if b else size - 1, size - 1)) if a else (max(size - int(b), 0), size - 1)
        return (first, last) if first <= last < size else (None, 0)

    def _send(self, path: Path, first: int, last: int, reader: str) -> None:
        """Send bytes first..last of `path` in CHUNK pieces, each after the buckets allow it, by sendfile.

        The kernel copies each piece from the page cache to the socket: the store's Python runs once per
        piece, not once per copied byte, so its one process (one GIL) is not what limits the readers.
        """
        connection = Bucket(self.server.profile.per_connection_bytes_s)
        with path.open("rb") as f:
            pos, end = first, last + 1
            while pos < end:
                n = min(CHUNK, end - pos)
                # both limits at once: the piece is due when the slower of the two schedules lets it go, and the
                # connection's next piece queues behind it (waiting for one limit, then the other, loses time)
                due = max(connection.reserve(n), self.server.total.reserve(n))
                connection.next_free = due
                wait_until(due)
                self.server.add(reader, n)  # before the write: a reader that has its bytes sees them counted
                sent = self.connection.sendfile(f, pos, n)
                if sent < n:  # the file shrank under us: the answer is short, and the reader sees it so
                    raise ConnectionError(f"{path}: {sent} of {n} bytes at {pos} could be sent")
                pos += n


class Server(ThreadingHTTPServer):
    """The HTTP server: a root folder, a profile, one bandwidth bucket for all, and bytes sent per reader."""

    daemon_threads = True
    request_queue_size = 128  # listen backlog: socketserver's 5 drops the 6th of many connects made at once, which
    #                           the client's kernel retries a second later, a stall no profile asks for

    def __init__(self, root: Path, prof: Profile) -> None:
        super().__init__((HOST, 0), Handler)
        self.root, self.profile = root, prof
        self.total = Bucket(prof.total_bytes_s)
        self._lock = threading.Lock()
        self._bytes: dict[str, int] = {}

    def add(self, reader: str, n: int) -> None:
        """Count `n` bytes sent to `reader`."""
        with self._lock:
            self._bytes[reader] = self._bytes.get(reader, 0) + n

    def counts(self) -> dict[str, int]:
        """Return the bytes sent per reader so far."""
        with self._lock:
            return dict(self._bytes)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a reader hangs up mid-answer (it stopped early); print anything else."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """Serve ROOT with a profile; print the port on stdout; exit when the parent process dies."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_helpers.data.store")
    parser.add_argument("root", type=Path)
    parser.add_argument("--profile", default="same-region", choices=list(PROFILES))
    args = parser.parse_args(argv)
    server = Server(args.root.resolve(), profile(args.profile))
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.1)
    return 0


class Store:
    """A running store: its URL per reader and object, bytes sent per reader, and `stop()` (also on `with` exit)."""

    def __init__(self, root: str | Path, profile_name: str = "same-region") -> None:
        self.root, self.profile = Path(root), profile(profile_name)
        if not self.root.is_dir():
            raise FileNotFoundError(f"store root {self.root} is not a folder: write the shards first")
        # run as a file, not `-m`: importing the package would import torch, seconds of start-up for nothing
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(self.root), "--profile", profile_name], stdout=subprocess.PIPE, text=True
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"the store did not start (exit code {self.process.poll()})")
        self.port = int(line)

    def url(self, reader: str, name: str = "") -> str:
        """Return the URL of object `name` as seen by `reader` (its bytes are counted under that name)."""
        return f"http://{HOST}:{self.port}/{reader}/{name}"

    def bytes_read(self) -> dict[str, int]:
        """Return the bytes the server has sent to each reader."""
        from urllib.request import urlopen

        with urlopen(f"http://{HOST}:{self.port}/{STATS}", timeout=10) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        """Stop the server process (idempotent)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(root: str | Path, profile_name: str = "same-region") -> Store:
    """Start a throttled store over the files under `root`; stop it with `.stop()` or a `with` block."""
    return Store(root, profile_name)


if __name__ == "__main__":
    sys.exit(main())
