"""The package's stream pieces notebook 16 runs, on tiny shards and loopback only: Batches decoding or counting bytes,
the interleave, `datasets` naming a cut or missing shard, and a Parquet stream read twice. The notebook's own
protocol (readers side by side, shuffle quality, rank splits, resume, bad input) is checked by its asserts."""

import io
import socket

import numpy as np
import pytest
import torch
from PIL import Image

from fastloops_helpers.data import shards, store
from fastloops_helpers.load import stream


def _jpeg(i: int) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((16, 12, 3), (i * 7) % 256, np.uint8)).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Refuse any socket connect that is not to 127.0.0.1 while a test runs (the readers must stay on loopback)."""
    real = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
            raise AssertionError(f"a reader tried to connect to {address!r}: only loopback is allowed")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    samples = [(_jpeg(i), i % 10) for i in range(80)]
    root = tmp_path_factory.mktemp("stream")
    return shards.write_shards(samples, root / "sorted", shards=10, layout="sorted")


def test_the_guard_refuses_a_connection_off_loopback():
    with pytest.raises(AssertionError, match="only loopback"):
        socket.create_connection(("192.0.2.1", 9), timeout=0.1)


def test_batches_decode_to_the_asked_size_or_count_bytes(src):
    with store.serve(src.folder, "unthrottled") as s:
        samples = stream.ParquetStream([s.url("b", f) for f in src.files(".parquet")])
        x, y = next(iter(stream.Batches(samples, 16, px=8, threads=2)))
        assert x.shape == (16, 3, 8, 8) and x.dtype == torch.uint8 and y.tolist() == src.labels[0] + src.labels[1]
        fresh = stream.ParquetStream([s.url("b", f) for f in src.files(".parquet")])
        sizes, y2 = next(iter(stream.Batches(fresh, 16, px=8, decode=False, limit=5)))
        first = next(iter(stream.ParquetStream([s.url("b", f) for f in src.files(".parquet")])))
        assert len(sizes) == 5 and int(sizes[0]) == len(first["jpg"]) and int(y2[0]) == first["cls"]


def test_interleave_reads_shards_in_turn():
    got = list(stream.interleave([[1, 2, 3], [10, 20], [100]], at_once=2))
    assert got == [1, 10, 2, 20, 3, 100]


def test_datasets_reader_names_a_missing_and_a_cut_shard(src, tmp_path):
    (tmp_path / "s").mkdir()
    for f in src.files(".parquet")[:2]:
        (tmp_path / "s" / f).write_bytes((src.folder / f).read_bytes())
    cut = tmp_path / "s" / src.files(".parquet")[1]
    cut.write_bytes(cut.read_bytes()[:100])
    with store.serve(tmp_path / "s", "unthrottled") as s:
        urls = [s.url("h", f) for f in src.files(".parquet")[:2]]
        with pytest.raises(stream.ShardError, match="shard-00001.parquet"):
            list(stream.HFStream(urls, expected=[8, 8]))
        with pytest.raises(stream.ShardError, match="shard-00007.parquet"):
            stream.HFStream(urls[:1] + [s.url("h", "shard-00007.parquet")])


def test_a_parquet_stream_read_to_the_end_starts_a_new_epoch(src):
    with store.serve(src.folder, "unthrottled") as s:
        reader = stream.ParquetStream([s.url("e", f) for f in src.files(".parquet")])
        first, second = [x["key"] for x in reader], [x["key"] for x in reader]
    assert first == second and len(first) == 80
