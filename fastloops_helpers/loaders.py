"""A batched loader over row data, and the Datasets/collate functions that batch through DataLoader.

`BatchLoader` makes one index order per epoch (shuffled or not, sharded like DistributedSampler), gathers
many rows with one call, and yields batches with the structure of the data. The Datasets below are the
slide's per-sample Dataset and its `__getitems__` version; they live here (not in a notebook) so that
DataLoader workers can import them under fork, spawn and forkserver.

Explained in notebooks/01_the_question.ipynb, 02_getitem_cost.ipynb and 03_custom_loader.ipynb.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from . import rows

CHUNK_BYTES = 2**19  # rows gathered per call: bigger amortises the call; 512 KiB stays in L2 (measured best)


class BatchLoader:
    """Iterate over `data` in batches of rows, with DataLoader's and DistributedSampler's sampling rules.

    Explained in notebooks/03_custom_loader.ipynb.

    Parameters
    ----------
    data:
        A tensor (on any device: the order and the gathers then happen there), a numpy array or memmap
        (wrapped without a copy), a TensorDict or tensorclass, a dict/tuple/list of these with the same
        number of rows, or a Dataset with ``__getitems__(list_of_indices)`` (its return value is yielded).
    batch_size:
        Rows per batch (>= 1).
    shuffle:
        False (in order), True (a uniform random permutation per epoch) or "grouped" (the quasi-random
        permutation of ``samplers.grouped_permutation``, cheaper for very large data).
    drop_last:
        Drop the last incomplete batch; with ``world_size > 1`` also drop the tail that does not divide
        evenly among ranks (otherwise it is padded by repeating indices, as DistributedSampler does).
    seed, generator:
        The order of epoch ``e`` depends only on (seed, e). Without a seed, one is drawn once from
        `generator` (or from torch's global RNG, so ``torch.manual_seed`` makes runs repeatable); with
        ``world_size > 1`` the default seed is 0, so that every rank makes the same permutation.
    rank, world_size:
        This process's shard: every ``world_size``-th index of the epoch's order, starting at ``rank``.
    group_size:
        Indices per group for ``shuffle="grouped"`` (default: about sqrt(number of rows)).

    Each new iteration moves to the next epoch, so a plain loop gets a fresh order per epoch; call
    ``set_epoch(e)`` to choose the epoch (as with DistributedSampler). Unshuffled single-process batches
    are views of `data` (no copy): clone them before writing to them.
    """

    def __init__(self, data: Any, batch_size: int = 1, shuffle: bool | str = False, drop_last: bool = False,
                 seed: int | None = None, generator: torch.Generator | None = None, rank: int = 0,
                 world_size: int = 1, group_size: int | None = None) -> None:
        _check_options(batch_size, shuffle, rank, world_size, group_size)
        self.batched_dataset = _is_getitems_dataset(data)
        self.data = data if self.batched_dataset else rows.to_tensors(data)
        self.num_rows = len(data) if self.batched_dataset else rows.num_rows(self.data)
        self.device = torch.device("cpu") if self.batched_dataset else rows.device_of(self.data)
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.rank, self.world_size, self.group_size = rank, world_size, group_size
        self.seed = _initial_seed(seed, generator, world_size)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration uses."""
        self.epoch = int(epoch)

    def num_samples(self) -> int:
        """Return how many indices this rank gets per epoch (DistributedSampler's rule)."""
        return shard_size(self.num_rows, self.world_size, self.drop_last)

    def __len__(self) -> int:
        n = self.num_samples()
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def indices(self, epoch: int | None = None) -> torch.Tensor:
        """Return this rank's index order for `epoch` (default: the current one), before batching."""
        epoch = self.epoch if epoch is None else epoch
        order = epoch_order(self.num_rows, self.shuffle, self.seed, epoch, self.device, self.group_size)
        return shard(order, self.rank, self.world_size, self.drop_last)

    def __iter__(self) -> Iterator[Any]:
        order = self.indices()
        self.epoch += 1
        used = len(self) * self.batch_size if self.drop_last else len(order)
        if used == 0:  # torch's split would yield one empty batch
            return iter(())
        if self.batched_dataset:
            return self._iter_dataset(order[:used])
        if self.shuffle is False and self.world_size == 1:
            return self._iter_views(used)
        return self._iter_gathered(order[:used])

    def _iter_dataset(self, order: torch.Tensor) -> Iterator[Any]:
        for batch in order.split(self.batch_size):
            yield self.data.__getitems__(batch.tolist())

    def _iter_views(self, used: int) -> Iterator[Any]:
        yield from rows.split(rows.narrow(self.data, 0, used), self.batch_size)

    def _iter_gathered(self, order: torch.Tensor) -> Iterator[Any]:
        row_bytes = rows.row_nbytes(self.data)
        chunks = list(order.split(max(1, CHUNK_BYTES // max(1, row_bytes) // self.batch_size) * self.batch_size))
        primitive = None
        if rows.CPU_GATHER == "measure" and self.device.type == "cpu" and row_bytes >= 64 and len(chunks) > 8:
            primitive = yield from self._probe(chunks[:4])
            chunks = chunks[4:]
        for index in chunks:
            yield from rows.split(rows.take(self.data, index, primitive), self.batch_size)

    def _probe(self, chunks: list[torch.Tensor]) -> Iterator[Any]:
        # time each candidate gather on alternate chunks (still yielded), return the faster: the winner depends on
        # whether other work keeps this machine's cores busy right now (notebooks/02_getitem_cost.ipynb)
        seconds = dict.fromkeys(rows.PROBED, 0.0)
        for i, index in enumerate(chunks):
            name = rows.PROBED[i % len(rows.PROBED)]
            start = time.perf_counter()
            chunk = rows.take(self.data, index, name)
            seconds[name] += time.perf_counter() - start
            yield from rows.split(chunk, self.batch_size)
        return min(seconds, key=seconds.get)

    def __repr__(self) -> str:
        return (f"BatchLoader(rows={self.num_rows}, batch_size={self.batch_size}, shuffle={self.shuffle!r}, "
                f"drop_last={self.drop_last}, rank={self.rank}, world_size={self.world_size}, "
                f"device={self.device}, batches={len(self)})")


def _check_options(batch_size: int, shuffle: bool | str, rank: int, world_size: int,
                   group_size: int | None) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if shuffle not in (False, True, "grouped"):
        raise ValueError(f"shuffle must be False, True or 'grouped', got {shuffle!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got rank={rank}")
    if group_size is not None and group_size < 1:
        raise ValueError(f"group_size must be >= 1 (or None for the default), got {group_size}")


def _is_getitems_dataset(data: Any) -> bool:
    # TensorDicts have __getitems__ too, but gather faster through rows.take (about 8x on a memmapped tensorclass)
    return (callable(getattr(data, "__getitems__", None)) and not rows.is_tensor_collection(data)
            and not isinstance(data, (torch.Tensor, dict, list, tuple)))


def _initial_seed(seed: int | None, generator: torch.Generator | None, world_size: int) -> int:
    if seed is not None:
        return int(seed)
    if generator is None and world_size > 1:
        return 0
    return int(torch.randint(0, 2**62, (), generator=generator))


def epoch_generator(seed: int, epoch: int, device: torch.device | str = "cpu") -> torch.Generator:
    """Return a generator whose state depends only on (seed, epoch), on `device`."""
    return torch.Generator(device=device).manual_seed(_mix(seed, epoch))


def _mix(seed: int, epoch: int) -> int:
    # splitmix64 of the pair, so that (seed, epoch + 1) and (seed + 1, epoch) give unrelated orders;
    # numpy's SeedSequence does the same but costs ~0.4 ms per call, a tenth of a small epoch
    z = (seed * 0x9E3779B97F4A7C15 + epoch + 0x632BE59BD9B4E019) % 2**64
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = ((z ^ (z >> shift)) * mult) % 2**64
    return (z ^ (z >> 31)) & (2**63 - 1)


def epoch_order(n: int, shuffle: bool | str, seed: int, epoch: int, device: torch.device | str = "cpu",
                group_size: int | None = None) -> torch.Tensor:
    """Return the order of all `n` row indices for one epoch, on `device`."""
    device = torch.device(device)
    dtype = torch.int32 if n < 2**31 else torch.int64  # half the memory: the shuffle runs in cache longer
    with one_thread(device):
        if shuffle is False:
            return torch.arange(n, dtype=dtype, device=device)
        if shuffle == "grouped":
            from .samplers import grouped_permutation  # written alongside notebook 04

            size = group_size or max(1, round(math.sqrt(n)))
            return grouped_permutation(n, size, epoch_generator(seed, epoch)).to(device)
        return torch.randperm(n, generator=epoch_generator(seed, epoch, device), dtype=dtype, device=device)


@contextmanager
def one_thread(device: torch.device | str = "cpu") -> Iterator[None]:
    """Run the enclosed CPU ops with one intra-op thread, then restore the count.

    `randperm` fills its output with a parallel loop before its serial shuffle; on a 2-core machine shared with
    other work, waking the second thread made the whole permutation ~4x slower (median 7.1 ms vs 1.8 ms for
    300,000 indices), and its spinning slowed the caller's next ops. The switch costs under a µs and only
    affects the calling thread's OpenMP setting. Explained in notebooks/03_custom_loader.ipynb.
    """
    threads = torch.get_num_threads()
    serial = torch.device(device).type == "cpu" and threads > 1
    if serial:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if serial:
            torch.set_num_threads(threads)


def shard_size(n: int, world_size: int, drop_last: bool) -> int:
    """Return the indices per rank: DistributedSampler drops (drop_last) or pads the uneven tail."""
    if drop_last and n % world_size:
        return n // world_size
    return math.ceil(n / world_size)


def shard(order: torch.Tensor, rank: int, world_size: int, drop_last: bool) -> torch.Tensor:
    """Return rank's share of `order`, padded by repeating from the start or truncated, like DistributedSampler."""
    if world_size == 1:
        return order
    total = shard_size(len(order), world_size, drop_last) * world_size
    if total > len(order):
        repeats = math.ceil(total / len(order))
        order = order.repeat(repeats)
    return order[rank:total:world_size]


class RowDataset(Dataset):
    """The slide's per-sample Dataset: `__getitem__` returns one row of `data` (tensor, array or dict of them).

    Explained in notebooks/02_getitem_cost.ipynb.
    """

    def __init__(self, data: Any) -> None:
        self.data = rows.to_tensors(data)
        self.length = rows.num_rows(self.data)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        return _index(self.data, index)


def _index(data: Any, index: Any) -> Any:
    if isinstance(index, torch.Tensor) and index.dim() == 1:
        return rows.take(data, index)  # a batch: the fast gather, not advanced indexing
    if isinstance(data, dict):
        return {k: _index(v, index) for k, v in data.items()}
    if isinstance(data, (tuple, list)):
        return type(data)(_index(v, index) for v in data)
    return data[index]


class GetItemsMixin:
    """Give a Dataset whose `__getitem__` accepts an index tensor a batched `__getitems__`.

    DataLoader then makes one call per batch instead of `batch_size` calls; pair it with `collate_batch`,
    because DataLoader still passes what `__getitems__` returns to its `collate_fn`.
    Explained in notebooks/02_getitem_cost.ipynb.
    """

    def __getitems__(self, indices: Sequence[int]) -> Any:
        return self[torch.as_tensor(indices)]


class BatchRowDataset(GetItemsMixin, RowDataset):
    """`RowDataset` that fetches a whole batch with one `__getitems__` call.

    Explained in notebooks/02_getitem_cost.ipynb.
    """


class SampleListDataset(RowDataset):
    """`RowDataset` whose `__getitems__` gathers a batch at once but returns a list of samples (as the docs ask).

    `default_collate` then works, but still stacks the samples one by one.
    Explained in notebooks/02_getitem_cost.ipynb.
    """

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        return _samples(self[torch.as_tensor(indices)])


def _samples(batch: Any) -> list[Any]:
    if isinstance(batch, dict):
        columns = [_samples(v) for v in batch.values()]
        return [dict(zip(batch, values)) for values in zip(*columns)]
    if isinstance(batch, (tuple, list)):
        return [type(batch)(values) for values in zip(*(_samples(v) for v in batch))]
    return list(batch.unbind(0))


def collate_batch(batch: Any) -> Any:
    """Return an already-batched `__getitems__` result unchanged (DataLoader's collate_fn)."""
    return batch
