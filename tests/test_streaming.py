"""Notebook 16's readers and driver on tiny shards: loopback only, the same samples from every reader, shuffle
quality from labels alone, rank splits, resume, and bad input (each case named or counted)."""

import io
import socket

import numpy as np
import pytest
import torch
from PIL import Image

from fastloops_helpers.data import shards, store
from fastloops_helpers.experiments import streaming
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
def data(tmp_path_factory):
    samples = [(_jpeg(i), i % 10) for i in range(80)]
    root = tmp_path_factory.mktemp("stream")
    layouts = {lay: shards.write_shards(samples, root / lay, shards=10, layout=lay) for lay in shards.LAYOUTS}
    return streaming.Data(layouts)


def test_the_guard_refuses_a_connection_off_loopback():
    with pytest.raises(AssertionError, match="only loopback"):
        socket.create_connection(("192.0.2.1", 9), timeout=0.1)


def test_every_reader_yields_the_same_samples(data):
    src = data.sorted
    with store.serve(src.folder, "unthrottled") as s:
        got = {
            name: [(x["key"], int(x["cls"])) for x in streaming.reader(name, s, f"r{i}", src, ahead=2)]
            for i, name in enumerate(streaming.READERS)
        }
        read = s.bytes_read()
    first = got["pyarrow Parquet"]
    assert len(first) == 80 and len(set(first)) == 80
    assert all(v == first for v in got.values())
    assert read["r0"] == src.nbytes(".tar") and read["r1"] == src.nbytes(".parquet")


def test_batches_decode_to_the_asked_size_or_count_bytes(data):
    src = data.sorted
    with store.serve(src.folder, "unthrottled") as s:
        samples = stream.ParquetStream([s.url("b", f) for f in src.files(".parquet")])
        x, y = next(iter(stream.Batches(samples, 16, px=8, threads=2)))
        assert x.shape == (16, 3, 8, 8) and x.dtype == torch.uint8 and y.tolist() == src.labels[0] + src.labels[1]
        fresh = stream.ParquetStream([s.url("b", f) for f in src.files(".parquet")])
        sizes, y2 = next(iter(stream.Batches(fresh, 16, px=8, decode=False, limit=5)))
        first = next(iter(stream.ParquetStream([s.url("b", f) for f in src.files(".parquet")])))
        assert len(sizes) == 5 and int(sizes[0]) == len(first["jpg"]) and int(y2[0]) == first["cls"]


def test_wire_epoch_counts_bytes_and_the_prediction_is_the_formula(data):
    with store.serve(data.sorted.folder, "same-region") as s:
        row = streaming.wire_epoch("pyarrow Parquet", s, data.sorted, 16, ahead=1)
    assert row["images"] == 80 and row["read_amplification"] == pytest.approx(1.0)
    assert 0 < row["wire_efficiency"] <= 1.05
    p = store.profile("same-region")
    assert streaming.predicted_bytes_s("same-region", 2, 1e6) == pytest.approx(2e6 / (p.latency_s + 1e6 / 100e6))
    assert streaming.available_bytes_s("same-region", 8) == 500e6  # the total cap, not 8 x 100 MB/s


def test_predicted_bytes_follow_the_total_cap_where_transfers_overlap():
    p = store.profile("same-region")  # 20 ms, then 100 MB/s per connection, 500 MB/s in all
    shard = 2.12e6
    alone = shard / (p.latency_s + shard / p.per_connection_bytes_s)  # one connection: 51.5 MB/s
    assert streaming.predicted_bytes_s("same-region", 5, shard) == pytest.approx(5 * alone)  # 5 x 100 <= 500
    nine = streaming.predicted_bytes_s("same-region", 9, shard)
    assert nine < min(9 * alone, p.total_bytes_s) * 0.9  # the cap binds whenever 6 or more transfers overlap
    rates = [streaming.predicted_bytes_s("same-region", n, shard) for n in (6, 9, 12, 16, 32)]
    assert rates == sorted(rates) and p.total_bytes_s * 0.99 < rates[-1] <= p.total_bytes_s
    no_latency = streaming.predicted_bytes_s("local-nvme", 16, shard)
    assert no_latency <= store.profile("local-nvme").total_bytes_s


def test_shuffle_quality_from_labels_alone(data):
    rows = streaming.entropy_sweep(data, 8, buffers=(0, 40), at_once=(1,))
    by = {(r["layout"], r["buffer"]): r for r in rows}
    # class-sorted shards of one class each: batches without a buffer hold one class
    assert by["sorted", 0]["entropy_bits"] == pytest.approx(0.0)
    assert by["sorted", 40]["entropy_bits"] > 1.0 and by["shuffled", 0]["entropy_bits"] > 2.0
    order = streaming.epoch_labels(data.sorted.labels, 40, 1)
    assert sorted(order.tolist()) == sorted(c for s in data.sorted.labels for c in s)  # a permutation
    assert streaming.reader_follows_labels(data, 40)


def test_interleave_reads_shards_in_turn():
    got = list(stream.interleave([[1, 2, 3], [10, 20], [100]], at_once=2))
    assert got == [1, 10, 2, 20, 3, 100]


def test_two_ranks_read_each_sample_once_and_the_mistake_is_counted(data):
    rows = {r["split"].split(" (")[0]: r for r in streaming.ranks(data, 2, "unthrottled", ahead=1)}
    assert rows["split_shards"]["exactly_once"] and rows["split_shards"]["duplicates"] == 0
    assert rows["split_dataset_by_node"]["exactly_once"]
    assert rows["no split"]["duplicates"] == 80 and not rows["no split"]["exactly_once"]


def test_resume_gives_the_remaining_samples(data):
    rows = {r["reader"]: r for r in streaming.resume(data, 13, 4, "unthrottled")}
    assert all(r["same_remaining"] for r in rows.values())


def test_bad_input_is_named_or_counted_for_every_reader(data):
    rows = streaming.bad_input(data)
    assert {r["reader"] for r in rows} == set(streaming.READERS)
    assert all(r["clear"] for r in rows), [r for r in rows if not r["clear"]]
    skipped = [r for r in rows if r["case"].endswith("skip")]
    assert skipped and all("8 samples counted lost" in r["outcome"] for r in skipped)


def test_datasets_reader_names_a_missing_and_a_cut_shard(data, tmp_path):
    src = data.sorted
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


def test_the_timeline_sees_fetches_and_decodes(data):
    with store.serve(data.sorted.folder, "unthrottled") as s:
        from fastloops_helpers.measure import timeline

        tl = timeline.record(streaming.timed_parquet(s, data.sorted, 16, 8, 1, 1), max_batches=3)
    stages = set(tl.frame().stage)
    assert {"fetch", "collate", "wait"} <= stages and tl.samples == 48


def test_the_store_stops_when_a_measurement_fails(data, monkeypatch):
    started = []
    real = store.serve

    def serve(*a, **k):
        started.append(real(*a, **k))
        return started[-1]

    monkeypatch.setattr(streaming.store, "serve", serve)
    monkeypatch.setattr(streaming, "wire_epoch", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        streaming.readers_table(data, "unthrottled", 16, 8, 1, 16, 1, 1)
    assert started and started[0].process.poll() is not None


def test_a_parquet_stream_read_to_the_end_starts_a_new_epoch(data):
    src = data.sorted
    with store.serve(src.folder, "unthrottled") as s:
        reader = stream.ParquetStream([s.url("e", f) for f in src.files(".parquet")])
        first, second = [x["key"] for x in reader], [x["key"] for x in reader]
    assert first == second and len(first) == 80
