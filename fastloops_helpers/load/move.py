"""Move nested structures of tensors (dicts, lists, tuples, namedtuples, dataclasses, TensorDicts) to a device,
and batches to a GPU through reused page-locked buffers.

Explained in notebooks/06_device_moves.ipynb (`move_to`) and 11_ffcv_cifar.ipynb (`PinnedRing`).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from ..tree import is_tensor_collection, map_leaves

Tensor = torch.Tensor


def move_to(obj: Any, device: torch.device | str, non_blocking: bool = False) -> Any:
    """Return a copy of `obj` with every tensor moved to `device`, keeping the containers' types.

    Handles dicts (and other mappings), lists, tuples, namedtuples, dataclasses, TensorDicts and
    tensorclasses (the containers of `load.tree`); non-tensor leaves (numbers, strings, None, numpy arrays)
    are passed through unchanged. An unsupported container (a set, a deque, a generator, ...) raises a
    TypeError that names its path, e.g. `obj['pim'][1]`. Explained in notebooks/06_device_moves.ipynb.
    """
    device = torch.device(device)

    def move(leaf: Any) -> Any:
        if type(leaf) is Tensor:  # the keyword costs argument parsing on every leaf: pass it only when set
            return leaf.to(device, non_blocking=True) if non_blocking else leaf.to(device)
        moves = isinstance(leaf, Tensor) or is_tensor_collection(leaf)  # subclasses, e.g. nn.Parameter
        return leaf.to(device, non_blocking=non_blocking) if moves else leaf

    try:
        return map_leaves(move, obj)
    except TypeError as exc:
        raise TypeError(f"move_to: {exc}") from None


class PinnedRing:
    """Move each batch to a CUDA `device` through the page-locked buffers of `slots` reused slots, in turn.

    A copy from pageable memory makes the host wait for the stream's queued work (CUDA synchronises it first),
    so a loader in the loop's thread cannot prepare the next batch while the step runs; pinning every batch
    afresh (`pin_memory()`) allocates page-locked memory per batch. The ring copies a batch's CPU tensors into
    its next slot's buffers (made once per shape and dtype), queues their copy to the device with
    `non_blocking=True` on the current stream and records an event after it. Before a slot is refilled the host
    waits for that event alone: the copy that read the slot, not the step. On another device a batch is moved as
    `move_to` moves it. Explained in notebooks/11_ffcv_cifar.ipynb.
    """

    def __init__(self, device: torch.device | str, slots: int = 2) -> None:
        if slots < 1:
            raise ValueError(f"a ring needs at least one slot, got slots={slots}")
        self.device, self.turn = torch.device(device), 0
        self.slots: list[tuple[list[Tensor], Any]] = [([], None) for _ in range(slots)]

    def __call__(self, batch: Any) -> Any:
        if self.device.type != "cuda":
            return move_to(batch, self.device)
        buffers, copied = self.slots[self.turn % len(self.slots)]
        if copied is not None:
            copied.synchronize()  # the copy that last read this slot's buffers has run
        count = itertools.count()

        def stage(leaf: Any) -> Any:
            if is_tensor_collection(leaf):
                return leaf.pin_memory()  # a TensorDict pins itself, afresh
            if not isinstance(leaf, Tensor) or leaf.device.type != "cpu":
                return leaf
            i = next(count)
            if i == len(buffers) or (buffers[i].shape, buffers[i].dtype) != (leaf.shape, leaf.dtype):
                buffers[i : i + 1] = [pinned(leaf)]
            return buffers[i].copy_(leaf)

        moved = move_to(map_leaves(stage, batch), self.device, non_blocking=True)
        self.slots[self.turn % len(self.slots)] = (buffers, recorded(self.device))
        self.turn += 1
        return moved


def pinned(like: Tensor) -> Tensor:
    """Return an empty page-locked tensor of `like`'s shape and dtype."""
    return torch.empty(like.shape, dtype=like.dtype, pin_memory=True)


def recorded(device: torch.device) -> Any:
    """Return a CUDA event recorded now on `device`'s current stream: it completes when the work before it has run."""
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    return event
