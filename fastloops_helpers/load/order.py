"""Epoch orders: a reproducible permutation per (seed, epoch), grouped permutations, DistributedSampler's shards.

`EpochOrder` holds one loader's sampling (epoch, seed, shuffle, drop_last, rank and world size); `BatchLoader`
and `ThreadLoader` both hold one, so they sample alike. Explained in notebooks/03_custom_loader.ipynb and
notebooks/04_fast_shuffle.ipynb.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from ..measure.threads import torch_threads

VARIANTS = 16  # distinct inner shuffles shared by the groups: more is more random, costs variants * group_size draws


def _check(n: int, group_size: int) -> None:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")


def _gen_device(generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else torch.device("cpu")


def _randperm(n: int, generator: torch.Generator | None) -> torch.Tensor:
    return torch.randperm(n, generator=generator, device=_gen_device(generator))


def grouped_permutation(
    n: int,
    group_size: int,
    generator: torch.Generator | None = None,
    *,
    device: torch.device | str | None = None,
    variants: int = VARIANTS,
) -> torch.Tensor:
    """Return a random int64 permutation of range(n) built from shuffled groups of `group_size` indices.

    The index is cut into consecutive groups; the order of the groups is shuffled, and inside every
    group the indices are reordered by one of `variants` random permutations of range(group_size),
    picked at random per group. Only about n / group_size + variants * group_size random numbers are
    drawn, against n for a full shuffle, and the rest is one gather and one add over the output, which
    run at memory speed. A last partial group (n not a multiple of `group_size`) is shuffled on its
    own and placed at a random slot among the groups. Batches drawn from the result mix at most a few
    groups, so keep `group_size` well below (dataset length / number of classes) on sorted data.
    Explained in notebooks/04_fast_shuffle.ipynb.
    """
    _check(n, group_size)
    if variants < 1:
        raise ValueError(f"variants must be >= 1, got {variants}")
    device = torch.device(device) if device is not None else _gen_device(generator)
    full, rest = divmod(n, group_size)
    out = torch.empty(n, dtype=torch.int64, device=device)
    order = _randperm(full, generator).to(device)
    slot = int(torch.randint(0, full + 1, (1,), generator=generator, device=_gen_device(generator))) if rest else full
    start = slot * group_size
    if rest:
        out[start : start + rest] = _randperm(rest, generator).to(device) + full * group_size
    if full:
        k = min(variants, full)
        table = torch.stack([_randperm(group_size, generator) for _ in range(k)]).to(device)
        pick = torch.randint(0, k, (full,), generator=generator, device=_gen_device(generator)).to(device)
        _fill_groups(out[:start], order[:slot], pick[:slot], table)
        _fill_groups(out[start + rest :], order[slot:], pick[slot:], table)
    return out


def _fill_groups(out: torch.Tensor, groups: torch.Tensor, pick: torch.Tensor, table: torch.Tensor) -> None:
    """Write group g's indices, reordered by inner shuffle table[pick], into each row of `out`."""
    if groups.numel() == 0:
        return
    group_size = table.shape[1]
    rows = out.view(groups.numel(), group_size)
    torch.index_select(table, 0, pick, out=rows)
    rows += (groups * group_size).unsqueeze(1)


def epoch_generator(seed: int, epoch: int, device: torch.device | str = "cpu") -> torch.Generator:
    """Return a generator whose state depends only on (seed, epoch), on `device`."""
    return torch.Generator(device=device).manual_seed(mix(seed, epoch))


def mix(seed: int, epoch: int) -> int:
    """Return a 63-bit seed that depends on both `seed` and `epoch` (splitmix64 of the pair)."""
    # splitmix64 of the pair, so that (seed, epoch + 1) and (seed + 1, epoch) give unrelated orders;
    # numpy's SeedSequence does the same but costs ~0.4 ms per call, a tenth of a small epoch
    z = (seed * 0x9E3779B97F4A7C15 + epoch + 0x632BE59BD9B4E019) % 2**64
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = ((z ^ (z >> shift)) * mult) % 2**64
    return (z ^ (z >> 31)) & (2**63 - 1)


def epoch_order(
    n: int,
    shuffle: bool | str,
    seed: int,
    epoch: int,
    device: torch.device | str = "cpu",
    group_size: int | None = None,
) -> torch.Tensor:
    """Return the order of all `n` row indices for one epoch, on `device`."""
    device = torch.device(device)
    dtype = torch.int32 if n < 2**31 else torch.int64  # half the memory: the shuffle runs in cache longer
    with one_thread(device):
        if shuffle is False:
            return torch.arange(n, dtype=dtype, device=device)
        if shuffle == "grouped":
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
    serial = torch.device(device).type == "cpu"
    with torch_threads(1 if serial else None):  # the one thread-count guard: it restores the count
        yield


def shard_size(n: int, world_size: int, drop_last: bool) -> int:
    """Return the indices per rank: DistributedSampler drops (drop_last) or pads the uneven tail."""
    return n // world_size if drop_last and n % world_size else math.ceil(n / world_size)


def shard(order: torch.Tensor, rank: int, world_size: int, drop_last: bool) -> torch.Tensor:
    """Return rank's share of `order`, padded by repeating from the start or truncated, like DistributedSampler."""
    if world_size == 1:
        return order
    total = shard_size(len(order), world_size, drop_last) * world_size
    if total > len(order):
        repeats = math.ceil(total / len(order))
        order = order.repeat(repeats)
    return order[rank:total:world_size]


def check_sampling(batch_size: int, shuffle: bool | str, rank: int, world_size: int, group_size: int | None) -> None:
    """Raise a ValueError naming the bad sampling option, if any."""
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


class EpochOrder:
    """One rank's index order per epoch, with DataLoader's and DistributedSampler's rules; loaders hold one.

    The order of epoch ``e`` depends only on (seed, e); `next_epoch` hands out the current epoch's indices and
    moves on, `set_epoch` chooses the epoch (as with DistributedSampler). `shuffle` is False, True or "grouped"
    (`grouped_permutation`, `group_size` indices per group); the order is made on `device`.
    Explained in notebooks/03_custom_loader.ipynb.
    """

    def __init__(
        self,
        num_rows: int,
        batch_size: int,
        shuffle: bool | str = False,
        drop_last: bool = False,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        group_size: int | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        check_sampling(batch_size, shuffle, rank, world_size, group_size)
        self.num_rows, self.batch_size, self.shuffle, self.drop_last = num_rows, batch_size, shuffle, drop_last
        self.seed, self.rank, self.world_size, self.group_size = int(seed), rank, world_size, group_size
        self.device, self.epoch = torch.device(device), 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration uses."""
        self.epoch = int(epoch)

    def num_samples(self) -> int:
        """Return how many indices this rank gets per epoch (DistributedSampler's rule)."""
        return shard_size(self.num_rows, self.world_size, self.drop_last)

    def __len__(self) -> int:
        """Return the batches per epoch: the last short one counts unless `drop_last`."""
        n = self.num_samples()
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def indices(self, epoch: int | None = None) -> torch.Tensor:
        """Return this rank's index order for `epoch` (default: the current one), before batching."""
        epoch = self.epoch if epoch is None else epoch
        order = epoch_order(self.num_rows, self.shuffle, self.seed, epoch, self.device, self.group_size)
        return shard(order, self.rank, self.world_size, self.drop_last)

    def next_epoch(self) -> tuple[int, torch.Tensor]:
        """Return (the current epoch, the indices its batches use: no short tail with drop_last); move to the next."""
        epoch, order = self.epoch, self.indices()
        self.epoch += 1
        return epoch, order[: len(self) * self.batch_size]

    def __repr__(self) -> str:
        return (
            f"EpochOrder(rows={self.num_rows}, batch_size={self.batch_size}, shuffle={self.shuffle!r}, "
            f"drop_last={self.drop_last}, rank={self.rank}, world_size={self.world_size}, epoch={self.epoch})"
        )


class Sampled:
    """What a loader that holds an `EpochOrder` as `self.sampler` answers about its sampling, read from it."""

    sampler: EpochOrder

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration uses."""
        self.sampler.set_epoch(epoch)

    def num_samples(self) -> int:
        """Return how many indices this rank gets per epoch (DistributedSampler's rule)."""
        return self.sampler.num_samples()

    def __len__(self) -> int:
        return len(self.sampler)

    def indices(self, epoch: int | None = None) -> torch.Tensor:
        """Return this rank's index order for `epoch` (default: the current one), before batching."""
        return self.sampler.indices(epoch)

    @property
    def epoch(self) -> int:
        """The epoch whose order the next iteration uses."""
        return self.sampler.epoch

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    batch_size = property(lambda self: self.sampler.batch_size, doc="Indices per batch.")
    shuffle = property(lambda self: self.sampler.shuffle, doc="False, True or 'grouped'.")
    drop_last = property(lambda self: self.sampler.drop_last, doc="Whether the short last batch is dropped.")
    seed = property(lambda self: self.sampler.seed, doc="The seed of every epoch's order.")
    rank = property(lambda self: self.sampler.rank, doc="This process's shard.")
    world_size = property(lambda self: self.sampler.world_size, doc="How many shards.")
    group_size = property(lambda self: self.sampler.group_size, doc="Indices per group with shuffle='grouped'.")
