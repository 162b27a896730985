"""Notebook 06 measures the device the loop trains on, and a way that leaves a tensor behind is never the fastest."""

import ast
import json
from pathlib import Path

import pytest

from fastloops_book import as_script

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06_device_moves.ipynb"
WRONG = "leaves xs where it is"  # a way that returns its input: the quickest answer, and a wrong one


def notebook_functions(*names: str) -> dict:
    """Return a namespace holding the setup cell's imports and the notebook cells that define `names`."""
    cells = [c for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    namespace: dict = {}
    exec("".join(cells[0]["source"]), namespace)  # the setup cell: imports, two printed lines
    for cell in cells:
        source = "".join(cell["source"])
        defined = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
        if defined & set(names):
            exec(source, namespace)
    missing = [n for n in names if n not in namespace]
    assert not missing, f"notebook 06 defines no {missing}"
    return namespace


def test_over_fastest_divides_by_the_fastest_way_that_moved_every_tensor():
    nb = notebook_functions("slide_xs", "over_fastest")  # compare_ways, in the same cell, defaults to slide_xs
    miss = "xs['pim'][0] is on cpu, not on meta"
    rows = [
        {"leaves": "small", "method": "right", "us_per_call": 4.0, "correct": "ok", "correct_meta": "ok"},
        {"leaves": "small", "method": "slow", "us_per_call": 8.0, "correct": "ok", "correct_meta": "ok"},
        {"leaves": "small", "method": "wrong", "us_per_call": 1.0, "correct": "ok", "correct_meta": miss},
        {"leaves": "large", "method": "right", "us_per_call": 6.0, "correct": "ok", "correct_meta": "ok"},
        {"leaves": "large", "method": "wrong", "us_per_call": 2.0, "correct": miss, "correct_meta": miss},
    ]
    out = {(r["leaves"], r["method"]): r for r in nb["over_fastest"](rows)}
    assert [r["moved_every_tensor"] for r in out.values()] == [True, True, False, True, False]
    assert out["small", "right"]["over_fastest"] == 1.0 and out["small", "slow"]["over_fastest"] == 2.0
    assert out["large", "right"]["over_fastest"] == 1.0
    assert out["small", "wrong"]["over_fastest"] == 0.25  # listed, marked, faster than the baseline: not the baseline


def test_compare_ways_on_meta_checks_each_way_by_code_and_keeps_a_wrong_way_out_of_fastest():
    nb = notebook_functions(
        "slide_xs",
        "move_to",
        "leaves_by_path",
        "check_moved",
        "calibrate",
        "per_call_seconds",
        "compare_ways",
        "walker_figures",
    )
    ways = {"move_to (helpers)": nb["move_to"], WRONG: lambda xs, device: xs}
    rows = nb["compare_ways"](ways, {"small": 2, "large": 4}, 2, 1.0, "meta", make_xs=nb["slide_xs"])
    assert {r["target"] for r in rows} == {"meta"}
    assert {r["method"]: r["moved_every_tensor"] for r in rows} == {"move_to (helpers)": True, WRONG: False}
    assert all(r["correct"].startswith("xs[") and "not on meta" in r["correct"] for r in rows if r["method"] == WRONG)
    # move_to is the only way that moved everything: it is its own fastest, however quick the wrong way was
    assert nb["walker_figures"](rows) == {
        "move_to_over_fastest_small": 1.0,
        "move_to_over_fastest_large": 1.0,
        "move_to_over_fastest": 1.0,
    }


def test_notebook_06_on_a_meta_target_saves_it_and_takes_fastest_over_correct_ways(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_DEVICE", "meta")  # config.device() as the notebook reads it
    as_script.run(NOTEBOOK, tmp_path, "smoke")
    doc = json.loads((tmp_path / "06_device_moves.json").read_text(encoding="utf-8"))
    knobs, figures = doc["provenance"]["knobs"], doc["figures"]
    assert knobs["target"] == "meta" and knobs["copy_target"] is None
    walkers = [r for r in doc["rows"] if "moved_every_tensor" in r]
    assert {r["target"] for r in walkers} == {"meta"} and len(walkers) == 2 * len(knobs["ways"])
    assert {r["method"] for r in walkers if not r["moved_every_tensor"]} == {"TensorDict.from_dict(xs).to"}
    for leaves in ("small", "large"):
        at = {r["method"]: r["us_per_call"] for r in walkers if r["leaves"] == leaves and r["moved_every_tensor"]}
        assert figures[f"move_to_over_fastest_{leaves}"] == pytest.approx(at["move_to (helpers)"] / min(at.values()))
    assert "pinned_copy_speedup" not in figures  # no CUDA target: no copies timed, none saved
