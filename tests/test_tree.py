"""One walker: the loader, move_to, the prefetchers and the getitems Datasets accept the same containers."""

import collections
import dataclasses

import pytest
import torch
from tensordict import TensorDict

from fastloops_helpers import BatchLoader, ThreadPrefetcher, move_to, tree
from fastloops_helpers.load.getitems import SampleListDataset

Pair = collections.namedtuple("Pair", "X y")


@dataclasses.dataclass(frozen=True)
class Batch:
    X: torch.Tensor
    meta: dict


def structures(n=6):
    X, y = torch.arange(n * 2).float().view(n, 2), torch.arange(n)
    td = TensorDict({"X": X}, batch_size=[n])
    return {
        "dict": {"X": X, "y": y},
        "tuple": (X, y),
        "list": [X, y],
        "namedtuple": Pair(X, y),
        "dataclass": Batch(X, {"y": y}),
        "tensordict": {"td": td, "y": y},
    }


@pytest.mark.parametrize("kind", list(structures()))
def test_every_consumer_keeps_the_container_type(kind):
    data = structures()[kind]
    batches = list(BatchLoader(data, 4, shuffle=True, seed=1))
    assert [type(b) for b in batches] == [type(data)] * 2
    first = tree.leaves(batches[0])
    assert [len(leaf) for _, leaf in first] == [4] * len(first)
    moved = move_to(batches[0], "meta")
    assert type(moved) is type(data) and all(t.is_meta for t in tree.tensors(moved))
    through = list(ThreadPrefetcher(BatchLoader(data, 4, shuffle=True, seed=1)))
    assert all(torch.equal(a, b) for x, y in zip(batches, through) for a, b in zip(tree.tensors(x), tree.tensors(y)))


def test_shuffled_rows_stay_aligned_across_fields():
    data = structures()["dataclass"]
    for b in BatchLoader(data, 4, shuffle=True, seed=2):
        assert torch.equal(b.X[:, 0] / 2, b.meta["y"].float())


def test_samples_of_a_namedtuple_batch_are_namedtuples():
    samples = SampleListDataset(structures()["namedtuple"]).__getitems__([4, 1])
    assert [type(s) for s in samples] == [Pair, Pair] and samples[0].y.item() == 4


def test_an_unsupported_container_is_named_with_its_path_everywhere():
    bad = {"X": torch.zeros(3), "extra": [torch.zeros(3), {1, 2}]}
    with pytest.raises(TypeError, match=r"set at obj\['extra'\]\[1\]: use a dict"):
        move_to(bad, "cpu")
    with pytest.raises(TypeError, match=r"data\['extra'\]\[1\] is a set, which cannot be indexed"):
        BatchLoader(bad, 2)
