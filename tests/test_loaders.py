import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict, tensorclass
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler

from fastloops_helpers.load import rows
from fastloops_helpers.load.batch_loader import BatchLoader
from fastloops_helpers.load.getitems import BatchRowDataset, RowDataset, collate_batch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
options = dict(
    n=st.integers(0, 60),
    batch_size=st.integers(1, 16),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**40),
    shuffle=st.sampled_from([False, True]),
)


def _epoch(loader):
    return [b.tolist() for b in loader]


@settings(max_examples=60, deadline=None)
@given(**options)
def test_one_epoch_yields_every_index_once_in_right_sized_batches(n, batch_size, drop_last, seed, shuffle):
    loader = BatchLoader(torch.arange(n), batch_size, shuffle=shuffle, drop_last=drop_last, seed=seed)
    batches = _epoch(loader)
    seen = [i for b in batches for i in b]
    full, rest = divmod(n, batch_size)
    assert len(batches) == len(loader) == full + (0 if drop_last or rest == 0 else 1)
    assert all(len(b) == batch_size for b in batches[:full])
    if drop_last:
        assert len(seen) == full * batch_size and len(set(seen)) == len(seen) and set(seen) <= set(range(n))
    else:
        assert sorted(seen) == list(range(n))
    if not shuffle:
        assert seen == list(range(len(seen)))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 60), batch_size=st.integers(1, 16), seed=st.integers(0, 2**40), epoch=st.integers(0, 99))
def test_same_seed_and_epoch_repeat_and_other_epochs_differ(n, batch_size, seed, epoch):
    a, b = (BatchLoader(torch.arange(n), batch_size, shuffle=True, seed=seed) for _ in range(2))
    a.set_epoch(epoch)
    b.set_epoch(epoch)
    assert _epoch(a) == _epoch(b)
    orders = {tuple(a.indices(e).tolist()) for e in range(epoch, epoch + 6)}
    assert len(orders) > 1 if n >= 4 else True  # 6 epochs of >= 24 possible orders: equal only by a bug


def test_plain_loop_moves_to_the_next_epoch_and_generator_seeds_it():
    loader = BatchLoader(torch.arange(100), 10, shuffle=True, generator=torch.Generator().manual_seed(3))
    first, second = _epoch(loader), _epoch(loader)
    assert first != second and loader.epoch == 2
    loader.set_epoch(0)
    assert _epoch(loader) == first
    again = BatchLoader(torch.arange(100), 10, shuffle=True, generator=torch.Generator().manual_seed(3))
    assert _epoch(again) == first


@settings(max_examples=60, deadline=None)
@given(world_size=st.integers(1, 5), **options)
def test_shards_match_distributed_sampler(n, batch_size, drop_last, seed, shuffle, world_size):
    if n == 0:
        return
    shards = []
    for rank in range(world_size):
        loader = BatchLoader(
            torch.arange(n),
            batch_size,
            shuffle=shuffle,
            drop_last=drop_last,
            seed=seed,
            rank=rank,
            world_size=world_size,
        )
        ref = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False, drop_last=drop_last)
        assert loader.num_samples() == ref.num_samples
        shards.append(loader.indices().tolist())
        assert len(_epoch(loader)) == len(loader)
    assert len({len(s) for s in shards}) == 1
    flat = [i for s in shards for i in s]
    if drop_last:
        assert len(set(flat)) == len(flat)  # disjoint
    else:
        assert set(flat) == set(range(n)) and len(flat) - n < world_size  # cover, pad less than one round


def test_unshuffled_shards_equal_distributed_sampler_exactly():
    for drop_last in (False, True):
        for rank in range(3):
            loader = BatchLoader(torch.arange(10), 2, rank=rank, world_size=3, drop_last=drop_last)
            ref = list(DistributedSampler(range(10), num_replicas=3, rank=rank, shuffle=False, drop_last=drop_last))
            assert loader.indices().tolist() == ref


def test_yields_what_dataloader_with_random_sampler_yields_as_sets():
    data = torch.arange(103)
    ref = DataLoader(data, batch_sampler=BatchSampler(RandomSampler(data), 10, drop_last=False))
    ours = BatchLoader(data, 10, shuffle=True, seed=0)
    assert [len(b) for b in ref] == [len(b) for b in ours]
    assert sorted(torch.cat(list(ours)).tolist()) == sorted(torch.cat(list(ref)).tolist())


@pytest.mark.parametrize("device", DEVICES)
def test_structures_keep_their_shape_and_rows_stay_aligned(device):
    x = torch.arange(20, device=device)
    data = {"x": x, "pair": (x * 2, [x.float().unsqueeze(1).repeat(1, 3)])}
    for batch in BatchLoader(data, 6, shuffle=True, seed=1):
        assert set(batch) == {"x", "pair"} and isinstance(batch["pair"], tuple) and isinstance(batch["pair"][1], list)
        assert torch.equal(batch["pair"][0], batch["x"] * 2) and batch["x"].device.type == device
        assert torch.equal(batch["pair"][1][0][:, 2].long(), batch["x"])


def test_numpy_memmap_tensordict_and_tensorclass(tmp_path):
    mm = np.lib.format.open_memmap(tmp_path / "a.npy", mode="w+", dtype=np.float32, shape=(12, 2))
    mm[:] = np.arange(24, dtype=np.float32).reshape(12, 2)
    mm.flush()
    ro = np.load(tmp_path / "a.npy", mmap_mode="r")
    batches = list(BatchLoader(ro, 5, shuffle=True, seed=0))
    assert all(isinstance(b, torch.Tensor) for b in batches)
    assert sorted(torch.cat(batches)[:, 0].tolist()) == list(range(0, 24, 2))
    td = TensorDict({"a": torch.arange(12), "b": {"c": torch.arange(12) * 3}}, batch_size=[12])
    for b in BatchLoader(td, 5, shuffle=True, seed=0):
        assert isinstance(b, TensorDict) and torch.equal(b["b", "c"], b["a"] * 3)

    @tensorclass
    class Pair:
        x: torch.Tensor
        y: torch.Tensor

    pairs = Pair(x=torch.arange(12), y=-torch.arange(12), batch_size=[12])
    got = list(BatchLoader(pairs, 5, shuffle=True, seed=0))
    assert [len(b) for b in got] == [5, 5, 2] and all(torch.equal(b.y, -b.x) for b in got)


def test_getitems_dataset_through_loader_and_dataloader():
    ds = BatchRowDataset(torch.arange(50))
    assert sorted(torch.cat(list(BatchLoader(ds, 7, shuffle=True, seed=0))).tolist()) == list(range(50))
    got = list(DataLoader(ds, batch_size=7, shuffle=True, collate_fn=collate_batch))
    assert sorted(torch.cat(got).tolist()) == list(range(50)) and len(got[0]) == 7
    per_sample = list(DataLoader(RowDataset({"a": torch.arange(9), "b": np.arange(9) * 2}), batch_size=4))
    assert torch.equal(per_sample[0]["b"], per_sample[0]["a"] * 2)


def test_row_bytes_and_gather_primitives_agree():
    x = torch.rand(30, 4, 2)
    idx = torch.tensor([5, 0, 29, 5])
    assert rows.row_nbytes({"x": x, "y": torch.zeros(30, dtype=torch.int64)}) == 4 * 2 * 4 + 8
    for primitive in ("measure", "numpy", "index_select", "advanced"):
        old, rows.CPU_GATHER = rows.CPU_GATHER, primitive
        try:
            assert torch.equal(rows.gather(x, idx), x[idx])
        finally:
            rows.CPU_GATHER = old


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            dict(data={"a": torch.zeros(3), "b": torch.zeros(4)}),
            r"different numbers of rows \(data\['a'\]: 3, data\['b'\]: 4\)",
        ),
        (dict(batch_size=0), "batch_size must be an integer >= 1, got 0"),
        (dict(batch_size=2.5), "batch_size must be an integer >= 1, got 2.5"),
        (dict(rank=2, world_size=2), r"rank must be in \[0, world_size=2\), got rank=2"),
        (dict(world_size=0), "world_size must be >= 1, got 0"),
        (dict(shuffle="yes"), "shuffle must be False, True or 'grouped', got 'yes'"),
        (dict(data=[1, 2, 3]), r"data\[0\] is a int, which cannot be indexed by a batch"),
        (dict(data={1, 2}), "data is a set, which cannot be indexed by a batch"),
        (dict(data=torch.tensor(3.0)), "0-d tensor: it has no rows"),
        (dict(data=np.array(["a", "b"], dtype=object)), "numpy dtype object, which torch cannot hold"),
    ],
)
def test_bad_input_names_the_problem(bad, message):
    kwargs = dict(data=torch.arange(4), batch_size=2) | bad
    with pytest.raises((ValueError, TypeError), match=message):
        BatchLoader(kwargs.pop("data"), **kwargs)


def test_len_counts_batches_per_rank():
    assert len(BatchLoader(torch.arange(10), 3)) == 4
    assert len(BatchLoader(torch.arange(10), 3, drop_last=True)) == 3
    assert len(BatchLoader(torch.arange(10), 3, world_size=4, rank=3)) == math.ceil(3 / 3)
    assert len(BatchLoader(torch.arange(10), 2, world_size=4, drop_last=True)) == 1


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 80), batch_size=st.integers(1, 16), group_size=st.integers(1, 12), seed=st.integers(0, 2**40))
def test_grouped_shuffle_covers_every_index_and_repeats_per_seed(n, batch_size, group_size, seed):
    def make():
        return BatchLoader(torch.arange(n), batch_size, shuffle="grouped", group_size=group_size, seed=seed)

    first = _epoch(make())
    assert sorted(i for b in first for i in b) == list(range(n))
    assert first == _epoch(make())
    assert len(first) == len(make())


def test_unshuffled_batches_of_strided_data_are_views_in_order():
    base = torch.arange(40).view(20, 2)
    strided = base[:, 1]  # stride 2: batches must still be cut along rows, without a copy
    batches = list(BatchLoader(strided, 6))
    assert [b.tolist() for b in batches] == [strided[i : i + 6].tolist() for i in range(0, 20, 6)]
    assert batches[0].data_ptr() == strided.data_ptr()


def test_measured_gather_yields_the_same_batches_as_a_fixed_one():
    data = {"x": torch.rand(500, 20), "y": torch.arange(500)}
    for primitive in ("measure", "numpy"):
        old, rows.CPU_GATHER = rows.CPU_GATHER, primitive
        try:
            got = list(BatchLoader(data, 8, shuffle=True, seed=4))
        finally:
            rows.CPU_GATHER = old
        assert len(got) == 63 and all(torch.equal(b["x"], data["x"][b["y"]]) for b in got)


def test_tensordicts_are_gathered_as_rows_not_through_getitems():
    td = TensorDict({"x": torch.arange(10.0).view(10, 1), "y": torch.arange(10)}, batch_size=[10])
    loader = BatchLoader(td, 4, shuffle=True, seed=0)
    assert not loader.batched_dataset  # TensorDict has __getitems__, but rows.take gathers it faster
    batches = list(loader)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(torch.cat([b["y"] for b in batches]).tolist()) == list(range(10))
    assert all(torch.equal(b["x"].view(-1).long(), b["y"]) for b in batches)  # rows stay together


def test_transform_is_applied_to_every_whole_batch_in_order():
    x = torch.arange(10).float()
    seen = []

    def double(batch):
        seen.append(len(batch))
        return batch * 2

    plain = list(BatchLoader(x, 4, shuffle=True, seed=3))
    mapped = list(BatchLoader(x, 4, shuffle=True, seed=3, transform=double))
    assert seen == [4, 4, 2]
    assert all(torch.equal(a * 2, b) for a, b in zip(plain, mapped))


def test_transform_must_be_callable():
    with pytest.raises(TypeError, match="transform must be a function"):
        BatchLoader(torch.arange(4), 2, transform="normalize")


def test_the_probe_keeps_every_batch_and_drops_a_clearly_slower_gather(monkeypatch):
    import time

    from fastloops_helpers.load import batch_loader

    data = {"x": torch.rand(600, 16), "y": torch.arange(600)}
    monkeypatch.setattr(batch_loader, "CHUNK_BYTES", 8 * 72)  # one batch of 8 rows per chunk: 75 chunks
    monkeypatch.setattr(rows, "CPU_GATHER", "measure")
    calls = []
    real_take = rows.take

    def take(d, index, primitive=None):
        calls.append(primitive)
        if primitive == "index_select":
            time.sleep(0.02)  # far slower than a gather of 8 rows
        return real_take(d, index, primitive)

    monkeypatch.setattr(rows, "take", take)
    got = list(BatchLoader(data, 8, shuffle=True, seed=1))
    assert len(got) == 75 and all(torch.equal(b["x"], data["x"][b["y"]]) for b in got)
    assert sorted(torch.cat([b["y"] for b in got]).tolist()) == list(range(600))
    assert calls[:2] == ["numpy", "index_select"]  # one try each, then the clear winner for the rest
    assert calls[2:] == ["numpy"] * 73
