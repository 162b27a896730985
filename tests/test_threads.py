"""ThreadLoader: order, sharding, seeded augmentation, errors naming the sample, clean shutdown."""

import gc
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastloops_helpers import ThreadLoader
from fastloops_helpers.load.batch_loader import BatchLoader


class Rows:
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError("broken image")
        return torch.tensor(i)


class Augmented(Rows):
    def __getitem__(self, i, generator=None):
        return torch.tensor(i) * 1000 + torch.randint(0, 1000, (), generator=generator)


def loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ThreadLoader")]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 40),
    batch_size=st.integers(1, 9),
    threads=st.integers(1, 4),
    drop_last=st.booleans(),
    world_size=st.integers(1, 3),
    shuffle=st.booleans(),
    prefetch=st.integers(1, 3),
)
def test_same_batches_as_batchloader(n, batch_size, threads, drop_last, world_size, shuffle, prefetch):
    ranks = []
    for rank in range(world_size):
        kw = dict(shuffle=shuffle, seed=3, drop_last=drop_last, rank=rank, world_size=world_size)
        tl = ThreadLoader(Rows(n), batch_size, threads=threads, prefetch=prefetch, **kw)
        ref = BatchLoader(torch.arange(n), batch_size, **kw)
        got = [b.tolist() for b in tl]
        assert got == [b.tolist() for b in ref]
        assert len(got) == len(tl)
        ranks.append([i for b in got for i in b])
    if world_size == 1 and not drop_last:
        assert sorted(ranks[0]) == list(range(n))  # every sample exactly once


def test_epochs_differ_and_set_epoch_replays():
    tl = ThreadLoader(Rows(30), 5, threads=3, shuffle=True, seed=1)
    first, second = [b.tolist() for b in tl], [b.tolist() for b in tl]
    assert first != second
    tl.set_epoch(0)
    assert [b.tolist() for b in tl] == first


def test_seeded_augmentation_matches_one_thread():
    one = [b.tolist() for b in ThreadLoader(Augmented(50), 7, threads=1, shuffle=True, seed=5)]
    many = [b.tolist() for b in ThreadLoader(Augmented(50), 7, threads=4, shuffle=True, seed=5)]
    assert one == many
    draws = [v % 1000 for b in one for v in b]
    assert len(set(draws)) > 30  # the samples' generators are independent, not one shared seed


def test_error_names_the_sample():
    with pytest.raises(RuntimeError, match="sample 13 failed: ValueError: broken image"):
        for _ in ThreadLoader(Rows(40, fail_at=13), 4, threads=3):
            pass
    gc.collect()
    assert loader_threads() == []


def test_no_thread_left_after_break_and_close():
    tl = ThreadLoader(Rows(1000), 4, threads=4)
    for _ in tl:
        assert loader_threads()
        break
    assert loader_threads() == []
    it = iter(tl)
    next(it)
    tl.close()
    assert loader_threads() == []
    it = iter(tl)
    next(it)
    del it, tl
    gc.collect()
    assert loader_threads() == []


def test_default_prefetch_keeps_every_thread_busy_with_two_batches_at_least():
    assert ThreadLoader(range(100), 32, threads=4).prefetch == 2  # 64 samples queued for 4 threads
    assert ThreadLoader(range(100), 1, threads=4).prefetch == 8  # one-sample batches: 2 per thread
    assert ThreadLoader(range(100), 3, threads=4).prefetch == 3
