"""The store's ceiling: the raw GET reader's bytes, its requests in flight, and the efficiency arithmetic."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fastloops_helpers.data import store
from fastloops_helpers.experiments import store_ceiling


def test_get_object_returns_exactly_the_shard_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 5000 + b"tail"  # not a multiple of the piece: the last read is short
    (tmp_path / "shard.tar").write_bytes(data)
    got: list[bytes] = []
    with store.serve(tmp_path, "unthrottled") as s:
        n = store_ceiling.get_object(s.url("raw", "shard.tar"), bytearray(4096), lambda v: got.append(bytes(v)))
        assert s.bytes_read()["raw"] == len(data)
    assert n == len(data)
    assert b"".join(got) == data


def test_get_object_raises_on_a_missing_object(tmp_path: Path) -> None:
    with store.serve(tmp_path, "unthrottled") as s, pytest.raises(OSError, match="404"):
        store_ceiling.get_object(s.url("raw", "absent.tar"), bytearray(1024))


class _Counting(BaseHTTPRequestHandler):
    """Answers any GET with 10 bytes after a pause, counting the requests open at once."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    open_now = 0
    most = 0

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.open_now += 1
            cls.most = max(cls.most, cls.open_now)
        time.sleep(0.05)
        with cls.lock:
            cls.open_now -= 1
        self.send_response(200)
        self.send_header("Content-Length", "10")
        self.end_headers()
        self.wfile.write(b"0123456789")


@pytest.mark.parametrize("in_flight", [1, 4])
def test_parallel_gets_keeps_in_flight_requests_open_at_once(in_flight: int) -> None:
    _Counting.open_now, _Counting.most = 0, 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        urls = [f"http://127.0.0.1:{server.server_address[1]}/r/{i}" for i in range(8)]
        assert store_ceiling.parallel_gets(urls, in_flight, piece=4) == 80
    finally:
        server.shutdown()
        server.server_close()
    assert _Counting.most == in_flight


def test_ceiling_round_reads_every_shard_and_sees_the_store_cpu(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"{i}.tar").write_bytes(b"x" * 200_000)
    with store.serve(tmp_path, "unthrottled") as s:
        r = store_ceiling.ceiling_round(s.process.pid, [s.url("raw", f"{i}.tar") for i in range(3)], 2)
        assert s.bytes_read()["raw"] == 600_000
    assert r["bytes_per_s"] > 0
    assert r["store_cpu_share"] >= 0


def test_efficiencies_divide_per_round() -> None:
    rounds = {"reader_bytes_s": [50.0, 60.0], "ceiling_bytes_s": [100.0, 80.0], "store_cpu_share": [0.5, 0.6]}
    eff = store_ceiling.efficiencies(rounds, available_bytes_s=200.0)
    assert eff["vs_profile"] == [0.25, 0.3]
    assert eff["vs_ceiling"] == [0.5, 0.75]
    assert eff["ceiling_over_profile"] == [0.5, 0.4]


def test_figures_are_medians_with_intervals() -> None:
    n = 7
    rounds = {
        "reader_bytes_s": [40.0] * n,
        "ceiling_bytes_s": [80.0 + i for i in range(n)],
        "store_cpu_share": [0.9] * n,
    }
    f = store_ceiling.figures(rounds, available_bytes_s=100.0)
    assert f["stream_store_ceiling_bytes_per_s"] == 83.0
    assert f["stream_store_ceiling_bytes_per_s_ci_low"] <= 83.0 <= f["stream_store_ceiling_bytes_per_s_ci_high"]
    assert f["stream_wire_efficiency_vs_profile"] == pytest.approx(0.4)
    assert f["stream_wire_efficiency_vs_ceiling"] == pytest.approx(40 / 83)
    assert f["stream_store_ceiling_over_profile"] == pytest.approx(0.83)
    assert f["stream_store_cpu_share"] == pytest.approx(0.9)
