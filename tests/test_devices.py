import collections
import dataclasses
import time
from collections import OrderedDict, defaultdict

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from fastloops_helpers import measure
from fastloops_helpers.experiments import devices as bench_devices
from fastloops_helpers.experiments.devices import check_moved
from fastloops_helpers.load.move import move_to
from fastloops_helpers.teach import slide_moves
from fastloops_helpers.teach.slide_code import slide_move_to, slide_xs

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


@pytest.mark.parametrize("device", TARGETS)
def test_move_to_moves_every_tensor_of_the_slide_xs(device):
    xs = slide_xs(4)
    moved = move_to(xs, device)
    assert check_moved(xs, moved, device) == "ok"
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


def test_slide_move_to_handles_tuples_and_refuses_the_rest():
    assert slide_move_to((torch.ones(1), [torch.ones(1)]), "meta")[1][0].is_meta
    with pytest.raises(TypeError, match="only tensors, dicts, lists and tuples"):
        slide_move_to({"n": 3}, "cpu")


def test_check_moved_catches_what_tensordict_leaves_behind():
    xs = slide_xs(4)
    assert check_moved(xs, TensorDict.from_dict(xs).to("meta"), "meta") == "xs['pim'][0] is on cpu, not on meta"
    assert check_moved(xs, {**xs, "cim": xs["cim"] + 1}, "cpu") == "xs['cim'] has different values"
    assert check_moved(xs, {"cim": xs["cim"]}, "cpu").startswith("structure differs")


def test_every_method_moves_the_slide_xs_on_the_cpu():
    found, skipped = bench_devices.methods()
    assert {"move_to (helpers)", "optree.tree_map", "torch.save + load(map_location)"} <= set(found)
    assert set(found).isdisjoint(skipped)
    xs = slide_xs(4)
    for name, fn in found.items():
        assert check_moved(xs, fn(xs, torch.device("cpu")), "cpu") == "ok", name


def test_methods_are_the_slides_one_liners_plus_both_move_tos():
    found, skipped = bench_devices.methods()
    assert found["torch pytree tree_map"] is slide_moves.pytree_move and found["move_to (helpers)"] is move_to
    assert set(found) | set(skipped) == set(bench_devices.WAYS)


def test_compare_ways_gives_one_checked_row_per_way_and_leaf_size():
    ways = {
        "move_to (helpers)": move_to,
        "torch.save + load(map_location)": slide_moves.torch_save_move,
        "TensorDict.from_dict(xs).to": slide_moves.tensordict_move,
    }
    rows = bench_devices.compare_ways(ways, {"tiny": 2, "small": 4}, rounds=2, block_ms=0.1)
    assert [(r["leaves"], r["method"]) for r in rows] == [(s, m) for s in ("tiny", "small") for m in ways]
    assert min(r["over_fastest"] for r in rows if r["leaves"] == "tiny") == 1.0
    assert {r["method"]: r["correct_meta"] == "ok" for r in rows} == {
        "move_to (helpers)": True,
        "torch.save + load(map_location)": True,
        "TensorDict.from_dict(xs).to": False,
    }
    assert all(r["correct"] == "ok" for r in rows)  # on the CPU nothing needs to move
    figures = bench_devices.figures(rows, [])
    assert figures["move_to_over_fastest"] == max(
        figures["move_to_over_fastest_tiny"], figures["move_to_over_fastest_small"]
    )


def test_compare_jax_times_every_way_against_move_to():
    pytest.importorskip("jax")
    rows = bench_devices.compare_jax(
        bench_devices.JAX_FROM_TORCH, bench_devices.JAX_FROM_JAX, {"small": 4}, rounds=2, block_ms=0.1
    )
    assert [r["method"] for r in rows] == [*bench_devices.JAX_FROM_TORCH, *bench_devices.JAX_FROM_JAX]
    assert all(r["correct"] == "ok" and r["over_move_to"] > 0 for r in rows)
    baseline = []  # the notebook passes its own move_to cell: the baseline is the function given
    bench_devices.compare_jax(
        {}, bench_devices.JAX_FROM_JAX, {"small": 4}, rounds=1, block_ms=0.1, baseline=lambda xs, d: baseline.append(d)
    )
    assert baseline and set(baseline) == {"cpu"}
    assert (
        bench_devices.figures([{"leaves": "small", "method": "move_to (helpers)", "over_fastest": 1.0}], rows)[
            "jax_device_put_moves_all"
        ]
        == 1.0
    )


def test_interleaved_timing_returns_one_sample_per_round():
    samples = bench_devices.per_call_seconds({"a": lambda: None, "b": lambda: sum(range(10))}, rounds=3, block_s=1e-4)
    assert {k: len(v) for k, v in samples.items()} == {"a": 3, "b": 3}
    assert all(s > 0 for v in samples.values() for s in v)


def test_blocks_are_sized_on_real_time_so_the_warp_does_not_change_their_length(monkeypatch):
    monkeypatch.setattr(measure.warp, "SEED", 1)
    monkeypatch.setattr(measure.warp, "STEP", 1000.0)  # a warped calibration would size blocks 1000x off
    calls = []

    def sleep_1ms() -> None:
        calls.append(1)
        time.sleep(0.001)

    bench_devices.per_call_seconds({"a": sleep_1ms}, rounds=1, block_s=0.01)
    per_block = (len(calls) - 4) / 2  # after 1 warm-up and 3 calibration calls: a warm-up block and one round
    assert 2 <= per_block <= 12


def test_every_jax_way_moves_the_slide_xs_with_equal_values():
    jax = pytest.importorskip("jax")
    xs = slide_xs(4)
    device = jax.devices()[0]
    jax_xs = jax.device_put(jax.tree_util.tree_map(np.asarray, xs), device)
    moved = {name: fn(xs, device) for name, fn in bench_devices.JAX_FROM_TORCH.items()}
    moved |= {name: fn(jax_xs, device) for name, fn in bench_devices.JAX_FROM_JAX.items()}
    assert {name: bench_devices.check_jax(xs, m) for name, m in moved.items()} == dict.fromkeys(moved, "ok")


def test_check_jax_finds_a_leaf_that_is_not_a_jax_array():
    pytest.importorskip("jax")
    xs = slide_xs(4)
    assert "not a JAX array" in bench_devices.check_jax(xs, xs)


def test_the_benchmark_moves_to_the_device_fastloops_device_names(monkeypatch):
    monkeypatch.setenv("FASTLOOPS_DEVICE", "meta")
    monkeypatch.setattr(bench_devices, "compare_jax", lambda *args: [])  # JAX moves to its own device: not this test
    result = bench_devices.run("smoke")
    assert result.knobs["target"] == "meta" and {r["target"] for r in result.rows} == {"meta"}
    by_way = {(r["leaves"], r["method"]): r for r in result.rows}
    assert by_way["large", "move_to (helpers)"]["correct"] == "ok"  # every tensor reached meta
    assert by_way["large", "TensorDict.from_dict(xs).to"]["correct"] != "ok"  # the pim list stayed on the CPU
    assert "pinned_copy_speedup" not in result.figures and result.knobs["cuda_mb"] is None


def test_a_cuda_target_also_times_the_host_to_gpu_copies(monkeypatch):
    calls = {}
    cuda = torch.device("cuda")
    monkeypatch.setattr(bench_devices.config, "device", lambda: cuda)
    monkeypatch.setattr(bench_devices, "compare_jax", lambda *args: [])

    def ways(found, sides, rounds, block_ms, target):
        calls["ways"] = target
        return [{"leaves": "large", "method": bench_devices.HELPERS, "over_fastest": 1.0, "target": str(target)}]

    def copies(nbytes, repeat, target):
        calls["copies"] = target
        return [{"way": bench_devices.PINNED}], {"pinned_copy_speedup": 3.0}

    monkeypatch.setattr(bench_devices, "compare_ways", ways)
    monkeypatch.setattr(bench_devices, "cuda_copies", copies)
    result = bench_devices.run("smoke")
    assert calls == {"ways": cuda, "copies": cuda} and result.knobs["target"] == "cuda"
    assert result.figures["pinned_copy_speedup"] == 3.0 and result.knobs["cuda_mb"] == bench_devices.CUDA_MB


def test_pinned_copy_speedup_is_pageable_over_pinned_per_round_with_its_interval():
    samples = {bench_devices.PAGEABLE: [2.0, 3, 2, 2, 4, 2], bench_devices.PINNED: [1.0, 1, 1, 2, 1, 1]}
    found = bench_devices.copy_figures(samples)
    assert found["pinned_copy_speedup"] == 2.0
    assert found["pinned_copy_speedup_ci_low"] == 1.0 and found["pinned_copy_speedup_ci_high"] == 4.0


def test_the_rendered_walker_can_be_slowed_and_still_recurses():
    """Notebook 06 renders tree._map, a recursive function: the liveness check slows it, and it must still walk."""
    from fastloops_helpers import tree
    from fastloops_helpers.measure import slowdown

    original = tree._map.__code__
    try:
        assert slowdown.slow(tree._map, seconds=0.0) == ["_map"]
        moved = move_to({"a": [torch.ones(1), (torch.zeros(2),)]}, "meta")
        assert moved["a"][0].device.type == "meta" and moved["a"][1][0].device.type == "meta"
    finally:
        tree._map.__code__ = original
