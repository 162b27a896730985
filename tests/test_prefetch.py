import threading
import warnings

import pytest
import torch

from fastloops_helpers import tree
from fastloops_helpers.load import prefetch
from fastloops_helpers.load.prefetch import CUDAPrefetcher, ThreadPrefetcher, one_ahead

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class Source:
    """An iterable of numbered batches that can fail at `fail_at` and records whether it was closed."""

    def __init__(self, n, fail_at=None):
        self.n, self.fail_at, self.closed, self.produced = n, fail_at, False, 0

    def __len__(self):
        return self.n

    def __iter__(self):
        try:
            for i in range(self.n):
                if i == self.fail_at:
                    raise KeyError(f"bad batch {i}")
                self.produced += 1
                yield {"x": torch.full((2, 3), float(i)), "y": [torch.tensor([i]), (torch.tensor(i),)]}
        finally:
            self.closed = True


def ids(batches):
    return [int(b["y"][0]) for b in batches]


def both(src, depth=2):
    return [ThreadPrefetcher(src, depth=depth), CUDAPrefetcher(src, device="cpu")]


@pytest.mark.parametrize("depth", [1, 3])
def test_order_and_completeness(depth):
    for pf in both(Source(7), depth):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = list(pf)
        assert ids(got) == list(range(7))
        assert torch.equal(got[4]["x"], torch.full((2, 3), 4.0))
        assert len(pf) == 7


def test_exception_propagates_after_earlier_batches():
    for pf in both(Source(6, fail_at=3)):
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(KeyError, match="bad batch 3"):
                for b in pf:
                    seen.append(int(b["y"][0]))
        assert seen == [0, 1, 2]


def test_abandoning_mid_epoch_closes_the_source_and_stops_the_thread():
    before = threading.active_count()
    for pf in both(Source(1000), depth=2):
        src = pf.loader
        it = iter(pf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = next(it)
        assert int(first["y"][0]) == 0
        it.close()  # what `break` followed by garbage collection does
        assert src.closed
        assert src.produced <= 5  # bounded read-ahead, not the whole epoch
    assert threading.active_count() == before


def test_empty_loader_and_bad_depth():
    for pf in both(Source(0)):
        assert list(pf) == []
    with pytest.raises(ValueError, match="depth must be >= 1, got 0"):
        ThreadPrefetcher([], depth=0)


def test_cpu_prefetcher_passes_batches_through_and_warns_once():
    prefetch.CUDAPrefetcher.warned = False
    batch = {"x": torch.arange(4)}
    with pytest.warns(UserWarning, match="passing batches through unchanged"):
        out = list(CUDAPrefetcher([batch, batch], device="cpu"))
    assert out[0] is batch and out[1] is batch
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(CUDAPrefetcher([batch], device="cpu"))  # second use: silent


def test_one_ahead_stages_the_next_batch_before_handing_out_the_current():
    log = []
    gen = one_ahead(
        range(3), stage=lambda b: log.append(f"stage {b}") or b, ready=lambda b: log.append(f"ready {b}") or b
    )
    assert list(gen) == [0, 1, 2]
    assert log == ["stage 0", "stage 1", "ready 0", "stage 2", "ready 1", "ready 2"]


def test_tensors_walks_nested_structures():
    import dataclasses

    @dataclasses.dataclass
    class Pair:
        x: torch.Tensor
        note: str

    batch = {"a": torch.zeros(1), "b": [torch.ones(1), (torch.ones(2), "label", 3)], "c": Pair(torch.ones(3), "n")}
    assert [t.numel() for t in tree.tensors(batch)] == [1, 1, 2, 3]


@cuda
def test_cuda_prefetcher_equals_plain_copies():
    src = Source(5)
    got = list(CUDAPrefetcher(src, device="cuda"))
    torch.cuda.synchronize()
    assert ids([{"y": [b["y"][0].cpu()]} for b in got]) == list(range(5))
    for i, b in enumerate(got):
        assert b["x"].is_cuda and b["y"][1][0].is_cuda
        assert torch.equal(b["x"].cpu(), torch.full((2, 3), float(i)))


@cuda
def test_cuda_prefetcher_propagates_and_closes():
    src = Source(5, fail_at=2)
    with pytest.raises(KeyError):
        list(CUDAPrefetcher(src, device="cuda"))
    assert src.closed
