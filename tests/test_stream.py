"""Streaming shards: both formats hold the same samples, shuffle buffers, rank splits, resume, and bad input."""

import io
import shutil
import time

import numpy as np
import pytest
from PIL import Image

from fastloops_helpers.data import shards, store
from fastloops_helpers.load import stream


def _jpeg(i: int) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), i % 256, np.uint8)).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture(scope="module")
def shard_set(tmp_path_factory):
    samples = [(_jpeg(i), i % 4) for i in range(48)]
    return shards.write_shards(samples, tmp_path_factory.mktemp("s") / "sorted", shards=6, layout="sorted")


@pytest.fixture(scope="module")
def served(shard_set):
    with store.serve(shard_set.folder, "unthrottled") as s:
        yield s


def test_sorted_layout_groups_classes_and_shuffled_does_not(shard_set):
    assert shard_set.labels[0] == [0] * 8 and shard_set.samples == 48
    mixed = shards.ordered([i % 4 for i in range(48)], "shuffled", seed=1)
    assert sorted(mixed.tolist()) == list(range(48)) and mixed.tolist() != list(range(48))
    with pytest.raises(ValueError, match="layout"):
        shards.ordered([0, 1], "random")


def test_both_readers_read_every_sample_once(shard_set, served):
    urls = [served.url("t", f) for f in shard_set.files(".tar")]
    tar = [(s["key"], s["cls"]) for s in stream.tar_samples(urls)]
    pq = [(s["key"], s["cls"]) for s in stream.ParquetStream([served.url("p", f) for f in shard_set.files(".parquet")])]
    assert tar == pq and len(set(tar)) == 48
    assert [c for _, c in tar] == [c for shard in shard_set.labels for c in shard]
    assert served.bytes_read()["t"] == shard_set.nbytes(".tar")


def test_shuffle_buffer_is_a_seeded_permutation():
    items = [{"key": i} for i in range(100)]
    a = [s["key"] for s in stream.ShuffleBuffer(items, 10, seed=3)]
    assert sorted(a) == list(range(100)) and a != list(range(100))
    assert a == [s["key"] for s in stream.ShuffleBuffer(items, 10, seed=3)]
    assert [s["key"] for s in stream.ShuffleBuffer(items, 0)] == list(range(100))
    # a small buffer cannot move a sample far back: the first output is among the first 11 inputs
    assert a[0] <= 10


def test_rank_split_reads_each_sample_exactly_once(shard_set, served):
    urls = [served.url("r", f) for f in shard_set.files(".parquet")]
    keys = [s["key"] for rank in (0, 1) for s in stream.ParquetStream(stream.split_shards(urls, rank, 2))]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 48
    with pytest.raises(ValueError, match="multiple of 4"):
        stream.split_shards(urls, 0, 4)


def test_resume_gives_the_remaining_samples(shard_set, served):
    urls = [served.url("m", f) for f in shard_set.files(".parquet")]
    reader = stream.ParquetStream(urls)
    it = iter(reader)
    first = [next(it)["key"] for _ in range(13)]
    state = reader.state_dict()
    it.close()
    resumed = stream.ParquetStream(urls)
    resumed.load_state_dict(state)
    rest = [s["key"] for s in resumed]
    assert first + rest == [s["key"] for s in stream.ParquetStream(urls)]


def test_a_missing_shard_names_its_url(shard_set, served):
    urls = [served.url("x", f) for f in shard_set.files(".parquet")] + [served.url("x", "shard-00099.parquet")]
    with pytest.raises(stream.ShardError, match="shard-00099.parquet"):
        list(stream.ParquetStream(urls))
    tars = [served.url("x", "shard-00099.tar")]
    with pytest.raises(stream.ShardError, match="shard-00099.tar"):
        list(stream.tar_samples(tars, retries=0))


def test_a_truncated_shard_is_reported_or_counted(shard_set, tmp_path):
    folder = tmp_path / "cut"
    shutil.copytree(shard_set.folder, folder)
    for suffix in (".tar", ".parquet"):
        path = folder / f"shard-00002{suffix}"
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with store.serve(folder, "unthrottled") as s:
        pq = [s.url("c", f) for f in shard_set.files(".parquet")]
        with pytest.raises(stream.ShardError, match="shard-00002.parquet"):
            list(stream.ParquetStream(pq))
        skipping = stream.ParquetStream(pq, skip=True, expected=[len(x) for x in shard_set.labels])
        assert len(list(skipping)) == 40 and skipping.lost == 8
        counts = [len(x) for x in shard_set.labels]
        with pytest.raises(stream.ShardError, match="shard-00002.tar held [0-7] samples, the manifest says 8"):
            list(stream.tar_samples([s.url("c", f) for f in shard_set.files(".tar")], retries=0, expected=counts))


def test_the_store_going_away_mid_epoch_is_an_error_naming_the_shard(shard_set):
    s = store.serve(shard_set.folder, "unthrottled")
    urls = [s.url("g", f) for f in shard_set.files(".parquet")]
    reader = stream.ParquetStream(urls, ahead=0)
    it = iter(reader)
    next(it)
    s.stop()
    with pytest.raises(stream.ShardError, match="shard-0000[1-5].parquet"):
        list(it)
    s2 = store.serve(shard_set.folder, "unthrottled")
    tar_urls = [s2.url("g", f) for f in shard_set.files(".tar")]
    s2.stop()
    with pytest.raises(stream.ShardError, match="shard-00000.tar"):
        list(stream.tar_samples(tar_urls, retries=0))


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_parquet_stream_keeps_ahead_plus_one_requests_in_flight(ahead):
    """The shard being read and the next `ahead` are fetched at once: each fetch waits for the others."""
    import threading

    urls = [f"shard-{i}" for i in range(6)]
    barrier = threading.Barrier(ahead + 1, timeout=5)  # broken (an error) unless ahead + 1 fetches overlap
    reader = stream.ParquetStream(urls, ahead=ahead)

    def fetch(url):
        if urls.index(url) <= ahead:  # the first ahead + 1 shards are submitted together
            barrier.wait()
        return {"key": [url], "jpg": [b""], "cls": [0]}

    reader.fetch = fetch
    assert [s["key"] for s in reader] == urls


def test_parquet_stream_fetches_through_a_window_wider_than_the_requests_in_flight():
    """A slow shard at the head does not idle the connections: later shards of the window are fetched meanwhile."""
    import threading

    urls = [f"shard-{i}" for i in range(8)]
    later_done = threading.Event()
    reader = stream.ParquetStream(urls, ahead=1, window=4)  # 2 requests in flight, 4 shards fetched ahead

    def fetch(url):
        if url == "shard-0":  # the head waits until shards 1, 2 and 3 are in: only a window of 4 lets that happen
            assert later_done.wait(5), "the shards behind a slow head were not fetched"
        if url == "shard-3":
            later_done.set()
        return {"key": [url], "jpg": [b""], "cls": [0]}

    reader.fetch = fetch
    assert [s["key"] for s in reader] == urls
    with pytest.raises(ValueError, match="window >= ahead"):
        stream.ParquetStream(urls, ahead=3, window=2)


def test_parquet_stream_that_stops_early_fetches_no_queued_shard():
    urls = [f"shard-{i}" for i in range(40)]
    fetched = []
    reader = stream.ParquetStream(urls, ahead=1, window=20)

    def fetch(url):
        time.sleep(0.05)
        fetched.append(url)
        return {"key": [url], "jpg": [b""], "cls": [0]}

    reader.fetch = fetch
    it = iter(reader)
    next(it)  # about 50 ms: 2 shards fetched, 2 in flight, 17 queued
    it.close()
    assert len(fetched) <= 6  # the queued shards were cancelled: not the window's 21, never the 40 shards
