"""The batched loader: one index order per epoch, many rows gathered per call, batches with the data's structure.

`BatchLoader` makes one index order per epoch (shuffled or not, sharded like DistributedSampler, see `order`),
gathers many rows with one call (`rows`), and yields batches with the structure of the data.

Explained in notebooks/03_custom_loader.ipynb.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterator
from typing import Any

import torch

from ..measure.clock import Timer
from . import rows
from .order import EpochOrder, Sampled

CHUNK_BYTES = 2**19  # rows gathered per call: bigger amortises the call; 512 KiB stays in L2 (measured best)
PROBE = 6  # chunks the "measure" gather times at the start of an epoch (alternating the candidates)
CLEAR_WIN = 3.0  # a candidate this many times slower than the other after one chunk each is not tried again


class BatchLoader(Sampled):
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
        permutation of ``order.grouped_permutation``, cheaper for very large data).
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
    transform:
        A function applied to every whole batch after the gather (a batched transform: normalise, crop,
        flip, a dtype change; see ``load.transforms``), so that the loader yields what the step consumes.
        Random transforms should draw from a generator of their own (e.g. seeded from ``epoch_generator``).

    Each new iteration moves to the next epoch, so a plain loop gets a fresh order per epoch; call
    ``set_epoch(e)`` to choose the epoch (as with DistributedSampler). Unshuffled single-process batches
    are views of `data` (no copy): clone them before writing to them.
    """

    def __init__(
        self,
        data: Any,
        batch_size: int = 1,
        shuffle: bool | str = False,
        drop_last: bool = False,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        rank: int = 0,
        world_size: int = 1,
        group_size: int | None = None,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be a function of a batch (or None), got a {type(transform).__name__}")
        self.batched_dataset = _is_getitems_dataset(data)
        self.data = data if self.batched_dataset else rows.to_tensors(data)
        self.num_rows = len(data) if self.batched_dataset else rows.num_rows(self.data)
        self.device = torch.device("cpu") if self.batched_dataset else rows.device_of(self.data)
        seed = _initial_seed(seed, generator, world_size)
        self.sampler = EpochOrder(
            self.num_rows, batch_size, shuffle, drop_last, seed, rank, world_size, group_size, self.device
        )
        self.transform = transform

    def __iter__(self) -> Iterator[Any]:
        batches = self._batches()
        return batches if self.transform is None else map(self.transform, batches)

    def _batches(self) -> Iterator[Any]:
        _, order = self.sampler.next_epoch()
        if len(order) == 0:  # torch's split would yield one empty batch
            return iter(())
        if self.batched_dataset:
            return self._iter_dataset(order)
        if self.shuffle is False and self.world_size == 1:
            return self._iter_views(len(order))
        return self._iter_gathered(order)

    def _iter_dataset(self, order: torch.Tensor) -> Iterator[Any]:
        for batch in order.split(self.batch_size):
            yield self.data.__getitems__(batch.tolist())

    def _iter_views(self, used: int) -> Iterator[Any]:
        yield from rows.split(rows.narrow(self.data, 0, used), self.batch_size)

    def _iter_gathered(self, order: torch.Tensor) -> Iterator[Any]:
        row_bytes = rows.row_nbytes(self.data)
        chunks = list(order.split(max(1, CHUNK_BYTES // max(1, row_bytes) // self.batch_size) * self.batch_size))
        primitive = None
        if rows.CPU_GATHER == "measure" and self.device.type == "cpu" and row_bytes >= 64 and len(chunks) > 2 * PROBE:
            primitive, used = yield from self._probe(chunks[:PROBE])
            chunks = chunks[used:]
        for index in chunks:
            yield from rows.split(rows.take(self.data, index, primitive), self.batch_size)

    def _probe(self, chunks: list[torch.Tensor]) -> Generator[Any, None, tuple[str, int]]:
        # time each candidate gather on alternate chunks (still yielded); return the faster by its best time, and
        # how many chunks it took: the winner depends on whether other work keeps this machine's cores busy right
        # now (notebooks/02_getitem_cost.ipynb). A candidate CLEAR_WIN times slower after one try each ends it.
        best = dict.fromkeys(rows.PROBED, math.inf)
        for i, index in enumerate(chunks, start=1):
            name = rows.PROBED[(i - 1) % len(rows.PROBED)]
            with Timer("cpu") as t:
                chunk = rows.take(self.data, index, name)
            best[name] = min(best[name], t.seconds)
            yield from rows.split(chunk, self.batch_size)
            if i % len(rows.PROBED) == 0 and max(best.values()) > CLEAR_WIN * min(best.values()):
                break
        return min(best, key=best.get), i  # type: ignore[arg-type]  # every key of best has a value

    def __repr__(self) -> str:
        return (
            f"BatchLoader(rows={self.num_rows}, batch_size={self.batch_size}, shuffle={self.shuffle!r}, "
            f"drop_last={self.drop_last}, rank={self.rank}, world_size={self.world_size}, "
            f"device={self.device}, batches={len(self)}"
            + (
                f", transform={getattr(self.transform, '__name__', type(self.transform).__name__)})"
                if self.transform
                else ")"
            )
        )


def _is_getitems_dataset(data: Any) -> bool:
    # TensorDicts have __getitems__ too, but gather faster through rows.take (about 8x on a memmapped tensorclass)
    return (
        callable(getattr(data, "__getitems__", None))
        and not rows.is_tensor_collection(data)
        and not isinstance(data, (torch.Tensor, dict, list, tuple))
    )


def _initial_seed(seed: int | None, generator: torch.Generator | None, world_size: int) -> int:
    if seed is not None:
        return int(seed)
    if generator is None and world_size > 1:
        return 0
    return int(torch.randint(0, 2**62, (), generator=generator))
