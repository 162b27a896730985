import math

import torch

from fastloops_helpers.experiments import fusion


def test_chain_matches_its_formula():
    x = torch.linspace(-3, 3, 101)
    assert torch.allclose(fusion.chain(x), torch.sin(x) * torch.cos(x) + x / (1 + torch.exp(-x)), atol=1e-6)


def test_traffic_counts_passes_of_the_tensor_size():
    moved = fusion.traffic_bytes(1000)
    assert moved == {"eager": 15 * 4000, "fused": 2 * 4000}
    assert fusion.traffic_bytes(10, element_bytes=8)["fused"] == 160


def test_sweep_without_a_compiled_function_reports_eager_and_floors():
    rows = fusion.sweep([256, 1024], None, bandwidth_gb_s=10.0, repeat=1)
    assert [r["n"] for r in rows] == [256, 1024] and all("compiled_s" not in r for r in rows)
    assert math.isclose(rows[1]["eager_floor_s"], 15 * 4096 / 10e9)
    assert all(r["eager_s"] > 0 for r in rows)


def test_sweep_with_a_stand_in_compiled_function_reports_a_speedup():
    rows = fusion.sweep([512], fusion.chain, bandwidth_gb_s=10.0, repeat=1)
    assert rows[0]["speedup"] == rows[0]["eager_s"] / rows[0]["compiled_s"]
