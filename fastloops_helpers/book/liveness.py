"""Is what a notebook shows what it runs? Slow down every function it shows, run it, and see every figure move.

The edited run does what a student would: every function and method defined in a code cell is made `SLOWDOWN`
times as slow, and at least `SLEEP_S` slower, per call and per stretch between two `yield`s (it sleeps
`SLOWDOWN - 1` times as long as it ran, in a `finally` and before each yield), and every package object the
notebook renders with `show_code(...)` is slowed the same way in the kernel (its code object is replaced, so
every reference to it, workers forked later included, runs the slow copy). Solution cells are left out of both runs.
Every timing figure the notebook saves (a duration or a rate, named with its unit) must then move the slow
way by at least `FACTOR` against an unedited run. A figure that does not move was timed from code the
notebook does not show.

Package code that runs in a process the notebook starts afresh (torchrun's ranks) is slowed there too: in the
slowed run, `slow` lists what it slowed in the environment (`INHERIT`), and that process's main calls
`slow_inherited()`.

`python -m fastloops_helpers.book.liveness notebooks/NN_topic.ipynb ...` prints the figures, both runs side by
side, at the smoke scale; `tests/test_liveness.py` runs it on every timing notebook.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import os
import re
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import torch

SLEEP_S = 0.002  # the least a slowed call (or the stretch between two yields) is made to wait
SLOWDOWN = 3  # a shown function takes this many times as long (x3 against x1.5: a busy machine's swings pass)
FACTOR = 1.5  # a duration must grow, a rate shrink, at least this much
START = "_liveness_t = _liveness_now()"
SLEEP = "_liveness_stall(_liveness_t, {s})"
IMPORT = "from fastloops_helpers.book.liveness import now as _liveness_now, stall as _liveness_stall"
DURATION = re.compile(r"(?:^|_)(?:s|ms|us|ns)(?:_|$)")
RATE = re.compile(r"(?:^|_)per_s(?:_|$)")
INTERVAL = re.compile(r"_ci_(?:low|high)$")
SHOW = "show_code"
INHERIT = "FASTLOOPS_LIVENESS_SLOWED"  # "module:qualname:seconds;..." slowed in a liveness run's kernel


@torch.compiler.disable  # run at each call, not read once while torch.compile traces a slowed function
def now() -> float:
    """Return the clock a slowed function reads when it starts (and after each yield)."""
    return time.perf_counter()


@torch.compiler.disable
def stall(start: float, seconds: float) -> None:
    """Sleep `SLOWDOWN - 1` times as long as the code since `start` took, and at least `seconds`."""
    time.sleep(max(seconds, (SLOWDOWN - 1) * (time.perf_counter() - start)))


def _parseable(source: str) -> str:
    """Return `source` with IPython magics and shell lines blanked, line numbers kept."""
    return "\n".join("#" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


class _Slowed(ast.NodeTransformer):
    """Make every function `SLOWDOWN` times as slow, and at least `seconds` slower, per call and per yield."""

    def __init__(self, seconds: float):
        self.sleep = SLEEP.format(s=seconds)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)  # nested functions first
        doc = node.body[:1] if _docstring(node.body[0]) else []
        body = self._around_yields(node.body[len(doc) :] or [ast.Pass()])
        node.body = [*doc, *_stmts(START), ast.Try(body=body, handlers=[], orelse=[], finalbody=_stmts(self.sleep))]
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def _around_yields(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        """Return `stmts` with each yield statement of this function (not nested ones) slowed and re-timed."""
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.append(stmt)
                continue
            if _yields(stmt):
                out += [*_stmts(self.sleep), stmt, *_stmts(START)]
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    setattr(stmt, field, self._around_yields(inner))
            for part in getattr(stmt, "handlers", []) + getattr(stmt, "cases", []):
                part.body = self._around_yields(part.body)
            out.append(stmt)
        return out


def _stmts(source: str) -> list[ast.stmt]:
    return ast.parse(source).body


def _yields(stmt: ast.stmt) -> bool:
    value = getattr(stmt, "value", None)
    return isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) and isinstance(value, (ast.Yield, ast.YieldFrom))


def _docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def slowed_source(source: str, seconds: float = SLEEP_S) -> str:
    """Return a cell's source with every function (methods and nested ones too) slowed; other lines kept."""
    tree = ast.parse(_parseable(source))
    lines = source.splitlines()
    for stmt in reversed(tree.body):
        if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(stmt)):
            continue
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        slowed = ast.fix_missing_locations(_Slowed(seconds).visit(copy.deepcopy(stmt)))
        lines[first - 1 : stmt.end_lineno] = ast.unparse(slowed).splitlines()
    return "\n".join(lines)


def slow(*objs: Any, seconds: float = SLEEP_S) -> list[str]:
    """Slow package functions, methods and classes (each method) in place; return what was slowed.

    In a liveness run (`INHERIT` in the environment), each is also listed there for `slow_inherited`.
    """
    done = []
    for obj in objs:
        for func in _targets(obj):
            _slow_function(func, seconds)
            done.append(func.__qualname__)
            if INHERIT in os.environ:
                os.environ[INHERIT] += f"{func.__module__}:{func.__qualname__}:{seconds};"
    return done


def slow_inherited() -> list[str]:
    """Slow what the liveness run's kernel slowed (`INHERIT`), in a process it started; return what was slowed.

    For package code run by `python -m MODULE` (torchrun's ranks): MODULE's own functions are those of
    `__main__`. Outside a liveness run it does nothing.
    """
    main = sys.modules.get("__main__")
    main_name = getattr(getattr(main, "__spec__", None), "name", None)
    done = []
    for entry in filter(None, os.environ.get(INHERIT, "").split(";")):
        module, qualname, seconds = entry.rsplit(":", 2)
        obj: Any = main if module == main_name else importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part, None)  # None for a nested function (`<locals>`): not reachable by name
        for func in _targets(obj) if obj is not None else []:
            _slow_function(func, float(seconds))
            done.append(func.__qualname__)
    return done


def _targets(obj: Any) -> list[Any]:
    """Return the plain functions behind `obj` (a class's own methods, a property's getter, a bound method)."""
    if inspect.isclass(obj):
        found = []
        for value in vars(obj).values():
            value = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if (
                inspect.isfunction(value)
                and value.__qualname__.startswith(obj.__qualname__ + ".")
                and _has_source(value)
            ):
                found.append(value)
        return found
    if isinstance(obj, property):
        return [obj.fget]
    return [inspect.unwrap(getattr(obj, "__func__", obj))]


def _has_source(func: Any) -> bool:
    """Whether `func` was written in a file (a dataclass's or tensorclass's generated `__init__` was not)."""
    try:
        inspect.getsource(func)
    except (OSError, TypeError):
        return False
    return True


def _slow_function(func: Any, seconds: float) -> None:
    """Replace `func.__code__` with a slowed compile of its own source, in its own module's globals."""
    node = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    node.decorator_list = []
    node.name = "__slowed__"  # not its own name: a recursive function must still find itself in its globals
    source = ast.unparse(ast.fix_missing_locations(_Slowed(seconds).visit(node)))
    free = func.__code__.co_freevars  # e.g. __class__ for super(): compile inside a scope that binds them
    outer = "def __outer__():\n" + "".join(f"    {v} = None\n" for v in free)
    outer += textwrap.indent(source, "    ") + "\n    return __slowed__\n"
    scope: dict[str, Any] = {}
    func.__globals__.update(_liveness_now=now, _liveness_stall=stall)
    exec(compile(outer, inspect.getsourcefile(func) or "<slowed>", "exec"), func.__globals__, scope)
    func.__code__ = scope["__outer__"]().__code__.replace(co_name=func.__code__.co_name)


def edited(nb: Any, seconds: float = SLEEP_S) -> Any:
    """Return a copy of notebook `nb` as the liveness run executes it: cells slowed, renders slowed, no solutions."""
    out = copy.deepcopy(nb)
    cells = [_new_cell(IMPORT + "  # what a slowed function calls")]
    for cell in _without_solutions(out).cells:
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        cell.source = slowed_source(cell.source, seconds)
        cells.append(cell)
        shown = _shown_objects(cell.source)
        if shown:
            cells.append(_new_cell(f"__import__('fastloops_helpers.book.liveness').book.liveness.slow({shown})"))
    out.cells = cells
    return out


def _shown_objects(source: str) -> str:
    """Return the arguments of every `show_code(...)` call in a cell, joined for one `slow(...)` call."""
    calls = [n for n in ast.walk(ast.parse(_parseable(source))) if isinstance(n, ast.Call)]
    return ", ".join(ast.unparse(a) for c in calls if ast.unparse(c.func).endswith(SHOW) for a in c.args)


def _new_cell(source: str) -> Any:
    import nbformat

    return nbformat.v4.new_code_cell(source)


def _without_solutions(nb: Any) -> Any:
    nb.cells = [c for c in nb.cells if "solution" not in c.metadata.get("tags", [])]
    return nb


def run(nb: Any, folder: Path, results: Path) -> dict[str, float]:
    """Execute `nb` at the smoke scale, unwarped, saving into `results`; return every figure it saved."""
    from nbclient import NotebookClient

    env = {k: v for k, v in os.environ.items() if k != "FASTLOOPS_WARP"}
    env |= {"FASTLOOPS_SCALE": "smoke", "FASTLOOPS_RESULTS": str(results), INHERIT: ""}
    NotebookClient(
        nb,
        kernel_name="python3",
        timeout=900,
        resources={"metadata": {"path": str(folder)}},
        extra_arguments=["--IPKernelApp.capture_fd_output=False"],
    ).execute(env=env)
    figures: dict[str, float] = {}
    for path in sorted(results.glob("*.json")):
        figures |= {f"{path.stem}:{k}": v for k, v in json.loads(path.read_text()).get("figures", {}).items()}
    return figures


def timing(name: str) -> str:
    """Return "duration", "rate" or "" for a figure's name (its unit says which; intervals are left out)."""
    key = name.split(":")[-1]
    if INTERVAL.search(key):
        return ""
    return "rate" if RATE.search(key) else "duration" if DURATION.search(key) else ""


def moves(before: dict[str, float], after: dict[str, float]) -> list[tuple[str, float, float, bool]]:
    """Return (figure, unedited, slowed, moved) for each timing figure of the unedited run."""
    rows = []
    for name, old in before.items():
        kind = timing(name)
        if not kind:
            continue
        new = after.get(name, float("nan"))
        moved = new >= old * FACTOR if kind == "duration" else new * FACTOR <= old
        rows.append((name, old, new, moved))
    return rows


def check(path: str | Path, seconds: float = SLEEP_S) -> list[tuple[str, float, float, bool]]:
    """Run notebook `path` unedited and slowed (smoke scale); return `moves` of its timing figures."""
    import nbformat

    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        before = run(_without_solutions(copy.deepcopy(nb)), path.parent, Path(tmp, "unedited"))
        after = run(edited(nb, seconds), path.parent, Path(tmp, "slowed"))
    return moves(before, after)


def main(paths: list[str]) -> int:
    """Print each notebook's timing figures, unedited and slowed; return 1 if one did not move."""
    failed = 0
    for path in paths:
        rows = check(path)
        print(f"{path}: {sum(r[3] for r in rows)} of {len(rows)} timing figures moved (x{FACTOR} or more)")
        for name, old, new, moved in rows:
            print(f"  {'moved ' if moved else 'STILL '} {name}: {old:.4g} -> {new:.4g}")
        failed += not rows or not all(r[3] for r in rows)
    return int(failed > 0)


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
