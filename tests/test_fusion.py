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
    rows = fusion.sweep([256, 1024], fusion.chain, None, repeat=1, bandwidth_gb_s=10.0)
    assert [r["n"] for r in rows] == [256, 1024] and all("compiled_s" not in r for r in rows)
    assert math.isclose(rows[1]["eager_floor_s"], 15 * 4096 / 10e9)
    assert all(r["eager_s"] > 0 for r in rows)


def test_sweep_with_a_stand_in_compiled_function_reports_a_speedup():
    rows = fusion.sweep([512], fusion.chain, fusion.chain, repeat=1, bandwidth_gb_s=10.0)
    assert rows[0]["speedup"] == rows[0]["eager_s"] / rows[0]["compiled_s"]
    assert fusion.figures(rows, 1.5) == {
        "compile_s": 1.5,
        "fusion_eager_largest_s": rows[0]["eager_s"],
        "fusion_eager_smallest_s": rows[0]["eager_s"],
        "fusion_speedup_largest": rows[0]["speedup"],
        "fusion_speedup_smallest": rows[0]["speedup"],
        "fusion_compiled_largest_s": rows[0]["compiled_s"],
        "fusion_compiled_smallest_s": rows[0]["compiled_s"],
    }


def test_sweep_counts_the_bytes_of_its_dtype_and_leaves_floors_out_without_a_bandwidth():
    rows = fusion.sweep([1024], fusion.chain, None, repeat=1, dtype=torch.float64)
    assert rows[0]["mib"] == 1024 * 8 / 2**20 and "eager_floor_s" not in rows[0]
    assert fusion.figures(rows, 2.0) == {
        "compile_s": 2.0,
        "fusion_eager_largest_s": rows[0]["eager_s"],
        "fusion_eager_smallest_s": rows[0]["eager_s"],
    }


def test_first_call_checks_the_compiled_function_against_eager():
    fn, seconds, note = fusion.first_call(fusion.chain, fusion.chain, n=64)
    assert fn is fusion.chain and seconds > 0 and note == "inductor on cpu"
    fn, _, note = fusion.first_call(lambda x: x + 1, fusion.chain, n=64)
    assert fn is None and "different values" in note


def test_first_call_reports_a_compiler_that_fails():
    def broken(x):
        raise RuntimeError("no C++ compiler\nmore detail")

    fn, seconds, note = fusion.first_call(broken, n=8)
    assert fn is None and math.isnan(seconds) and note == "torch.compile unavailable: RuntimeError: no C++ compiler"


def test_compile_chain_defers_compilation_to_the_first_call():
    compiled = fusion.compile_chain(fusion.chain, dynamic=False)
    assert callable(compiled) and compiled is not fusion.chain


def test_the_benchmark_times_the_chain_on_the_device_config_returns(monkeypatch):
    seen, timed_on = [], []
    meta = torch.device("meta")  # a device other than the CPU on every machine: its tensors hold no values
    monkeypatch.setattr(fusion.config, "device", lambda: meta)

    def recorded(fn, dynamic=True):
        return lambda x: seen.append(x.device) or fn(x)  # stands in for inductor: records what it was given

    per_call = fusion.measure.per_call

    def recorded_per_call(fns, **kw):
        timed_on.append(kw["device"])
        return per_call(fns, **kw)

    monkeypatch.setattr(fusion, "compile_chain", recorded)
    monkeypatch.setattr(fusion.measure, "per_call", recorded_per_call)
    result = fusion.run("smoke")
    assert seen and set(seen) == {meta} and timed_on == [meta] * len(result.rows)
    assert result.knobs["device"] == "meta" and result.knobs["note"] == "inductor on meta"
    assert set(result.figures) == {
        f"{name}_meta"
        for name in ("compile_s", "fusion_speedup_largest", "fusion_speedup_smallest")
        + (
            "fusion_eager_largest_s",
            "fusion_eager_smallest_s",
            "fusion_compiled_largest_s",
            "fusion_compiled_smallest_s",
        )
    }


def test_figures_on_the_cpu_keep_their_names_and_a_gpus_end_with_its_type():
    rows = [{"eager_s": 0.2, "compiled_s": 0.1, "speedup": 2.0}, {"eager_s": 0.9, "compiled_s": 0.3, "speedup": 3.0}]
    assert fusion.figures(rows, 1.0, "cpu")["fusion_speedup_largest"] == 3.0
    assert fusion.figures(rows, 1.0, "cpu")["fusion_compiled_largest_s"] == 0.3
    assert fusion.figures(rows, 1.0, torch.device("cuda"))["fusion_speedup_smallest_cuda"] == 2.0
    assert fusion.figures(rows, 1.0, torch.device("cuda"))["fusion_eager_smallest_s_cuda"] == 0.2
