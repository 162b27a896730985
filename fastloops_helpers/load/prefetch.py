"""Prefetchers: copy the next batch to the GPU on a side stream, or load it ahead on a background thread.

Explained in notebooks/07_dataloader_anatomy.ipynb.
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ..tree import tensors
from .move import PinnedRing, move_to

_END = object()


def _close(iterator: Any) -> None:
    """Close a generator-like iterator, so its `finally` blocks (and a loader's worker shutdown) run now."""
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


def one_ahead(source: Iterable[Any], stage: Callable[[Any], Any], ready: Callable[[Any], Any]) -> Iterator[Any]:
    """Yield `ready(stage(b))` for each batch b, staging batch i+1 before batch i is handed out.

    Keeps order; an exception from `source` is raised after the batches before it were yielded;
    closing the generator (or abandoning it) closes `source`.
    """
    it = iter(source)
    pending: Any = _END
    try:
        while True:
            error: BaseException | None = None
            try:
                staged = stage(next(it))
            except StopIteration:
                staged = _END
            except Exception as exc:  # re-raised below, after the batch already staged
                staged, error = _END, exc
            if pending is not _END:
                yield ready(pending)
            if error is not None:
                raise error
            if staged is _END:
                return
            pending = staged
    finally:
        _close(it)


class CUDAPrefetcher:
    """Iterate over `loader`, copying batch i+1 to the GPU on a side stream while batch i is in use.

    Parameters
    ----------
    loader : any iterable of batches (tensors, or dicts/lists/tuples/TensorDicts of them).
    device : the CUDA device to copy to; default `cuda` when available. On a machine without a GPU (or
        with a CPU device) the prefetcher passes batches through unchanged and warns once.
    pin : stage each batch's CPU tensors through reused page-locked buffers (`move.PinnedRing`, two slots;
        pass False when DataLoader(pin_memory=True) pinned them already): a copy from pageable memory cannot
        overlap with compute.

    Each copy runs under `torch.cuda.stream(side)` with `non_blocking=True` via `move.move_to`; before a
    batch is handed out the compute stream waits on the side stream, and every tensor calls
    `record_stream(compute)` so the caching allocator does not reuse its memory while kernels still read it.
    Order is kept, the loader's exceptions propagate after the batches before them, and breaking out of the
    loop closes the loader's iterator. Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    warned = False  # class-wide: say once per process that there is nothing to prefetch to

    def __init__(self, loader: Iterable[Any], device: torch.device | str | None = None, pin: bool = True) -> None:
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.loader, self.device, self.pin = loader, torch.device(device), pin

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self.device.type != "cuda" or not torch.cuda.is_available():
            self._warn_once()
            return self._passthrough()
        side, ring = torch.cuda.Stream(self.device), PinnedRing(self.device) if self.pin else None
        return one_ahead(self.loader, lambda b: self._stage(b, side, ring), lambda b: self._ready(b, side))

    def _passthrough(self) -> Iterator[Any]:
        it = iter(self.loader)
        try:
            yield from it
        finally:
            _close(it)

    def _warn_once(self) -> None:
        if not CUDAPrefetcher.warned:
            CUDAPrefetcher.warned = True
            warnings.warn(
                f"CUDAPrefetcher: no CUDA device (device={self.device}), passing batches through unchanged",
                stacklevel=3,
            )

    def _stage(self, batch: Any, side: torch.cuda.Stream, ring: PinnedRing | None) -> Any:
        with torch.cuda.stream(side):  # the ring's copy and its event go on the side stream
            return ring(batch) if ring else move_to(batch, self.device, non_blocking=True)

    def _ready(self, batch: Any, side: torch.cuda.Stream) -> Any:
        compute = torch.cuda.current_stream(self.device)
        compute.wait_stream(side)
        for t in tensors(batch):
            t.record_stream(compute)
        return batch


class ThreadPrefetcher:
    """Iterate over `loader` from a background thread that keeps up to `depth` batches ready.

    Parameters
    ----------
    loader : any iterable of batches.
    depth : how many batches may wait in the queue; more hides bursts of slow batches, costs memory.

    Work that releases the GIL (JPEG decoding, file reads, most torch ops) overlaps with the consumer.
    Order is kept, exceptions from the loader are raised in the consumer after the batches before them,
    and abandoning the loop (break, or garbage collection) stops the thread and closes the loader's
    iterator. Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    def __init__(self, loader: Iterable[Any], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.loader, self.depth = loader, depth

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        slots: queue.Queue = queue.Queue(self.depth)
        stop = threading.Event()
        thread = threading.Thread(target=self._produce, args=(slots, stop), daemon=True, name="ThreadPrefetcher")
        thread.start()
        return self._consume(slots, stop, thread)

    def _produce(self, slots: queue.Queue, stop: threading.Event) -> None:
        it = iter(self.loader)
        try:
            for batch in it:
                if not self._put(slots, stop, (batch, None)):
                    return
            self._put(slots, stop, (_END, None))
        except Exception as exc:  # handed to the consumer, which re-raises it in its own thread
            self._put(slots, stop, (_END, exc))
        finally:
            _close(it)  # in this thread: a generator cannot be closed from another while it runs

    @staticmethod
    def _put(slots: queue.Queue, stop: threading.Event, item: tuple[Any, Any]) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    @staticmethod
    def _consume(slots: queue.Queue, stop: threading.Event, thread: threading.Thread) -> Iterator[Any]:
        try:
            while True:
                batch, error = slots.get()
                if error is not None:
                    raise error
                if batch is _END:
                    return
                yield batch
        finally:
            stop.set()
            thread.join()
