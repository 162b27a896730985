"""Slow a function down in place: the liveness check's instrument (`liveness.py` explains the check).

`slowed_source(cell)` rewrites a cell's functions, `slow(obj, ...)` replaces a package function's code object
(so every reference to it runs the slowed code, workers forked later included), `slow_inherited()` repeats in
a process started afresh (torchrun's ranks) what a liveness run's kernel slowed. A slowed function takes
`SLOWDOWN` times as long, and at least `SLEEP_S` longer, per call and per stretch between two `yield`s.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import os
import textwrap
import time
from typing import Any

import torch

SLEEP_S = 0.002  # the least a slowed call (or the stretch between two yields) is made to wait
SLOWDOWN = 3  # a shown function takes this many times as long (x3 against x1.5: a busy machine's swings pass)
START = "_liveness_t = _liveness_now()"
SLEEP = "_liveness_stall(_liveness_t, {s})"
IMPORT = "from fastloops_book.instruments.slowdown import now as _liveness_now, stall as _liveness_stall"
INHERIT = "FASTLOOPS_LIVENESS_SLOWED"  # "module:qualname:seconds;..." slowed in a liveness run's kernel


@torch.compiler.disable  # run at each call, not read once while torch.compile traces a slowed function
def now() -> float:
    """Return the clock a slowed function reads when it starts (and after each yield)."""
    return time.perf_counter()


@torch.compiler.disable
def stall(start: float, seconds: float) -> None:
    """Sleep `SLOWDOWN - 1` times as long as the code since `start` took, and at least `seconds`."""
    time.sleep(max(seconds, (SLOWDOWN - 1) * (time.perf_counter() - start)))


def parseable(source: str) -> str:
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
    tree = ast.parse(parseable(source))
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

    Called by `hooks.install` in every process a liveness run starts, once the library is imported (torchrun's
    ranks run `main` of their module by its name, not as `__main__`). Outside a liveness run it does nothing.
    """
    done = []
    for entry in filter(None, os.environ.get(INHERIT, "").split(";")):
        module, qualname, seconds = entry.rsplit(":", 2)
        obj: Any = importlib.import_module(module)
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
