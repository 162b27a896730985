"""What a notebook shows is what it runs: slow every shown function down and every timing figure moves.

The unit tests check the edit itself; the slow tests run each timing notebook twice at the smoke scale (unedited,
then slowed as `book/fastloops_book/liveness.py` describes) and fail on a timing figure that did not move.
"""

import time
from pathlib import Path

import nbformat
import pytest

from fastloops_book import liveness
from fastloops_book.instruments import slowdown

ROOT = Path(__file__).resolve().parents[1]
# Every notebook that times something: all but the conclusion (13), which reads the others' results.
TIMING = [p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) if not p.name.startswith("13")]


def test_a_cell_is_slowed_at_each_call_and_each_yield():
    source = (
        "%timeit list(f(3))\n@staticmethod\ndef f(n):\n    '''doc'''\n    for i in range(n):\n"
        "        yield i  # a comment\n\nclass A:\n    def g(self):\n        return 1\n"
    )
    slowed = slowdown.slowed_source(source, 0.05)
    assert slowed.splitlines()[0] == "%timeit list(f(3))"  # magics kept as they were
    assert slowed.count("stall(_liveness_t, 0.05)") == 3  # f's finally, f's yield, g's finally
    scope: dict = {"_liveness_now": slowdown.now, "_liveness_stall": slowdown.stall}
    exec(slowdown.parseable(slowed), scope)
    f = scope["f"].__func__
    start = time.perf_counter()
    assert list(f(2)) == [0, 1]  # the same results, later: two yields and the end, 0.05 s each at least
    assert time.perf_counter() - start >= 0.15
    assert f.__doc__ == "doc"


def test_slowing_package_code_reaches_every_reference():
    from fastloops_helpers.load import rows
    from fastloops_helpers.load.rows import gather as imported_earlier

    original = rows.gather.__code__
    try:
        assert slowdown.slow(rows.gather, seconds=0.05) == ["gather"]
        import torch

        start = time.perf_counter()
        out = imported_earlier(torch.arange(6.0).reshape(3, 2), torch.tensor([2, 0]))
        assert time.perf_counter() - start >= 0.05
        assert out.tolist() == [[4.0, 5.0], [0.0, 1.0]]
    finally:
        rows.gather.__code__ = original


def test_a_class_is_slowed_method_by_method_super_included():
    from fastloops_helpers.load.batch_loader import BatchLoader

    saved = {k: v.__code__ for k, v in vars(BatchLoader).items() if hasattr(v, "__code__")}
    try:
        slowed = slowdown.slow(BatchLoader, seconds=0.0)
        assert "BatchLoader.__iter__" in slowed and "BatchLoader.__init__" in slowed
    finally:
        for k, code in saved.items():
            getattr(BatchLoader, k).__code__ = code


def test_the_edited_notebook_slows_what_it_renders_and_drops_solutions():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from fastloops_book.source import show_code\nshow_code(BatchLoader.__iter__)"),
        nbformat.v4.new_code_cell("def mine():\n    return 1", metadata={"tags": ["solution"]}),
    ]
    cells = liveness.edited(nb).cells
    assert len(cells) == 3 and cells[0].source.startswith(slowdown.IMPORT)
    assert cells[2].source.endswith("slowdown.slow(BatchLoader.__iter__)")


def test_timing_figures_are_named_by_their_unit_and_move_the_slow_way():
    assert [liveness.timing(k) for k in ("nb:ms_per_epoch", "nb:img_per_s_2", "nb:x_over_y", "nb:x_ms_ci_low")] == [
        "duration",
        "rate",
        "",
        "",
    ]
    rows = liveness.moves(
        {"a:epoch_s": 1.0, "a:img_per_s": 100.0, "a:ratio": 2.0}, {"a:epoch_s": 1.2, "a:img_per_s": 50.0}
    )
    assert [(r[0], r[3]) for r in rows] == [("a:epoch_s", False), ("a:img_per_s", True)]


@pytest.mark.slow
@pytest.mark.liveness  # compares timings of two runs: a check to run (make liveness), not part of make test
@pytest.mark.parametrize("path", TIMING, ids=lambda p: p.stem)
def test_every_timing_figure_moves_when_the_shown_code_slows(path):
    rows = liveness.check(path)
    assert rows, f"{path.name} saves no timing figure (a duration or rate named with its unit)"
    still = [f"{name}: {old:.4g} -> {new:.4g}" for name, old, new, moved in rows if not moved]
    assert not still, f"{path.name}: timed from code the notebook does not show:\n" + "\n".join(still)


def test_a_class_with_generated_methods_is_slowed_where_it_has_source():
    from fastloops_helpers.data.memmap import ImageData

    written = [f for f in slowdown._targets(ImageData) if slowdown._has_source(f)]
    assert slowdown._targets(ImageData) == written  # the generated __init__ is left out, not an error


def test_a_compiled_function_is_slowed_at_each_call_not_once_while_traced():
    import torch

    scope: dict = {"_liveness_now": slowdown.now, "_liveness_stall": slowdown.stall}
    exec(slowdown.slowed_source("def f(x):\n    return (x * 2).sum()", 0.05), scope)
    compiled = torch.compile(scope["f"], backend="eager")
    x = torch.ones(4)
    compiled(x)  # traced here
    start = time.perf_counter()
    assert compiled(x).item() == 8.0
    assert time.perf_counter() - start >= 0.05
