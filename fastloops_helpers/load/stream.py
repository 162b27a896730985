"""Read shards as streams: a seeded shuffle buffer, shards split over ranks, and two readers over HTTP.

- `ShuffleBuffer(samples, size, seed)`: the local shuffle every streaming reader offers (fill `size` samples,
  then yield a random one and put the next in its place); `size=0` passes samples through in order.
- `split_shards(urls, rank, world_size)`: whole shards per rank, every sample exactly once when the shard count
  divides by the world size (and an error saying what to do when it does not).
- `parquet_samples(urls, ...)`: pyarrow over HTTP range requests, `ahead` shards fetched in background threads
  so their latency overlaps the reading; its position can be saved and resumed (`ParquetStream.state_dict`).
- `tar_samples(urls, ...)`: WebDataset over curl, with bounded retries (no skip mode: it cannot count losses).

Every sample is a dict with `key`, `cls` and `jpg` (bytes). A shard that is missing, cut short, or whose server
went away raises `ShardError` naming the shard and its URL; with `skip=True` the reader goes on and counts the
samples it lost in `lost` (nothing is dropped silently).

Experimental: the interface may change in a minor version.

Explained in notebooks/16_when_data_no_longer_fits.ipynb.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..extras import require

Sample = dict[str, Any]


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
        rng, buf = random.Random(f"{self.seed}-{self.epoch}"), []
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
        raise ValueError(f"{len(urls)} shards do not split evenly over {world_size} ranks: ranks would read "
                         f"different numbers of samples; write a multiple of {world_size} shards")
    return list(urls[rank::world_size])


class ParquetStream:
    """Samples of Parquet shards read over HTTP with pyarrow, `ahead` shards fetched in the background.

    Parameters
    ----------
    urls: the shards, in reading order.
    ahead: shards fetched ahead in threads (their request latency overlaps reading); 0 reads one at a time.
    skip: on a bad shard, count its samples in `lost` and go on instead of raising `ShardError`.
    expected: samples per shard (from the manifest), to count what a skipped shard lost.
    """

    def __init__(self, urls: Sequence[str], ahead: int = 2, skip: bool = False,
                 expected: Sequence[int] | None = None) -> None:
        self.urls, self.ahead, self.skip = list(urls), ahead, skip
        self.expected = list(expected) if expected is not None else None
        self.position = (0, 0)  # (shard, sample) of the next sample to yield
        self.lost = 0

    def state_dict(self) -> dict[str, int]:
        """Return where the stream stands: enough to resume exactly after the last yielded sample."""
        return {"shard": self.position[0], "sample": self.position[1]}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume from a `state_dict()`: the next iteration starts at that sample."""
        self.position = (int(state["shard"]), int(state["sample"]))

    def __iter__(self) -> Iterator[Sample]:
        first_shard, first_sample = self.position
        with ThreadPoolExecutor(max(self.ahead, 1)) as pool:
            pending = [pool.submit(fetch_parquet, u) for u in self.urls[first_shard:first_shard + self.ahead + 1]]
            for index in range(first_shard, len(self.urls)):
                table = self._result(pending.pop(0), index)
                nxt = index + self.ahead + 1
                if nxt < len(self.urls):
                    pending.append(pool.submit(fetch_parquet, self.urls[nxt]))
                start = first_sample if index == first_shard else 0
                for row in range(start, len(table["key"])):
                    self.position = (index, row + 1)
                    yield {"key": table["key"][row], "jpg": table["jpg"][row], "cls": table["cls"][row]}
                self.position = (index + 1, 0)

    def _result(self, future: Future, index: int) -> dict[str, list[Any]]:
        try:
            return future.result()
        except ShardError:
            if not self.skip:
                raise
            self.lost += self.expected[index] if self.expected else 0
            return {"key": [], "jpg": [], "cls": []}


def fetch_parquet(url: str) -> dict[str, list[Any]]:
    """Return one Parquet shard's columns as lists, read over HTTP; `ShardError` names the URL on failure."""
    fsspec, pq = require("fsspec", "stream"), require("pyarrow.parquet", "stream")
    try:
        with fsspec.filesystem("http").open(url, "rb", block_size=8 * 2**20) as f:
            return pq.read_table(f, columns=["key", "jpg", "cls"]).to_pydict()
    except FileNotFoundError as exc:
        raise ShardError(f"shard {url} is missing from the store (listed in the shard list, not served)") from exc
    except Exception as exc:  # pyarrow, fsspec and aiohttp raise many kinds; the URL is what the user needs
        raise ShardError(f"shard {url} could not be read ({type(exc).__name__}: {exc}); "
                         "is the shard complete and the store running?") from exc


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
