import collections
import dataclasses
from collections import OrderedDict, defaultdict

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torch.utils._pytree import tree_flatten

from fastloops_helpers.load.move import move_to

# meta is a real "other device" on every machine: a tensor that was not moved stays on the CPU
TARGETS = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
Pair = collections.namedtuple("Pair", "x y")


@dataclasses.dataclass
class Batch:
    image: torch.Tensor
    label: torch.Tensor
    name: str = "b"


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: torch.Tensor


def _devices(obj) -> list[str]:
    """Return the device type of every tensor leaf of `obj`, in torch pytree order."""
    return [leaf.device.type for leaf in tree_flatten(obj)[0] if isinstance(leaf, torch.Tensor)]


@pytest.mark.parametrize("device", TARGETS)
def test_move_to_moves_every_tensor_of_the_slide_xs(device):
    side = torch.rand(3, 4, 4)
    xs = {"im": {"label": torch.rand(1, 4, 4), "image": side}, "cim": side + 1, "pim": [side + 2, side + 3]}
    moved = move_to(xs, device)
    assert _devices(moved) == [device] * 5 and moved.keys() == xs.keys()
    assert all(t.device.type == "cpu" for t in [xs["cim"], *xs["pim"]])  # the input is left alone


def test_move_to_keeps_container_types_and_passes_leaves_through():
    t = torch.ones(2)
    obj = {
        "tuple": (t, 3),
        "pair": Pair(t, "s"),
        "ordered": OrderedDict(a=t),
        "dd": defaultdict(list, a=[t]),
        "batch": Batch(t, t),
        "frozen": Frozen(t),
        "leaves": [None, 1.5, "x", b"y", np.zeros(2), torch.float32],
    }
    moved = move_to(obj, "meta")
    assert type(moved["tuple"]) is tuple and moved["tuple"][1] == 3
    assert isinstance(moved["pair"], Pair) and moved["pair"].y == "s" and moved["pair"].x.is_meta
    assert type(moved["ordered"]) is OrderedDict and moved["ordered"]["a"].is_meta
    assert type(moved["dd"]) is defaultdict and moved["dd"].default_factory is list and moved["dd"]["a"][0].is_meta
    assert isinstance(moved["batch"], Batch) and moved["batch"].label.is_meta and moved["batch"].name == "b"
    assert moved["frozen"].x.is_meta and obj["frozen"].x.device.type == "cpu"
    assert moved["leaves"][:4] == [None, 1.5, "x", b"y"] and moved["leaves"][4] is obj["leaves"][4]
    assert moved["leaves"][5] is torch.float32


def test_move_to_handles_tensordicts_and_parameters():
    td = TensorDict({"a": torch.ones(3), "b": {"c": torch.zeros(3, 2)}}, batch_size=[3])
    moved = move_to({"td": td, "w": torch.nn.Parameter(torch.ones(1))}, "meta")
    assert isinstance(moved["td"], TensorDict) and moved["td"]["b", "c"].is_meta
    assert moved["w"].is_meta


@pytest.mark.parametrize(
    "bad,path",
    [
        ({"a": [], "pim": [torch.ones(1), {1, 2}]}, "obj['pim'][1]"),
        ([(torch.ones(1), iter([1]))], "obj[0][1]"),
        (Batch(torch.ones(1), collections.deque([torch.ones(1)])), "obj.label"),
    ],
)
def test_move_to_names_the_path_of_an_unsupported_container(bad, path):
    with pytest.raises(TypeError) as err:
        move_to(bad, "cpu")
    assert f" at {path}: " in str(err.value)


def test_move_to_passes_non_blocking_through():
    t = torch.ones(3)
    assert move_to([t], "cpu", non_blocking=True)[0] is t  # same device: .to returns the tensor itself


def test_the_rendered_walker_can_be_slowed_and_still_recurses():
    """Notebook 06 renders tree._map, a recursive function: the liveness check slows it, and it must still walk."""
    from fastloops_book.instruments import slowdown
    from fastloops_helpers import tree

    original = tree._map.__code__
    try:
        assert slowdown.slow(tree._map, seconds=0.0) == ["_map"]
        moved = move_to({"a": [torch.ones(1), (torch.zeros(2),)]}, "meta")
        assert moved["a"][0].device.type == "meta" and moved["a"][1][0].device.type == "meta"
    finally:
        tree._map.__code__ = original
