import json
import subprocess
import sys

import pytest
import torch

from fastloops_helpers import experiments as bench
from fastloops_helpers.experiments import bandwidth


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "fastloops_helpers.book.bench", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_list_names_each_benchmark_with_its_description():
    out = _cli("--list")
    assert out.returncode == 0
    assert "bandwidth" in out.stdout and "Memory copy bandwidth" in out.stdout
    assert set(bench.available()) >= {"bandwidth"}


def test_run_writes_the_documented_json(tmp_path):
    out = _cli("bandwidth", "--scale", "smoke", "--out", str(tmp_path / "bw.json"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "bw.json").read_text())
    assert set(doc) == {"name", "provenance", "rows", "figures"}
    assert doc["name"] == "bench-bandwidth" and doc["provenance"]["scale"] == "smoke"
    assert {"hardware", "versions", "scale", "knobs", "repeats"} <= set(doc["provenance"])
    assert len(doc["rows"]) == 6 and doc["figures"]["copy_gb_per_s_ram"] > 0
    assert "copy_gb_per_s_ram = " in out.stdout and "size_mb" in out.stdout


def test_unknown_benchmark_and_scale_are_rejected():
    out = _cli("nope", "--scale", "smoke")
    assert out.returncode != 0 and "unknown benchmark 'nope'; available: " in out.stderr
    out = _cli("bandwidth", "--scale", "huge")
    assert out.returncode != 0 and "invalid choice: 'huge'" in out.stderr


def test_copy_bandwidth_counts_bytes_and_rejects_unknown_library():
    gbps = bandwidth.copy_bandwidth(2**20, "numpy", repeat=2)
    assert 0.1 < gbps < 10_000  # physically plausible for a 1 MiB buffer on any machine
    with pytest.raises(ValueError, match="jax"):
        bandwidth.copy_bandwidth(2**20, "jax")


@pytest.mark.parametrize("name", ["loops", "getitem", "gather", "shuffle", "fusion", "bandwidth"])
def test_experiments_do_not_import_each_other(name):
    import ast
    from pathlib import Path

    for path in [Path(bench.__file__).parent / f"{name}.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                assert node.module.split(".")[0] not in bench.available(), f"{path.name} imports {node.module}"


def test_measure_loops_gives_the_figures_notebook_01_prints():
    from fastloops_helpers.experiments import loops

    result, per_round = loops.measure_loops(3000, 300, 1, rounds=2, slow_rounds=1, pair_rounds=3, with_tf=False)
    names = {r["loop"] for r in result.rows}
    assert names == set(loops.VECTORISED) | set(loops.PER_SAMPLE) | set(loops.SLOWER)
    assert result.rows[0]["x_fastest"] == 1.0 and all(r["epochs"] >= 1 for r in result.rows)
    assert all(r["batches_per_epoch"] == 10 for r in result.rows)  # every loop cuts 3000 indices into 10 batches
    assert {"helpers_over_numpy", "dataloader_nw0_over_helpers", "dataloader_workers_over_numpy"} <= set(result.figures)
    assert result.knobs["tf_data"] is False and result.knobs["num_workers"] == 1


def test_measure_loops_gives_per_round_ratios_and_their_intervals():
    from fastloops_helpers import measure
    from fastloops_helpers.experiments import loops

    result, per_round = loops.measure_loops(3000, 300, 0, rounds=6, slow_rounds=1, pair_rounds=6, with_tf=False)
    assert set(per_round) == set(loops.PER_ROUND)
    assert len(per_round["dataloader_nw0_over_helpers"]) == 6  # the per-sample DataLoader, interleaved per round
    assert len(per_round["helpers_over_numpy"]) >= 6  # until steady: 6 rounds, more while the interval is wide
    for key, ratios in per_round.items():
        low, high = measure.median_interval(ratios)
        assert result.figures[key] == measure.median(ratios)
        assert (result.figures[f"{key}_ci_low"], result.figures[f"{key}_ci_high"]) == (low, high) and low <= high
    assert result.knobs["pair_rounds"] == 6 and result.knobs["rounds_taken"] >= 6
    rows = {r["loop"]: r for r in result.rows}
    assert rows["dataloader_nw0"]["epochs"] == 6 and rows["numpy"]["epochs"] == result.knobs["rounds_taken"]


def test_measure_loops_takes_its_sizes_from_the_caller():
    from fastloops_helpers.experiments import loops

    result, _ = loops.measure_loops(600, 30, 0, rounds=1, slow_rounds=1, pair_rounds=1, with_tf=False)
    assert "dataloader_workers" not in {r["loop"] for r in result.rows}  # no workers asked for: none timed
    assert {r["batches_per_epoch"] for r in result.rows} == {20}
    assert result.knobs | {"samples": 600, "batch_size": 30} == result.knobs


def test_the_slide_loader_is_the_one_notebook_03_shows():
    from fastloops_helpers.teach.slide_code import FastDataloader

    batches = list(FastDataloader(torch.arange(10), 4))
    assert [len(b) for b in batches] == [4, 4, 2] and sorted(torch.cat(batches).tolist()) == list(range(10))


def test_gather_compare_reports_every_primitive_and_the_loaders_share_of_the_best():
    from fastloops_helpers.experiments import gather

    result = gather.compare(2048, 16, 256, rounds=2)
    assert {r["gather"] for r in result.rows} == {
        "helpers",
        "index_select",
        "advanced_indexing",
        "np_take",
        "per_row_stack",
    }
    assert result.figures["helpers_gb_per_s"] > 0 and result.figures["helpers_over_best_primitive"] > 0
    assert [r["gb_per_s"] for r in result.rows] == sorted((r["gb_per_s"] for r in result.rows), reverse=True)


def test_getitem_slide_example_names_the_claims_figures():
    from fastloops_helpers.experiments import getitem

    figures = getitem.slide_example(1000, repeat=2)
    assert set(figures) == {"slide_100_per_sample_us", "slide_100_batched_us", "slide_100_speedup"}
    assert figures["slide_100_speedup"] > 1  # 100 Python calls + a stack cannot beat one indexing call


def test_shuffle_rows_carry_the_speedup_of_the_grouped_permutation():
    from fastloops_helpers.experiments import shuffle

    rows = shuffle.time_permutations(4096, 64, repeat=2)
    assert {r["method"] for r in rows} >= set(shuffle.FULL)
    assert shuffle.headline(rows, 4096) > 0
    speed = shuffle.group_size_speed(4096, [16, 64], repeat=2, full_method="numpy permutation")
    assert [r["group_size"] for r in speed] == [16, 64] and all(r["speedup_over_full"] > 0 for r in speed)
    with pytest.raises(ValueError, match="full_method"):
        shuffle.group_size_speed(4096, [16], repeat=1, full_method="sorted")


def test_shuffle_cost_curve_times_the_slides_grouped_shuffle_it_is_given():
    from fastloops_helpers.experiments import shuffle
    from fastloops_helpers.teach.quasi_random import slide_grouped_permutation

    calls = []

    def slide(n, group_size, generator):
        calls.append(n)
        return slide_grouped_permutation(n, group_size, generator)

    result = shuffle.cost_curve([1000], 2048, 64, repeat=1, slide=slide)
    assert {r["n"] for r in result.rows} == {1000, 2048} and set(calls) == {1000, 2048}
    assert {"slide's grouped (g=64)", "grouped_permutation (g=64)"} <= {r["method"] for r in result.rows}
    assert result.figures["slide_grouped_speedup_headline"] > 0 and "grouped_speedup_2p11" in result.figures
    assert result.knobs["sizes"] == [1000, 2048] and result.repeats == 1


def test_getitem_times_the_fetches_it_is_given_and_compare_takes_its_sizes():
    from fastloops_helpers.experiments import getitem
    from fastloops_helpers.teach.slide_getitem import batched_fetch, per_sample_fetch

    calls = {"per_sample": 0, "batched": 0}

    def counted(name, fetch):
        def wrapped(*args):
            calls[name] += 1
            return fetch(*args)

        return wrapped

    rows = getitem.sweep(
        torch.arange(500),
        [1, 10],
        repeat=1,
        per_sample=counted("per_sample", per_sample_fetch),
        batched=counted("batched", batched_fetch),
    )
    assert len(rows) == 8 and calls["per_sample"] > 0 and calls["batched"] > 0
    result = getitem.compare(500, 3, [1, 10], repeat=1)
    assert {r["data"] for r in result.rows} == {"index", "matrix"} and len(result.rows) == 16
    assert result.knobs == {"rows": 500, "features": 3, "batch_sizes": [1, 10]} and result.repeats == 1


def test_the_slides_datasets_give_the_same_batches_as_each_other():
    from torch.utils.data import DataLoader

    from fastloops_helpers.teach.slide_getitem import FD, D, batched_fetch, per_sample_fetch

    data = torch.arange(10) * 3
    per_sample = list(DataLoader(D(data), batch_size=4))
    batched = list(DataLoader(FD(data), batch_size=4, collate_fn=lambda x: x))
    assert all(torch.equal(a, b) for a, b in zip(per_sample, batched)) and len(batched) == 3
    assert torch.equal(per_sample_fetch(data, [1, 5]), batched_fetch(data, torch.tensor([1, 5])))


@pytest.mark.parametrize("name", ["getitem", "gather", "shuffle"])
def test_run_takes_the_scale_and_nothing_else(name):
    import importlib
    import inspect

    module = importlib.import_module(f"fastloops_helpers.experiments.{name}")
    assert list(inspect.signature(module.run).parameters) == ["scale"]


@pytest.mark.parametrize("name", ["otto", "cifar"])
def test_the_ffcv_benchmarks_take_the_scale_and_read_the_table_only_in_run(name):
    import ast
    import importlib
    import inspect

    module = importlib.import_module(f"fastloops_helpers.experiments.{name}")
    assert list(inspect.signature(module.run).parameters) == ["scale"]
    readers = {
        fn.name
        for fn in ast.walk(ast.parse(inspect.getsource(module)))
        if isinstance(fn, ast.FunctionDef)
        and any(
            isinstance(n, ast.Attribute) and n.attr in ("size", "sizes") and getattr(n.value, "id", "") == "config"
            for n in ast.walk(fn)
        )
    }
    assert readers == {"run"}


def test_several_benchmarks_run_each_in_its_own_fresh_interpreter(monkeypatch, capsys):
    from fastloops_helpers.book import bench as cli

    commands = []

    def fake_run(command, check):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1 if command[3] == "gather" else 0)

    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    assert cli.main(["all", "--scale", "smoke"]) == 1  # gather failed; the others still ran
    assert [c[3] for c in commands] == list(bench.available())  # one process per benchmark, in order
    assert all(
        c[:3] == [sys.executable, "-m", "fastloops_helpers.book.bench"] and c[4:] == ["--scale", "smoke"]
        for c in commands
    )
    assert "gather failed" in capsys.readouterr().err
    commands.clear()
    assert cli.main(["loops", "shuffle"]) == 0 and [c[3:] for c in commands] == [["loops"], ["shuffle"]]
    with pytest.raises(SystemExit):
        cli.main(["loops", "nope"])
