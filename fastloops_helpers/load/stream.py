"""Read shards as streams: a seeded shuffle buffer, shards split over ranks, and two readers over HTTP.

- `ShuffleBuffer(samples, size, seed)`: the local shuffle every streaming reader offers (fill `size` samples,
  then yield a random one and put the next in its place); `size=0` passes samples through in order.
- `split_shards(urls, rank, world_size)`: whole shards per rank, every sample exactly once when the shard count
  divides by the world size (and an error saying what to do when it does not).
- `ParquetStream(urls, ...)`: one GET per shard parsed by pyarrow, `ahead` shards fetched in background threads
  so their latency overlaps the reading; its position can be saved and resumed (`ParquetStream.state_dict`).
- `tar_samples(urls, ...)`: WebDataset over curl, with bounded retries (no skip mode: it cannot count losses);
  `TarStream` makes it a source a loop can read once per epoch.
- `HFStream(urls, ...)`: Hugging Face `datasets` streaming the Parquet shards over HTTP (resumable, splittable by
  node, with its own skip mode whose losses are counted here).
- `shard_order`, `interleave`, `shuffled`: the epoch's shard order, several shards read at once, the buffer.
- `Batches(samples, batch_size, px, threads)`: batches of decoded images, with timeline hooks (`Recorder`); they
  live in `load.stream_batches` and are re-exported here.

Every sample is a dict with `key`, `cls` and `jpg` (bytes). A shard that is missing, cut short, or whose server
went away raises `ShardError` naming the shard and its URL; with `skip=True` the reader goes on and counts the
samples it lost in `lost` (nothing is dropped silently).

Experimental: the interface may change in a minor version.

Explained in notebooks/16_when_data_no_longer_fits.ipynb.
"""

from __future__ import annotations

import os
import random
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ..extras import require
from .stream_batches import Batches, Recorder, Sample, decode_jpeg

__all__ = [  # the readers here, and the batches from load.stream_batches
    "Batches",
    "HFStream",
    "ParquetStream",
    "Recorder",
    "ShardError",
    "ShuffleBuffer",
    "TarStream",
    "decode_jpeg",
    "fetch_parquet",
    "hf_dataset",
    "interleave",
    "shard_order",
    "shuffled",
    "split_shards",
    "tar_samples",
]

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy: the store is on loopback


class ShardError(RuntimeError):
    """A shard could not be read: names the shard's URL and what went wrong."""


class ShuffleBuffer:
    """Yield `samples` shuffled within a buffer of `size` (0: in order), seeded; `set_epoch` changes the order."""

    def __init__(self, samples: Iterable[Sample], size: int, seed: int = 0) -> None:
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        self.samples, self.size, self.seed, self.epoch = samples, size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """Use the order of `epoch` from the next iteration on."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[Sample]:
        if self.size == 0:
            yield from self.samples
            return
        rng = random.Random(f"{self.seed}-{self.epoch}")
        buf: list[Sample] = []
        for sample in self.samples:
            if len(buf) < self.size:
                buf.append(sample)
                continue
            i = rng.randrange(len(buf))
            buf[i], sample = sample, buf[i]
            yield sample
        rng.shuffle(buf)
        yield from buf


def split_shards(urls: Sequence[str], rank: int, world_size: int) -> list[str]:
    """Return rank `rank`'s shards: every `world_size`-th one, so each sample is read by exactly one rank."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if len(urls) % world_size:
        raise ValueError(
            f"{len(urls)} shards do not split evenly over {world_size} ranks: ranks would read "
            f"different numbers of samples; write a multiple of {world_size} shards"
        )
    return list(urls[rank::world_size])


class ParquetStream:
    """Samples of Parquet shards read over HTTP with pyarrow, `ahead` shards fetched in the background.

    Parameters
    ----------
    urls: the shards, in reading order.
    ahead: requests in flight beyond the first, on `ahead` + 1 threads (their latency overlaps reading); 0 reads
        one shard at a time.
    window: shards fetched or being fetched ahead of the reader, at most (default 2 x (`ahead` + 1), at least
        `ahead` + 1). Shards are read in order, so those that finish early wait for the one being read; a window
        wider than the requests in flight keeps every connection busy meanwhile. It bounds the memory: `window`
        shards.
    skip: on a bad shard, count its samples in `lost` and go on instead of raising `ShardError`.
    expected: samples per shard (from the manifest), to count what a skipped shard lost.
    """

    def __init__(
        self,
        urls: Sequence[str],
        ahead: int = 2,
        skip: bool = False,
        expected: Sequence[int] | None = None,
        window: int | None = None,
    ) -> None:
        self.window = 2 * (ahead + 1) if window is None else window
        if ahead < 0 or self.window < ahead + 1:
            raise ValueError(
                f"ParquetStream needs ahead >= 0 and window >= ahead + 1 (got ahead={ahead}, window={window}): "
                "a window narrower than the requests in flight leaves threads with nothing to fetch"
            )
        require("pyarrow.parquet", "stream")  # imported here, at set-up: not by the first epoch's fetch threads
        self.urls, self.ahead, self.skip = list(urls), ahead, skip
        self.expected = list(expected) if expected is not None else None
        self.position = (0, 0)  # (shard, sample) of the next sample to yield
        self.lost = 0
        self.fetch: Callable[[str], dict[str, list[Any]]] = fetch_parquet  # a timeline may wrap it

    def state_dict(self) -> dict[str, int]:
        """Return where the stream stands: enough to resume exactly after the last yielded sample."""
        return {"shard": self.position[0], "sample": self.position[1]}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume from a `state_dict()`: the next iteration starts at that sample."""
        self.position = (int(state["shard"]), int(state["sample"]))

    def __iter__(self) -> Iterator[Sample]:
        first_shard, first_sample = self.position
        pool = ThreadPoolExecutor(self.ahead + 1)  # ahead + 1 requests in flight; the rest of the window queues
        try:
            pending = [pool.submit(self.fetch, u) for u in self.urls[first_shard : first_shard + self.window]]
            for index in range(first_shard, len(self.urls)):
                table = self._result(pending.pop(0), index)
                if index + self.window < len(self.urls):
                    pending.append(pool.submit(self.fetch, self.urls[index + self.window]))
                start = first_sample if index == first_shard else 0
                for row in range(start, len(table["key"])):
                    self.position = (index, row + 1)
                    yield {"key": table["key"][row], "jpg": table["jpg"][row], "cls": table["cls"][row]}
                self.position = (index + 1, 0)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # a reader that stops early fetches no queued shard
        self.position = (0, 0)  # a whole epoch read: the next iteration is a new epoch

    def _result(self, future: Future, index: int) -> dict[str, list[Any]]:
        try:
            return future.result()
        except ShardError:
            if not self.skip:
                raise
            self.lost += self.expected[index] if self.expected else 0
            return {"key": [], "jpg": [], "cls": []}


def fetch_parquet(url: str) -> dict[str, list[Any]]:
    """Return one Parquet shard's columns as lists: one GET for the whole object, parsed in memory.

    One request pays the store's latency once; pyarrow over a file-like object would pay it per range request
    (the size, the footer, the row groups). `ShardError` names the URL on any failure.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with DIRECT.open(url, timeout=30) as answer:
            data = answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise ShardError(f"shard {url} is missing from the store (listed in the shard list, not served)") from exc
        raise ShardError(f"shard {url} could not be read (HTTP {exc.code}: {exc.reason})") from exc
    except Exception as exc:  # refused, reset, cut short: the URL is what the user needs
        raise ShardError(f"shard {url} could not be read ({type(exc).__name__}: {exc}); is the store running?") from exc
    try:
        return pq.read_table(pa.BufferReader(data), columns=["key", "jpg", "cls"]).to_pydict()
    except Exception as exc:  # pyarrow raises many kinds for a cut or corrupt file
        raise ShardError(
            f"shard {url} could not be read ({type(exc).__name__}: {exc}); is the shard complete?"
        ) from exc


def tar_samples(urls: Sequence[str], retries: int = 2, expected: Sequence[int] | None = None) -> Iterator[Sample]:
    """Yield the samples of WebDataset tar shards fetched with curl (`retries` more tries, 1 s apart).

    WebDataset's own default is 30 tries 2 s apart: a store that went away would take a minute to report. A tar
    cut short at a member boundary reads as a shorter shard, so pass `expected` (samples per shard, from the
    manifest) to turn that into a `ShardError`. There is no skip mode: the caller decides what a loss means.
    """
    wds = require("webdataset", "stream")

    def reraise(exc: Exception) -> bool:
        where = next((a for a in exc.args if isinstance(a, str) and a.startswith(("http", "pipe:"))), "?")
        raise ShardError(f"shard {where.split()[-1]} could not be read ({type(exc).__name__}: {exc.args[0]})") from exc

    pipes = [f"pipe:curl --retry {retries} --retry-delay 1 -f -s -L {u}" for u in urls]
    seen = dict.fromkeys(urls, 0)
    for sample in wds.WebDataset(pipes, shardshuffle=False, handler=reraise, empty_check=False):
        url = sample["__url__"].split()[-1]
        if "cls" not in sample or "jpg" not in sample:
            raise ShardError(f"shard {url}: sample {sample.get('__key__')} lacks .jpg or .cls (cut short?)")
        seen[url] += 1
        yield {"key": sample["__key__"], "jpg": sample["jpg"], "cls": int(sample["cls"]), "url": url}
    for url, count, want in zip(urls, seen.values(), expected or []):
        if count != want:
            raise ShardError(f"shard {url} held {count} samples, the manifest says {want} (cut short?)")


class TarStream:
    """WebDataset tar shards as a source a loop reads once per epoch (each pass fetches the shards again)."""

    def __init__(self, urls: Sequence[str], retries: int = 2, expected: Sequence[int] | None = None) -> None:
        self.urls, self.retries, self.expected = list(urls), retries, expected

    def __iter__(self) -> Iterator[Sample]:
        return tar_samples(self.urls, self.retries, self.expected)


def hf_dataset(urls: Sequence[str], skip: bool = False) -> Any:
    """Return `datasets`' streaming IterableDataset over Parquet shards at `urls` (offline: loopback URLs only)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # no Hub look-ups: the shards are all it reads
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    datasets = require("datasets", "stream")

    if datasets.logging.get_verbosity() < datasets.logging.ERROR:
        datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    try:
        return datasets.load_dataset(
            "parquet",
            data_files={"train": list(urls)},
            split="train",
            streaming=True,
            on_bad_files="skip" if skip else "error",
        )
    except FileNotFoundError as exc:
        raise ShardError(f"shard {_url_in(exc, urls) or '?'} is missing from the store ({exc})") from exc


class HFStream:
    """Parquet shards streamed by Hugging Face `datasets` over HTTP; errors name the shard's URL.

    Parameters
    ----------
    urls: the shards, in reading order.
    expected: samples per shard (from the manifest): a shard that yields fewer raises `ShardError`, or with
        `skip` is counted in `lost` (`datasets` itself skips bad files silently with on_bad_files="skip").
    rank, world_size: `datasets.distributed.split_dataset_by_node`: whole shards per rank when the shard count
        divides by the world size, else every rank reads every shard and keeps one sample in `world_size`.
    """

    def __init__(
        self,
        urls: Sequence[str],
        expected: Sequence[int] | None = None,
        skip: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.urls, self.skip, self.lost, self.resumed = list(urls), skip, 0, False
        self.expected = list(expected) if expected is not None else None
        self.dataset = hf_dataset(self.urls, skip)
        if world_size > 1:
            from datasets.distributed import split_dataset_by_node

            self.dataset = split_dataset_by_node(self.dataset, rank=rank, world_size=world_size)
        self.whole = world_size == 1

    def for_rank(self, rank: int, world_size: int) -> HFStream:
        """Return rank `rank`'s share of this stream (`split_dataset_by_node`), without `load_dataset` again."""
        from datasets.distributed import split_dataset_by_node

        share = object.__new__(HFStream)
        share.__dict__.update(self.__dict__, lost=0, whole=world_size == 1)
        share.dataset = split_dataset_by_node(self.dataset, rank=rank, world_size=world_size)
        return share

    def state_dict(self) -> dict[str, Any]:
        """Return `datasets`' own record of the position (shard and sample within it)."""
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from a `state_dict()`: the next iteration starts after the last sample yielded."""
        self.dataset.load_state_dict(state)
        self.resumed = True

    def __iter__(self) -> Iterator[Sample]:
        count = 0
        try:
            for row in self.dataset:
                count += 1
                yield {"key": row["key"], "jpg": row["jpg"], "cls": row["cls"]}
        except Exception as exc:  # fsspec, aiohttp and pyarrow errors: name the shard it stopped in
            raise ShardError(
                f"shard {self._culprit(exc, count)} could not be read ({type(exc).__name__}: "
                f"{exc}); is the shard complete and the store running?"
            ) from exc
        if self.expected is not None and self.whole and not self.resumed and count != sum(self.expected):
            if not self.skip:
                raise ShardError(
                    f"the shards held {count} samples, the manifest says {sum(self.expected)}: "
                    f"shard {self._culprit(None, count)} is short"
                )
            self.lost += sum(self.expected) - count

    def _culprit(self, exc: BaseException | None, count: int) -> str:
        """Return the failing shard's URL: from the error if it names one, else from the counts read so far."""
        found = _url_in(exc, self.urls) if exc is not None else None
        if found or self.expected is None or not self.whole:
            return found or "?"
        done = np.searchsorted(np.cumsum(self.expected), count, side="right")
        return self.urls[min(int(done), len(self.urls) - 1)]


def _url_in(exc: BaseException | None, urls: Sequence[str]) -> str | None:
    """Return the first of `urls` named in `exc` or the errors it came from."""
    while exc is not None:
        for url in re.findall(r"https?://[^\s'\"]+", str(exc)):
            if url in urls:
                return url
        exc = exc.__cause__ or exc.__context__
    return None


def shard_order(shards: int, seed: int, epoch: int) -> list[int]:
    """Return the epoch's order of shard indices: one seeded shuffle, the same on every rank."""
    return random.Random(f"shards-{seed}-{epoch}").sample(range(shards), shards)


def interleave(streams: Sequence[Iterable[Sample]], at_once: int) -> Iterator[Sample]:
    """Read `at_once` streams (shards) at a time, one sample from each in turn; open the next when one ends."""
    waiting = iter(streams)
    open_: list[Iterator[Sample]] = []
    while True:
        while len(open_) < at_once and (nxt := next(waiting, None)) is not None:
            open_.append(iter(nxt))
        if not open_:
            return
        for it in list(open_):
            sample = next(it, None)
            if sample is None:
                open_.remove(it)
            else:
                yield sample


def shuffled(
    shards: Sequence[Iterable[Sample]], buffer: int, at_once: int = 1, seed: int = 0, epoch: int = 0
) -> ShuffleBuffer:
    """Return an epoch of `shards`: shard order shuffled, `at_once` shards interleaved, a `buffer`-sample shuffle."""
    order = shard_order(len(shards), seed, epoch)
    mixed = ShuffleBuffer(interleave([shards[i] for i in order], at_once), buffer, seed)
    mixed.set_epoch(epoch)
    return mixed
