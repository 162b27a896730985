"""PinnedRing on a simulated CUDA device: CPU tensors stand in for page-locked buffers and device copies."""

from __future__ import annotations

import pytest
import torch

from fastloops_helpers import BatchLoader
from fastloops_helpers.load import move
from fastloops_helpers.tree import map_leaves


class FakeCuda:
    """Records what the ring asks of CUDA: page-locked buffers made, events recorded, and events waited for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.buffers: list[torch.Tensor] = []
        self.log: list[tuple[str, int]] = []
        monkeypatch.setattr(move, "pinned", self.pinned)
        monkeypatch.setattr(move, "recorded", self.recorded)
        # the device copy: a new tensor, so a buffer refilled later cannot change a batch already handed out
        monkeypatch.setattr(move, "move_to", lambda b, device, non_blocking=False: map_leaves(self.copy, b))

    def pinned(self, like: torch.Tensor) -> torch.Tensor:
        self.buffers.append(torch.empty_like(like))
        return self.buffers[-1]

    @staticmethod
    def copy(leaf):
        return leaf.clone() if isinstance(leaf, torch.Tensor) else leaf

    def recorded(self, device: torch.device) -> object:
        number = sum(kind == "record" for kind, _ in self.log)
        self.log.append(("record", number))
        log = self.log

        class Event:
            def synchronize(self) -> None:
                log.append(("wait", number))

        return Event()


def test_a_sharded_seeded_epoch_through_the_ring_is_the_loaders_own(monkeypatch):
    cuda = FakeCuda(monkeypatch)
    data = (torch.arange(40).reshape(20, 2), torch.arange(20))
    seen = []
    for rank in (0, 1):
        loader = BatchLoader(data, batch_size=3, shuffle=True, seed=7, rank=rank, world_size=2)
        ring = move.PinnedRing("cuda", slots=2)
        kept = [ring(batch) for batch in loader]  # every batch kept while the ring refills its two slots
        loader.set_epoch(0)
        assert all(torch.equal(a, b) for got, want in zip(kept, loader) for a, b in zip(got, want))
        seen += [int(i) for _, y in kept for i in y]
    assert sorted(seen) == list(range(20))  # each sample once in the epoch, across the two shards
    # buffers made once per slot and leaf, again only for the shorter last batch (10 rows: 3, 3, 3, 1)
    assert len(cuda.buffers) == 2 * 2 * 2 + 2 * 2


def test_a_slot_is_refilled_only_after_the_copy_that_read_it(monkeypatch):
    cuda = FakeCuda(monkeypatch)
    ring = move.PinnedRing(torch.device("cuda"), slots=2)
    for i in range(4):
        ring(torch.full((2, 2), i))
    # batch 2 reuses slot 0: the host waits for the copy of batch 0 (event 0) alone, never for the latest one
    assert cuda.log == [("record", 0), ("record", 1), ("wait", 0), ("record", 2), ("wait", 1), ("record", 3)]
    assert len(cuda.buffers) == 2


def test_off_cuda_a_ring_moves_as_move_to_and_needs_a_slot():
    x = torch.arange(4)
    assert move.PinnedRing("cpu")(x) is x  # nothing to stage on the host
    assert move.PinnedRing("meta")(x).device.type == "meta"
    with pytest.raises(ValueError, match="at least one slot"):
        move.PinnedRing("cuda", slots=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_each_batch_kept_equals_its_source_while_the_ring_refills_behind_queued_work():
    ring = move.PinnedRing("cuda", slots=2)
    sources = [torch.full((512, 512), float(i)) for i in range(8)]
    kept = []
    for x in sources:
        kept.append(ring(x))
        torch.cuda._sleep(2_000_000)  # a queued step: the next copy waits behind it on the stream, the host does not
    assert all(k.is_cuda and torch.equal(k.cpu(), x) for k, x in zip(kept, sources))
