"""A thread loader: BatchLoader's sampling (one `EpochOrder`), the per-sample work on a thread pool of this process.

Explained in notebooks/14_threads_or_processes.ipynb.
"""

from __future__ import annotations

import inspect
import math
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
from torch.utils.data import default_collate

from .order import EpochOrder, Sampled, mix


def sample_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """Return a CPU generator whose state depends only on (seed, epoch, index)."""
    return torch.Generator().manual_seed(mix(mix(seed, epoch), index))


class ThreadLoader(Sampled):
    """Load batches by running the dataset's ``__getitem__`` on a pool of threads in this process.

    Parameters
    ----------
    dataset
        A map-style dataset (``len`` and ``__getitem__``), e.g. an ImageFolder whose transform decodes, resizes
        and crops. If its ``__getitem__`` accepts a ``generator`` keyword, each call gets a ``torch.Generator``
        seeded from (seed, epoch, index) (see ``sample_generator``): augmentations drawn from it are
        reproducible and independent of the thread count and of which thread runs the sample. Never let
        such a dataset draw from the global RNG, which all threads share.
    batch_size
        Samples per batch.
    threads
        Worker threads. Decoders that release the GIL (Pillow, simplejpeg, PyTurboJPEG) run in parallel.
    shuffle
        False (in order), True (a permutation per epoch that depends only on (seed, epoch)) or "grouped".
    seed
        The seed of the epoch orders and of the per-sample generators (default 0).
    drop_last
        Drop the last incomplete batch, and shard like DistributedSampler with drop_last.
    rank, world_size
        This process's shard: every ``world_size``-th index of the epoch's order, starting at ``rank``.
    collate
        Turns a list of samples into a batch (default: torch's ``default_collate``).
    prefetch
        At most this many batches in flight (submitted, not yet yielded). The default is the fewest that keep
        twice ``threads`` samples queued, and at least 2: every thread stays busy, and finished samples waiting
        for their batch cost no more memory than that.

    Batches come out in order. An exception in a worker is raised in the main thread as a ``RuntimeError``
    naming the sample index. Leaving the loop (``break``), ``close()`` or garbage collection cancels the
    queued samples and joins the threads. Each iteration moves to the next epoch; ``set_epoch(e)`` chooses it.
    The sampling is ``BatchLoader``'s: both hold an ``order.EpochOrder`` as ``sampler``.
    Explained in notebooks/14_threads_or_processes.ipynb.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        *,
        threads: int = 4,
        shuffle: bool | str = False,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
        collate: Callable[[list[Any]], Any] = default_collate,
        prefetch: int | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got threads={threads}")
        self.sampler = EpochOrder(len(dataset), batch_size, shuffle, drop_last, seed, rank, world_size)
        self.dataset, self.threads, self.collate = dataset, threads, collate
        self.prefetch = max(2, math.ceil(2 * threads / batch_size)) if prefetch is None else prefetch
        if self.prefetch < 1:
            raise ValueError(f"prefetch must be >= 1 batch, got {self.prefetch}")
        self._takes_generator = _takes_generator(dataset)
        self._live: weakref.WeakSet[Any] = weakref.WeakSet()

    def __iter__(self) -> Iterator[Any]:
        epoch, order = self.sampler.next_epoch()
        it = self._run(epoch, order.tolist())
        self._live.add(it)
        return it

    def close(self) -> None:
        """Stop every running iteration of this loader and join its threads."""
        for it in list(self._live):
            it.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _load(self, epoch: int, index: int) -> Any:
        try:
            if self._takes_generator:
                return self.dataset.__getitem__(index, generator=sample_generator(self.seed, epoch, index))
            return self.dataset[index]
        except Exception as e:
            raise RuntimeError(f"ThreadLoader: sample {index} failed: {type(e).__name__}: {e}") from e

    def _run(self, epoch: int, order: list[int]) -> Iterator[Any]:
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ThreadLoader")
        pending: deque[list[Future]] = deque()
        starts = iter(range(0, len(order), self.batch_size))
        try:
            while True:
                # keep `prefetch` batches in flight: one future per sample, any free thread runs it
                while len(pending) < self.prefetch and (start := next(starts, None)) is not None:
                    chunk = order[start : start + self.batch_size]
                    pending.append([pool.submit(self._load, epoch, i) for i in chunk])
                if not pending:
                    return
                # wait for the oldest batch's samples (in order), collate them here, in the main thread
                yield self.collate([f.result() for f in pending.popleft()])
        finally:  # a break, close() or an error: drop the queued samples, join the threads
            for futures in pending:
                for f in futures:
                    f.cancel()
            pool.shutdown(wait=True, cancel_futures=True)

    def __repr__(self) -> str:
        return (
            f"ThreadLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, threads={self.threads}, "
            f"shuffle={self.shuffle}, batches={len(self)})"
        )


def _takes_generator(dataset: Any) -> bool:
    try:
        return "generator" in inspect.signature(dataset.__getitem__).parameters
    except (TypeError, ValueError):
        return False
