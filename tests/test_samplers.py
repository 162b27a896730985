import numpy as np
import pytest
import torch

from fastloops_helpers.load.order import EpochOrder, grouped_permutation
from fastloops_helpers.teach.quasi_random import batch_class_entropy

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("n,group_size", [(0, 4), (1, 4), (7, 1), (16, 4), (17, 4), (23, 5), (3, 10), (1000, 64)])
def test_grouped_permutation_is_a_true_int64_permutation_for_any_n(n, group_size):
    perm = grouped_permutation(n, group_size, torch.Generator().manual_seed(0))
    assert perm.dtype == torch.int64 and perm.shape == (n,)
    assert torch.equal(perm.sort().values, torch.arange(n))


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_permutation_lands_on_the_requested_device(device):
    perm = grouped_permutation(101, 8, torch.Generator().manual_seed(1), device=device)
    assert perm.device.type == device
    assert torch.equal(perm.cpu().sort().values, torch.arange(101))


def test_grouped_permutation_is_reproducible_with_a_seed_and_varies_without():
    a = grouped_permutation(1000, 10, torch.Generator().manual_seed(5))
    b = grouped_permutation(1000, 10, torch.Generator().manual_seed(5))
    c = grouped_permutation(1000, 10, torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.equal(grouped_permutation(1000, 10), grouped_permutation(1000, 10))


def test_grouped_permutation_keeps_each_full_group_contiguous_and_shuffled():
    n, g = 1000, 10
    perm = grouped_permutation(n, g, torch.Generator().manual_seed(2))
    blocks = perm.view(-1, g)
    assert (blocks // g == (blocks[:, :1] // g)).all()  # one group per block
    assert not torch.equal(blocks // g, torch.arange(n // g).unsqueeze(1).expand(-1, g))  # group order shuffled
    assert (blocks % g != torch.arange(g)).any(dim=1).float().mean() > 0.9  # items inside shuffled


def test_grouped_permutation_uses_several_inner_orders():
    perm = grouped_permutation(64 * 100, 64, torch.Generator().manual_seed(3), variants=4)
    inner = {tuple((row % 64).tolist()) for row in perm.view(-1, 64)}
    assert len(inner) == 4
    one = grouped_permutation(64 * 100, 64, torch.Generator().manual_seed(3), variants=1)
    assert len({tuple((row % 64).tolist()) for row in one.view(-1, 64)}) == 1


def test_grouped_permutation_partial_group_moves_around():
    slots = {
        int((grouped_permutation(25, 10, torch.Generator().manual_seed(s)) >= 20).nonzero()[0]) // 10 for s in range(30)
    }
    assert slots == {0, 1, 2}


@pytest.mark.parametrize("bad", [dict(n=-1, group_size=4), dict(n=4, group_size=0)])
def test_grouped_permutation_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="must be >="):
        grouped_permutation(**bad)


def test_batch_class_entropy_is_zero_for_sorted_and_near_max_for_shuffled():
    labels = np.repeat(np.arange(4), 250)
    assert batch_class_entropy(labels, np.arange(1000), 50) == 0.0
    shuffled = batch_class_entropy(labels, np.random.default_rng(0).permutation(1000), 50)
    assert 1.8 < shuffled <= 2.0
    assert batch_class_entropy(labels, np.array([0, 250, 500, 750]), 4) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="fewer than one batch"):
        batch_class_entropy(labels, np.arange(3), 4)


def test_epoch_order_hands_out_each_epoch_once_and_trims_the_short_tail():
    order = EpochOrder(10, 4, shuffle=True, drop_last=True, seed=7)
    assert len(order) == 2 and order.num_samples() == 10
    epoch, first = order.next_epoch()
    assert epoch == 0 and order.epoch == 1 and len(first) == 8
    assert torch.equal(first, order.indices(0)[:8])
    order.set_epoch(0)
    assert torch.equal(order.next_epoch()[1], first)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        EpochOrder(10, 0)


def test_both_loaders_hold_one_epoch_order_and_answer_from_it():
    from fastloops_helpers import ThreadLoader
    from fastloops_helpers.load.batch_loader import BatchLoader

    kw = dict(shuffle=True, seed=3, drop_last=True, rank=1, world_size=2)
    batch, thread = BatchLoader(torch.arange(21), 4, **kw), ThreadLoader(range(21), 4, threads=1, **kw)
    for loader in (batch, thread):
        assert isinstance(loader.sampler, EpochOrder) and loader.batch_size == 4 and loader.rank == 1
        loader.epoch = 5
        assert loader.sampler.epoch == 5 and len(loader) == len(loader.sampler) == 2
    assert torch.equal(batch.indices(), thread.indices())
