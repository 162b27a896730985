"""The notebook as a lab bench: the timed code on screen, a defaults block that reaches the measurement,
exercises with solutions that run. How these rules read for a contributor: CONTRIBUTING.md, "A notebook"."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import lab_bench  # tests/lab_bench.py: the rules, test code (not the package)
import nbformat
import pytest

from fastloops_book import runner

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# The conclusion (13) reads results and times nothing; 00 describes the machine: neither shows timed code.
SHOWS_CODE = [p for p in NOTEBOOKS if p.name[:2] not in ("00", "13")]


def _nb(path: Path):
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_is_saved_to_the_package(path):
    """One home per object: no cell starts with `#@save` (the package keeps no second copy of a cell)."""
    saved = [
        c.source.splitlines()[0] for c in _nb(path).cells if c.cell_type == "code" and c.source.startswith("#@save")
    ]
    assert not saved, f"{path.name}: {saved}; keep the object in the cell, or in the package rendered with show_code"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_copies_package_code(path):
    """Package code is rendered with show_code, never pasted: no cell holds package code."""
    found = lab_bench.copies(_nb(path))
    assert not found, f"{path.name}:\n" + "\n".join(found)


@pytest.mark.parametrize("path", SHOWS_CODE, ids=lambda p: p.stem)
def test_notebook_shows_the_code_it_times(path):
    nb = _nb(path)
    rendered = [c for c in nb.cells if c.cell_type == "code" and "show_code(" in c.source]
    assert rendered, f"{path.name} shows none of the code it times (no show_code call)"
    leftovers = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "code" and "__future__" in c.source]
    assert not leftovers, f"{path.name}: no cell needs `from __future__ import annotations` once nothing is copied"


def test_a_pasted_copy_is_caught_renamed_or_not():
    source = inspect.getsource(runner.knobs_of)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(source)]
    found = lab_bench.copies(nb)
    assert len(found) == 1 and "cell 1: knobs_of copies book/fastloops_book/runner.py" in found[0]
    nb.cells[1].source = source.replace("def knobs_of", "def my_knobs_of")
    assert "my_knobs_of" in lab_bench.copies(nb)[0]
    nb.cells[1].source = source.replace("return names", "return sorted(names)")  # the student's own version
    assert lab_bench.copies(nb) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_defaults_block_reaches_a_measuring_call(path):
    nb = _nb(path)
    defaults = [c for c in nb.cells if "defaults" in c.metadata.get("tags", [])]
    if path.name.startswith("13"):
        assert not defaults or not lab_bench.knobs(defaults[0].source)
        return
    assert len(defaults) == 1, f"{path.name}: tag exactly one code cell `defaults` (has {len(defaults)})"
    lost = lab_bench.unreached_knobs(nb)
    assert not lost, (
        f"{path.name}: defaults {', '.join(lost)} never reach a measuring call "
        "(pass them to the experiment, load, data or measure call that times)"
    )


def test_the_defaults_rule_catches_a_knob_that_goes_nowhere():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from fastloops_helpers.experiments import loops\nfrom fastloops_helpers import measure"
        ),
        nbformat.v4.new_code_cell("batch_size = 300  # b\nsteps = 4  # s", metadata={"tags": ["defaults"]}),
        nbformat.v4.new_code_cell("n = batch_size * 2\nprint(steps)\nresult = loops.run_loops(batch_size=n)"),
    ]
    assert lab_bench.unreached_knobs(nb) == ["steps"]
    nb.cells[2].source += "\nmeasure.interleaved({'a': lambda: sum(range(steps))})"
    assert lab_bench.unreached_knobs(nb) == []


def test_experiments_never_read_the_sizes_table():
    """No experiment function re-reads the scale table behind a notebook's back: the notebook passes its sizes."""
    offences = []
    for path in sorted((ROOT / "fastloops_helpers" / "experiments").glob("*.py")):
        for func in ast.walk(ast.parse(path.read_text())):
            if not isinstance(func, ast.FunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call) and re.fullmatch(r"config\.(size|sizes|scale)", ast.unparse(node.func)):
                    offences.append(f"{path.name}:{node.lineno} {func.name}() calls {ast.unparse(node.func)}")
    assert not offences, "\n".join(sorted(set(offences)))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_has_a_solution_that_runs(path):
    nb = _nb(path)
    exercises = lab_bench.exercises(nb)
    assert len(exercises) >= 3, f"{path.name}: {len(exercises)} exercises, at least 3 wanted"
    problems = []
    for n, (text, solution) in enumerate(exercises, 1):
        problems += [f"{path.name} exercise {n}: {p}" for p in lab_bench.solution_problems(text, solution)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_solutions_leave_later_cells_alone(path):
    nb = _nb(path)
    problems = lab_bench.leaking_solutions(nb)
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_the_solution_rules_catch_a_bad_solution():
    ok = nbformat.v4.new_code_cell(
        "found = 2 + 2\nprint(found)\nassert found == 4", metadata={"tags": ["solution", "nbval-ignore-output"]}
    )
    assert lab_bench.solution_problems("1. Add two and two.", ok) == []
    bad = nbformat.v4.new_code_cell("measure.save_results('x', {})\nprint(1)", metadata={"tags": ["solution"]})
    found = " ".join(lab_bench.solution_problems("1. Save.", bad))
    assert "nbval-ignore-output" in found and "assert" in found and "results/" in found
