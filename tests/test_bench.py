import json
import subprocess
import sys

import pytest

from fastloops_helpers import experiments as bench
from fastloops_helpers.experiments import bandwidth


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "fastloops_helpers.book.bench", *args],
                          capture_output=True, text=True, env=env, timeout=300)


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


def test_loops_compare_gives_the_figures_notebook_01_prints():
    from fastloops_helpers.experiments import loops

    result = loops.compare(3000, 300, rounds=2, slow_rounds=1, with_tf=False)
    names = {r["loop"] for r in result.rows}
    assert names == set(loops.VECTORISED) | set(loops.SLOWER)
    assert result.rows[0]["x_fastest"] == 1.0 and all(r["epochs"] >= 1 for r in result.rows)
    assert {"helpers_over_numpy", "dataloader_nw0_over_helpers"} <= set(result.figures)
    assert result.knobs["tf_data"] is False


def test_gather_compare_reports_every_primitive_and_the_loaders_share_of_the_best():
    from fastloops_helpers.experiments import gather

    result = gather.compare(2048, 16, 256, rounds=2)
    assert {r["gather"] for r in result.rows} == {"helpers", "index_select", "advanced_indexing", "np_take",
                                                   "per_row_stack"}
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
