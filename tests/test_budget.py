"""The package's size, in units a formatter cannot change (CONTRIBUTING.md, "Budgets").

- statements: every statement node of the syntax tree, docstrings left out, over fastloops_helpers/ and the
  book's machinery beside it (book/fastloops_book/): one budget for both, so moving code between them frees none;
- a module's lines, a function's lines (decorators and docstring included), a public function's parameters
  (`self` and `cls` left out; `*args` and `**kwargs` count one each).

The statements and module budgets hold outright. The function budgets still have today's exceptions, listed
below: the lists may only shrink, and the test names a function that has come within its budget.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fastloops_helpers

PACKAGE = Path(fastloops_helpers.__file__).parent
ROOTS = {"": PACKAGE, "book/": PACKAGE.parent / "book" / "fastloops_book"}  # a module's name: book/ marks the book's
STATEMENTS, MODULE_LINES, FUNCTION_LINES, PARAMETERS = 6000, 400, 40, 6


def _modules() -> dict[str, ast.Module]:
    return {
        prefix + p.relative_to(root).as_posix(): ast.parse(p.read_text())
        for prefix, root in ROOTS.items()
        for p in sorted(root.rglob("*.py"))
    }


def _path(name: str) -> Path:
    """Return the file of module `name` (a key of `_modules`)."""
    prefix = "book/" if name.startswith("book/") else ""
    return ROOTS[prefix] / name.removeprefix(prefix)


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def statements(tree: ast.AST) -> int:
    """Count the statements of `tree`, docstrings (and any bare string) left out."""
    return sum(isinstance(n, ast.stmt) and not _is_docstring(n) for n in ast.walk(tree))


def test_statements_are_counted_the_way_the_budget_says():
    tree = ast.parse('"""doc"""\nimport os\n\ndef f(a):\n    """doc"""\n    if a:\n        return 1\n    return 2\n')
    assert statements(tree) == 5  # import, def, if, two returns


def test_the_package_stays_within_its_statements():
    total = sum(statements(tree) for tree in _modules().values())
    assert total <= STATEMENTS, (
        f"{total} statements; the budget is {STATEMENTS}: move code that serves one notebook into it"
    )


def test_modules_stay_under_their_lines():
    lines = {name: len(_path(name).read_text().splitlines()) for name in _modules()}
    over = {name: n for name, n in lines.items() if n >= MODULE_LINES}
    assert not over, f"modules of {MODULE_LINES}+ lines (split them by idea; a registry by seed): {over}"


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    return [
        (f"{name}:{node.name}", node)
        for name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Count `fn`'s parameters: `self`/`cls` left out, `*args` and `**kwargs` one each."""
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs] + [p.arg for p in (a.vararg, a.kwarg) if p]
    return len([n for n in names if n not in ("self", "cls")])


def test_parameters_are_counted_the_way_the_budget_says():
    fn = ast.parse("def f(self, a, /, b, *args, c, **kw): pass").body[0]
    assert parameters(fn) == 5


# Today's public functions above the parameter budget (issue 31 let it wait): the list may only shrink.
MANY_PARAMETERS_NOW = {
    "data/ffcv_io.py:table_loader",
    "data/ffcv_io.py:image_loader",
    "data/jpeg_folder.py:write_synthetic_imagefolder",
    "data/memmap.py:write_memmap",
    "experiments/distributed.py:helpers_batches",
    "experiments/distributed.py:batches",
    "experiments/distributed.py:launch",
    "experiments/loops.py:measure_loops",
    "doctor/diagnosis.py:diagnose",
    "measure/clock.py:interleaved_until_steady",
    "measure/clock.py:per_call",
    "measure/plots.py:bars",
    "measure/plots.py:lines",
    "measure/provenance.py:save_results",
}


# Today's constructors above the parameter budget, with today's count as a ceiling that may only fall
# (keyword-only parameters count): the count may not rise, and a constructor within the budget leaves the list.
CONSTRUCTOR_PARAMETERS_NOW = {
    "load/batch_loader.py:BatchLoader.__init__": 10,
    "load/order.py:EpochOrder.__init__": 9,
    "load/stream_batches.py:Batches.__init__": 7,
    "load/thread_loader.py:ThreadLoader.__init__": 10,
}


def _constructors() -> dict[str, int]:
    return {
        f"{name}:{cls.name}.__init__": parameters(fn)
        for name, tree in _modules().items()
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__"
    }


def test_constructors_stay_within_their_parameters():
    found = _constructors()
    over = {k: n for k, n in found.items() if n > CONSTRUCTOR_PARAMETERS_NOW.get(k, PARAMETERS)}
    assert not over, f"constructors over {PARAMETERS} parameters (or over today's ceiling): {over}"
    within = {k for k in CONSTRUCTOR_PARAMETERS_NOW if found.get(k, 0) <= PARAMETERS}
    assert not within, f"{sorted(within)} now within the budget (or gone): take them off the list"


def _lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return fn.end_lineno - min([d.lineno for d in fn.decorator_list] + [fn.lineno]) + 1


def test_functions_stay_under_their_lines_and_parameters():
    found = _functions()
    long = {name for name, fn in found if _lines(fn) >= FUNCTION_LINES}
    many = {name for name, fn in found if not fn.name.startswith("_") and parameters(fn) > PARAMETERS}
    assert not long, f"functions of {FUNCTION_LINES}+ lines: {sorted(long)}"
    assert many <= MANY_PARAMETERS_NOW, (
        f"public functions over {PARAMETERS} parameters: {sorted(many - MANY_PARAMETERS_NOW)}"
    )
    gone = MANY_PARAMETERS_NOW - many
    assert not gone, f"{sorted(gone)} now within the budget (or gone): take them off the lists"
