"""The rules that make a notebook a lab bench, read from its cells' syntax trees.

- An object lives in one place: in its notebook's cell when only that notebook uses it, else in the package,
  and no cell holds a copy of package code: a notebook renders it with `fastloops_book.source.show_code`. No cell starts
  with `#@save`: the package keeps no second copy of a cell.
- The cell tagged `defaults` is the configuration: every name it assigns reaches a measuring call later.
- Every exercise (a markdown cell after `## Exercises`) is followed by a solution cell that runs.

tests/test_lab_bench.py applies them to every notebook; CONTRIBUTING.md explains them.
"""

from __future__ import annotations

import ast
import copy
import functools
import gc
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import fastloops_book
import fastloops_helpers

T = TypeVar("T")

COPY_MIN_STATEMENTS = 3  # shorter definitions (a one-line property) may coincide without being copies
DEFAULTS, SOLUTION, UNCOMPARED = "defaults", "solution", "nbval-ignore-output"
# Calls that measure: into these module families, or the harness functions named here.
MEASURING_MODULES = (
    "fastloops_helpers.experiments",
    "fastloops_helpers.load",
    "fastloops_helpers.data",
    "fastloops_helpers.teach",
    "fastloops_helpers.models",
)
HARNESS = {
    "measure.interleaved",
    "measure.measure",
    "measure.per_call",
    "measure.drain",
    "measure.steps.compare_steps",
    "timeline.record",
    "diagnose",
    "torch.set_num_threads",
}
# Calls that never measure, whatever they are given.
NOT_MEASURING = {
    "print",
    "measure.show",
    "measure.predicted",
    "measure.save_results",
    "plots.save",
    "len",
    "str",
    "format",
    "round",
    "float",
    "int",
}
RESULTS_WRITERS = ("save_results", "plots.save", "claims.save", "write_text(", "savefig(")


def _parse(source: str) -> ast.Module:
    """Parse `source` (see `_ast_safe`)."""
    return _ast_safe(ast.parse, source)


def _ast_safe(parse: Callable[[Any], T], arg: Any) -> T:
    """Call `parse(arg)` with the garbage collector paused, and once more on CPython 3.11's spurious SystemError.

    CPython 3.11 keeps the AST constructor's depth counter per interpreter (python/cpython#106905): a collection
    during a parse can run finalizers that parse or compile too, and the counter then trips
    "AST constructor recursion depth mismatch" (seen under make test, always on a shown cell of notebook 09).
    The source is fine, and a second parse succeeds.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            return parse(arg)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
            return parse(arg)
    finally:
        if enabled:
            gc.enable()


def _strip(node: ast.AST) -> str:
    """Return the syntax tree of `node` as text, without docstrings or positions."""
    node = _parse(ast.unparse(node))  # a fresh copy
    for sub in ast.walk(node):
        body = getattr(sub, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            sub.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]  # getattr found a list body
    return ast.dump(node, include_attributes=False)


def _definitions(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    return [n for n in _parse(source).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def defined_names(source: str) -> list[str]:
    """Return the names of the functions and classes a cell defines at its top level."""
    return [n.name for n in _definitions(source)]


def knobs(source: str) -> list[str]:
    """Return the names a defaults cell assigns at its top level, in order."""
    names: list[str] = []
    for node in _parse(source).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and n.id not in names]
    return names


def _code(cell: Any) -> ast.Module:
    """Parse a code cell, leaving out IPython's magics and shell lines."""
    lines = [line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return _parse("\n".join(lines))


def _imports(nb: Any) -> dict[str, str]:
    """Return {name bound in the notebook: the dotted module path or object it came from}."""
    bound: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(_code(cell)):
            if isinstance(node, ast.ImportFrom) and node.module:
                bound |= {(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                bound |= {(a.asname or a.name.split(".")[0]): a.name for a in node.names}
    return bound


def _measuring(func: ast.AST, imports: dict[str, str], local: set[str]) -> bool:
    """Whether a call to `func` measures: the harness, a package stage, or a notebook function that does."""
    name = ast.unparse(func)
    if name in NOT_MEASURING:
        return False
    if name in HARNESS or name.split("(")[0] in local:
        return True
    root = name.split(".")[0].split("(")[0]
    dotted = imports.get(root, "")
    if dotted.startswith("fastloops_helpers.") and dotted.count(".") == 1 and root not in ("config", "measure"):
        dotted = _public_home(root)
    return dotted.startswith(MEASURING_MODULES)


def _public_home(name: str) -> str:
    """Return where a name exported from the package root is defined (BatchLoader -> fastloops_helpers.load...)."""
    import fastloops_helpers

    obj = getattr(fastloops_helpers, name, None)
    return getattr(obj, "__module__", "") or ""


def _measuring_functions(nb: Any, imports: dict[str, str]) -> set[str]:
    """Return the notebook's own functions whose bodies make a measuring call (to a fixed point)."""
    defs = {
        n.name: n
        for c in nb.cells
        if c.cell_type == "code"
        for n in _code(c).body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    local: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, node in defs.items():
            if name not in local and any(
                isinstance(c, ast.Call) and _measuring(c.func, imports, local) for c in ast.walk(node)
            ):
                local.add(name)
                changed = True
    return local


def unreached_knobs(nb: Any) -> list[str]:
    """Return the defaults-cell names that never reach a measuring call, directly or through assignments."""
    cells = [c for c in nb.cells if c.cell_type == "code"]
    index = next(i for i, c in enumerate(cells) if DEFAULTS in c.metadata.get("tags", []))
    imports = _imports(nb)
    local = _measuring_functions(nb, imports)
    carriers = {k: {k} for k in knobs(cells[index].source)}  # knob -> names that carry its value
    reached: set[str] = set()
    for cell in cells[index:]:
        tree = _code(cell)
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension))
                and cell is not cells[index]
            ):
                value = node.iter if isinstance(node, (ast.For, ast.comprehension)) else node.value
                targets = [node.target] if not isinstance(node, ast.Assign) else node.targets
                used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
                for names in carriers.values():
                    if used & names:
                        names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            if isinstance(node, ast.Call) and _measuring(node.func, imports, local):
                args = list(node.args) + [k.value for k in node.keywords] + [node.func]
                used = {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}
                reached.update(k for k, names in carriers.items() if used & names)
    return [k for k in carriers if k not in reached]


def exercises(nb: Any) -> list[tuple[str, Any]]:
    """Return (exercise text, the code cell after it or None) for each markdown cell after `## Exercises`."""
    cells = list(nb.cells)
    start = next(
        (i for i, c in enumerate(cells) if c.cell_type == "markdown" and re.search(r"(?m)^##\s+Exercises", c.source)),
        None,
    )
    if start is None:
        return []
    out = []
    for i in range(start + 1, len(cells)):
        if cells[i].cell_type == "markdown" and cells[i].source.strip():
            following = cells[i + 1] if i + 1 < len(cells) and cells[i + 1].cell_type == "code" else None
            out.append((cells[i].source, following))
    return out


def solution_problems(text: str, cell: Any) -> list[str]:
    """Return what is wrong with an exercise's solution cell (empty when it follows the rules)."""
    if cell is None:
        return ["no code cell follows the exercise"]
    tags = cell.metadata.get("tags", [])
    problems = [f"tag the solution `{t}`" for t in (SOLUTION, UNCOMPARED) if t not in tags]
    body = _code(cell).body
    if not body or not (isinstance(body[-1], ast.Assert) or skips_without_hardware(body[-1])):
        problems.append("end the solution with an assert on a structural or wide-margin property")
    if any(w in cell.source for w in RESULTS_WRITERS):
        problems.append("a solution must not write to results/ (save_results, plots.save, files)")
    if not text.strip():
        problems.append("the exercise text is empty")
    return problems


def skips_without_hardware(node: ast.stmt) -> bool:
    """Return whether `node` is `if COND: ... assert ...` with `else: print("... skipped")` (a GPU-only exercise)."""
    return (
        isinstance(node, ast.If)
        and bool(node.body)
        and isinstance(node.body[-1], ast.Assert)
        and bool(node.orelse)
        and all(isinstance(s, ast.Expr) and "skip" in ast.unparse(s).lower() for s in node.orelse)
    )


def leaking_solutions(nb: Any) -> list[str]:
    """Return the names a solution assigns that a later cell reads without assigning them itself."""
    cells = [c for c in nb.cells if c.cell_type == "code"]
    problems = []
    for i, cell in enumerate(cells):
        if SOLUTION not in cell.metadata.get("tags", []):
            continue
        stored = {n.id for n in ast.walk(_code(cell)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        stored |= {n.name for n in _code(cell).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        for later in cells[i + 1 :]:
            tree = _code(later)
            own = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            own |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            own |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
            read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            leaked = (read & stored) - own
            if leaked:
                problems.append(f"a later cell reads {', '.join(sorted(leaked))} set by a solution")
    return problems


def _keys(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    """Return what identifies a definition as a copy: its tree without docstrings, with and without its name."""
    if sum(isinstance(n, ast.stmt) for n in ast.walk(node)) <= COPY_MIN_STATEMENTS:
        return []
    renamed = copy.copy(node)
    renamed.name = "_"
    return [_strip(node), _strip(renamed)]


def _all_definitions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


@functools.cache
def package_definitions() -> dict[str, str]:
    """Return {key of every function, method and class in the library and the book: where it is}, for `copies`."""
    index: dict[str, str] = {}
    top = Path(fastloops_helpers.__file__).resolve().parents[1]  # the checkout: paths as the project names them
    for package in (fastloops_helpers, fastloops_book):
        for path in sorted(Path(package.__file__).resolve().parent.rglob("*.py")):
            for node in _all_definitions(_parse(path.read_text(encoding="utf-8"))):
                for key in _keys(node):
                    index.setdefault(key, f"{path.relative_to(top).as_posix()}:{node.lineno} {node.name}")
    return index


def copies(nb: Any) -> list[str]:
    """Return the definitions in a notebook's cells that copy package code."""
    index = package_definitions()
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for node in _all_definitions(_code(cell)):
            where = next((index[k] for k in _keys(node) if k in index), "")
            if where:
                found.append(f"cell {i}: {node.name} copies {where} (render it with show_code instead)")
    return found
