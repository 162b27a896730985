"""Seed 002's "prefetching implementation #2": sacrifice one loader process into a prefetcher process.

A child process iterates the loader and stages each batch in shared memory; the training process only maps
it. On a GPU machine the staging memory is a ring of slots allocated once and page-locked once
(`cudaHostRegister`), so every batch reaches the GPU by DMA without a pinning copy in the training process.
Explained in notebooks/07_dataloader_anatomy.ipynb.
"""

from __future__ import annotations

import gc
import pickle
import queue
import traceback
import warnings
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.multiprocessing as mp
from torch.utils._pytree import tree_flatten, tree_unflatten

_POLL_S = 0.1  # how often a blocked side checks that the other is still there


class ProcessPrefetcher:
    """Iterate over `loader` from a child process that stages batches in shared memory.

    Parameters
    ----------
    loader : any iterable of batches that the child process can use: inherited under `fork` (the Linux
        default before Python 3.14), pickled under `spawn`/`forkserver` (then define its classes in a module).
    depth : how many batches may be staged ahead; more hides slow batches, costs shared (and pinned) memory.
    device : where batches go; default `cuda` when available, else they stay on the CPU.
    slots : stage batches in a ring of `depth` reusable shared-memory slots (default: on a CUDA device,
        where the slots are page-locked once). Without slots, each batch travels as torch's multiprocessing
        sends tensors (moved to shared memory in the child, mapped without a copy here), as DataLoader workers do.
        A batch whose shapes do not fit the slots (a larger or differently shaped one) travels that way too.
    start_method : `fork`, `spawn` or `forkserver`; default: `forkserver` once this process has initialised CUDA
        (a forked child inherits CUDA state it cannot use: freeing an inherited CUDA tensor there aborts it),
        else the platform's. Under `spawn`/`forkserver` the loader must pickle.

    Order is kept. An exception raised by the loader is raised here, with its type and message, after the
    batches before it, and a note saying where it came from; a child that dies without a word raises a
    RuntimeError with its exit code. Finishing the loop, leaving it (`break`, garbage collection) and
    `close()` each stop and join the child process. With slots on the CPU, each batch is copied out of
    its slot so that you own it (the slot is reused). Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        depth: int = 3,
        device: torch.device | str | None = None,
        slots: bool | None = None,
        start_method: str | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        if device is None and torch.cuda.is_available():
            device = "cuda"
        self.loader, self.depth = loader, depth
        self.device = torch.device(device) if device is not None else None
        self.cuda = self.device is not None and self.device.type == "cuda"
        self.slots = self.cuda if slots is None else slots
        self.start_method = start_method
        self._current: weakref.ref | None = None

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        self.close()  # one child at a time
        batches = self._iterate()
        self._current = weakref.ref(batches)
        return batches

    def close(self) -> None:
        """Stop and join the child process of the current iteration, if one is running."""
        batches = self._current() if self._current is not None else None
        if batches is not None:
            batches.close()

    def _iterate(self) -> Iterator[Any]:
        """Start the child, yield what it sends, and stop and join it however the loop ends."""
        method = start_method_for(self.start_method)
        ctx = mp.get_context(method)
        ready, free, stop = ctx.Queue(maxsize=self.depth + 1), ctx.Queue(), ctx.Event()
        # not a daemon: a daemon may not start processes, and the loader may have workers of its own
        # (typeshed types get_context(str) as BaseContext, which lacks Process; every real context has it)
        child = ctx.Process(  # type: ignore[attr-defined]
            target=_produce,
            args=(self.loader, ready, free, stop, self.depth, self.slots),
            name="ProcessPrefetcher",
            daemon=False,
        )
        _start(child, method)
        for slot in range(self.depth):  # after the fork: the queue's feeder thread must not be copied into the child
            free.put(slot)
        stager = _Stager(self.device) if self.cuda else None  # type: ignore[arg-type]  # cuda: a device is set
        try:
            yield from self._receive_batches(ready, free, child, stager)
        finally:
            _shutdown(child, ready, stop)
            free.close()  # its feeder thread must not outlive the epoch: the next fork would copy it mid-work
            free.join_thread()
            if stager is not None:
                stager.unregister()

    def _receive_batches(self, ready: Any, free: Any, child: Any, stager: _Stager | None) -> Iterator[Any]:
        """Yield each batch the child announces, in order; hand its slot back once the batch is out of it."""
        slots: list[list[torch.Tensor]] = []
        count = 0
        while True:
            message = _receive(ready, child)
            kind = message[0]
            if kind == "end":
                return
            if kind == "error":
                raise _rebuilt(message[1], message[2], count)
            if kind == "slots":  # the ring of shared buffers, sent once, before the first slotted batch
                slots = message[1]
                if stager is not None:
                    stager.register(slots)
                continue
            if kind == "batch":  # a batch that does not fit the slots travels as torch's shared tensors
                batch = message[1] if stager is None else stager.copy(message[1])
            else:
                batch = self._from_slot(slots, message, stager)
                free.put(message[1])
            yield batch
            count += 1

    def _from_slot(self, slots: list[list[torch.Tensor]], message: tuple, stager: _Stager | None) -> Any:
        _, slot, sizes, positions, leaves, spec = message
        views = [buf if n is None else buf[:n] for buf, n in zip(slots[slot], sizes)]
        moved = stager.copy(views) if stager is not None else [v.clone() for v in views]
        for position, tensor in zip(positions, moved):
            leaves[position] = tensor
        return tree_unflatten(leaves, spec)


def start_method_for(requested: str | None) -> str | None:
    """Return the start method to use: `requested`; else `forkserver` once CUDA is initialised; else the default.

    A forked child inherits the parent's CUDA tensors but cannot use CUDA: when its garbage collector (or any
    release) frees one, the CUDA caching allocator aborts the child. A forkserver child starts from a fresh
    process that never touched CUDA. None means the platform's default. Explained in
    notebooks/07_dataloader_anatomy.ipynb.
    """
    if requested is not None:
        return requested
    if not torch.cuda.is_initialized():
        return None
    if "forkserver" not in mp.get_all_start_methods():
        return "spawn"
    # the server imports these once; each child forked from it then starts without importing torch again
    mp.get_context("forkserver").set_forkserver_preload(["__main__", "torch", __name__])
    return "forkserver"


def _start(child: Any, method: str | None) -> None:
    """Start `child` after a full collection, with the survivors frozen for its duration.

    Under fork the child inherits every object: collecting first runs the parent's garbage here, and freezing
    keeps the child's collector off what it inherited (a CUDA tensor freed there aborts it).
    """
    gc.collect()
    already_frozen = gc.get_freeze_count() > 0  # the caller froze objects on purpose: leave them frozen
    gc.freeze()
    try:
        child.start()
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise TypeError(
            f"ProcessPrefetcher could not send the loader to its process (start method {method or 'default'}): "
            f"{exc}. Under spawn or forkserver (the default once this process has initialised CUDA) the loader "
            "must pickle: define its dataset, sampler and collate classes in a module, not in a notebook cell "
            "or a function, and pass no generator or lambda; or pass start_method='fork' if the loader never "
            "touches CUDA."
        ) from exc
    finally:
        if not already_frozen:
            gc.unfreeze()


class _Stager:
    """Page-lock the slots once; copy each batch from them to the GPU on a side stream."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.side = device, torch.cuda.Stream(device)
        self.registered: list[int] = []

    def register(self, slots: list[list[torch.Tensor]]) -> None:
        cudart = torch.cuda.cudart()
        for buf in (b for slot in slots for b in slot):
            if int(cudart.cudaHostRegister(buf.data_ptr(), buf.untyped_storage().nbytes(), 0)) == 0:
                self.registered.append(buf.data_ptr())

    def unregister(self) -> None:
        cudart = torch.cuda.cudart()
        for pointer in self.registered:
            cudart.cudaHostUnregister(pointer)
        self.registered.clear()

    def copy(self, batch: Any) -> Any:
        """Return `batch` on the GPU; the host memory may be reused as soon as this returns."""
        from .move import move_to

        with torch.cuda.stream(self.side):
            moved = move_to(batch, self.device, non_blocking=True)
        self.side.synchronize()  # the slot goes back to the child next: the DMA must have read it
        compute = torch.cuda.current_stream(self.device)
        compute.wait_stream(self.side)
        for t in (leaf for leaf in tree_flatten(moved)[0] if isinstance(leaf, torch.Tensor)):
            t.record_stream(compute)
        return moved


def _produce(loader: Iterable[Any], ready: Any, free: Any, stop: Any, depth: int, use_slots: bool) -> None:
    """Run in the child: iterate `loader`, stage each batch, send what the parent needs to find it."""
    # as DataLoader's workers do: an OpenMP pool the parent started does not survive a fork, and a parallel
    # copy in the child would wait for its threads forever
    torch.set_num_threads(1)
    slots: list[list[torch.Tensor]] | None = None
    try:
        for batch in loader:
            if stop.is_set():
                break
            leaves, spec = tree_flatten(batch)
            positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
            tensors = [leaves[i] for i in positions]
            if use_slots and slots is None and tensors:
                slots = [[torch.empty_like(t).share_memory_() for t in tensors] for _ in range(depth)]
                _send(ready, stop, ("slots", slots))
            if slots is None or not _fits(slots[0], tensors):
                _send(ready, stop, ("batch", batch))
                continue
            slot = _take(free, stop)
            if slot is None:
                break
            sizes = [_fill(buf, t) for buf, t in zip(slots[slot], tensors)]
            for i in positions:
                leaves[i] = None
            _send(ready, stop, ("slot", slot, sizes, positions, leaves, spec))
        _send(ready, stop, ("end",))
    except Exception as exc:  # the parent re-raises it; keep the type and message even if it does not pickle
        _send(ready, stop, ("error", _picklable(exc), traceback.format_exc()))
    _linger(stop)


def _linger(stop: Any) -> None:
    """Stay alive until the parent says stop: it fetches shared tensors' file descriptors from this process."""
    parent = mp.parent_process()
    while not stop.wait(_POLL_S):
        if parent is not None and not parent.is_alive():
            return


def _fits(bufs: list[torch.Tensor], tensors: list[torch.Tensor]) -> bool:
    return len(bufs) == len(tensors) and all(
        b.dtype == t.dtype and b.dim() == t.dim() and b.shape[1:] == t.shape[1:] and (t.dim() == 0 or len(t) <= len(b))
        for b, t in zip(bufs, tensors)
    )


def _fill(buf: torch.Tensor, t: torch.Tensor) -> int | None:
    if t.dim() == 0:
        buf.copy_(t)
        return None
    buf[: len(t)].copy_(t)
    return len(t)


def _send(ready: Any, stop: Any, message: tuple) -> None:
    while not stop.is_set():
        try:
            ready.put(message, timeout=_POLL_S)
            return
        except queue.Full:
            continue


def _take(free: Any, stop: Any) -> int | None:
    while not stop.is_set():
        try:
            return free.get(timeout=_POLL_S)
        except queue.Empty:
            continue
    return None


def _get(ready: Any, timeout: float | None) -> tuple:
    """Return the next message from `ready` (waiting up to `timeout` s; None: not at all)."""
    with warnings.catch_warnings():  # torch 2.13 warns when a pickled TreeSpec is loaded
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        return ready.get_nowait() if timeout is None else ready.get(timeout=timeout)


def _receive(ready: Any, child: Any) -> tuple:
    while True:
        try:
            return _get(ready, _POLL_S)
        except queue.Empty:
            if not child.is_alive():
                raise _died(child) from None
        except Exception as exc:  # a shared tensor's file descriptor could not be fetched: did the child die?
            child.join(1.0)
            if child.exitcode is None or child.exitcode == 0:
                raise
            raise _died(child) from exc


def _died(child: Any) -> RuntimeError:
    return RuntimeError(
        f"ProcessPrefetcher's loader process exited with code {child.exitcode} before the end "
        "of the epoch (killed? out of memory?)"
    )


def _picklable(exc: Exception) -> Exception:
    try:
        return pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _rebuilt(exc: Exception, child_traceback: str, count: int) -> Exception:
    exc.add_note(
        f"raised by the loader in ProcessPrefetcher's process after {count} batch(es); its traceback:\n"
        f"{child_traceback}"
    )
    return exc


def _shutdown(child: Any, ready: Any, stop: Any, timeout_s: float = 10.0) -> None:
    """Tell the child to stop, drain what it is still sending, join it; terminate it if it does not end."""
    stop.set()
    waited = 0.0
    while child.is_alive() and waited < timeout_s:
        try:
            while True:
                _get(ready, None)
        except (queue.Empty, OSError, EOFError):
            pass
        child.join(_POLL_S)
        waited += _POLL_S
    if child.is_alive():
        child.terminate()
        child.join()
    ready.close()
    ready.join_thread()
