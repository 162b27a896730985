"""Exercise asserts that can fail: the assert shapes that pass whatever was measured, read from the `ast`.

A solution (the code cell tagged `solution` after an exercise, CONTRIBUTING.md "A notebook", 8) ends with an assert
that would fail if its answer were wrong. Every assert in a solution is checked for these shapes:

- **duration vs 0** (`a`): a `Compare` of a duration, time, rate, speed or ratio with the constant 0 in the
  direction that always holds (`x > 0`, `x >= 0`, `0 < x`, `0 <= x`), also inside `all()`/`any()` generators.
  "Duration" is judged by the names the compared expression reads (identifiers, attributes, string subscripts,
  the iterables of the comprehension that binds them, the values the solution assigned to them): a token
  `s`, `ms`, `us`, `ns`, `seconds`, `time(s)`, `wall`, `elapsed`, `rate(s)`, `speed`, `bandwidth`, `throughput`,
  `ratio`, `margin`, `speedup`, `share`, or a name ending in `_per_s`.
- **escape clause** (`b`): a `BoolOp` `or` whose first operand is `x is None` (or `not x`): where the escape holds
  (no GPU, no compiler) the assert checks nothing. Use the skip form below instead.
- **all over maybe-empty** (`c`): `all(...)` or `.all()` over a collection that no operand before it in the same
  assert, nor an earlier assert, shows to be non-empty (`x and ...`, `len(x) > 0`, `len(x) == 3`, `len(x) >= k`,
  `x.shape == (2, 2)`, `x[0]`, `x["key"]`). A literal tuple or list iterated is non-empty.
- **a quantity against itself** (`d`): a `Compare` whose two sides are the same expression up to constant factors
  (`a >= a`, `a >= 0.95 * a`), or a measured duration `>=`/`>` an expression of a configured sleep (a name with
  `sleep`, or `step` with a unit: `step_ms`, `step_s`): the loop's time contains that sleep, so it cannot miss.
- **ending** (`e`): the solution's last statement is an `assert`, or, for exercises that need hardware the machine
  may lack (the GPU-only exercises of issue 26), `if COND: ... assert ...` with `else: print("... skipped")`.

`python tests/test_exercises.py` prints every finding (notebook, cell index, exercise number, the assert).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SOLUTION = "solution"
DURATION_TOKENS = {
    "s", "ms", "us", "ns", "sec", "secs", "seconds", "time", "times", "wall", "elapsed", "duration", "durations",
    "rate", "rates", "speed", "speeds", "bandwidth", "throughput", "ratio", "ratios", "margin", "margins",
    "speedup", "share", "shares",
}  # fmt: skip
ALWAYS_HOLDS = {ast.Gt: "left", ast.GtE: "left", ast.Lt: "right", ast.LtE: "right"}  # which side is compared with 0


@dataclass(frozen=True)
class Finding:
    """One assert shape that cannot fail: the rule's letter, why, and the assert's source."""

    rule: str
    why: str
    code: str


def looks_timed(name: str) -> bool:
    """Return whether identifier or key `name` names a duration, rate, speed or ratio."""
    low = name.lower()
    tokens = set(re.split(r"[^a-z0-9]+", low))
    return bool(tokens & DURATION_TOKENS) or low.endswith("_per_s") or "seconds" in low


PASS_THROUGH = {"values", "items", "keys", "copy", "loc", "iloc", "at", "T", "to_numpy", "tolist", "numpy", "item"}
WRAPPERS = {"DataFrame", "Series", "dict", "list", "tuple", "array", "asarray", "tensor", "sorted", "min", "max",
            "sum", "abs", "float", "int", "round", "median", "mean"}  # fmt: skip


def leaf_words(node: ast.AST) -> set[str]:
    """Return the words that name what an expression is: `r["gb_per_s"]` -> gb_per_s, `a.b.step_s` -> step_s,
    `rates.values()` -> rates, `bandwidth.copy_bandwidth(...)` -> copy_bandwidth, `pd.DataFrame(d)` -> d's words."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return leaf_words(node.value) if node.attr in PASS_THROUGH else {node.attr}
    if isinstance(node, ast.Subscript):
        key = node.slice
        return {key.value} if isinstance(key, ast.Constant) and isinstance(key.value, str) else leaf_words(node.value)
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if isinstance(node.func, ast.Attribute) and name in PASS_THROUGH:
            return leaf_words(node.func.value)
        if name in WRAPPERS:
            return set().union(*map(leaf_words, [*node.args, *(k.value for k in node.keywords)]))
        return {name}
    if isinstance(node, ast.BinOp):
        return leaf_words(node.left) | leaf_words(node.right)
    if isinstance(node, ast.UnaryOp):
        return leaf_words(node.operand)
    if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
        return leaf_words(node.elt)
    if isinstance(node, ast.DictComp):
        return leaf_words(node.value)
    if isinstance(node, ast.Dict):
        return set().union(set(), *(leaf_words(v) for v in node.values))
    return set()


def sources_of(tree: ast.AST) -> dict[str, set[str]]:
    """Return, per name the solution binds (assignment, for loop, comprehension), the leaf words of its value."""
    bound: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        for target, value in pairs:
            for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                bound.setdefault(name, set()).update(leaf_words(value))
    return bound


def reads_timed(node: ast.AST, bound: dict[str, set[str]], depth: int = 3) -> bool:
    """Return whether expression `node` names a duration, directly or through up to `depth` bindings."""
    words, seen = leaf_words(node), set()
    for _ in range(depth + 1):
        if any(looks_timed(w) for w in words):
            return True
        new = {w2 for w in words - seen for w2 in bound.get(w, ())}
        seen |= words
        words = new - seen
    return False


def _zero(node: ast.AST, value: object = 0) -> bool:
    """Return whether `node` is the constant `value` (0 by default; False is not 0)."""
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value == value


def duration_vs_zero(test: ast.AST, bound: dict[str, set[str]]) -> list[str]:
    """Rule a: the comparisons in `test` of a duration with 0 that always hold (a range `0 < x < 1` is not one)."""
    found = []
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        sides = [cmp.left, *cmp.comparators]
        for i, op in enumerate(cmp.ops):
            side = ALWAYS_HOLDS.get(type(op))
            left, right = sides[i], sides[i + 1]
            other = left if side == "left" and _zero(right) else right if side == "right" and _zero(left) else None
            if other is not None and reads_timed(other, bound) and not _bounded_above(test, other):
                found.append(f"{ast.unparse(other)} compared with 0")
    return found


def _bounded_above(test: ast.AST, expr: ast.AST) -> bool:
    """Return whether `test` also compares `expr` with a non-zero upper bound (`x < 1`, `0 < x <= n`)."""
    key = ast.dump(expr)
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        sides = [cmp.left, *cmp.comparators]
        for i, op in enumerate(cmp.ops):
            below = isinstance(op, (ast.Lt, ast.LtE)) and ast.dump(sides[i]) == key and not _zero(sides[i + 1])
            above = isinstance(op, (ast.Gt, ast.GtE)) and ast.dump(sides[i + 1]) == key and not _zero(sides[i])
            if below or above:
                return True
    return False


def escape_clauses(test: ast.AST) -> list[str]:
    """Rule b: `x is None or ...` / `not x or ...`."""
    found = []
    for node in (n for n in ast.walk(test) if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.Or)):
        first = node.values[0]
        none = isinstance(first, ast.Compare) and isinstance(first.ops[0], ast.Is) and _zero(first.comparators[0], None)
        if none or (isinstance(first, ast.UnaryOp) and isinstance(first.op, ast.Not)):
            found.append(f"'{ast.unparse(first)} or ...' checks nothing when {ast.unparse(first)}")
    return found


def _roots(node: ast.AST) -> set[str]:
    """Return the variable names a collection expression hangs from (`ex1_rates.values()` -> ex1_rates)."""
    called = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - called


def non_empty(check: ast.AST) -> set[str]:
    """Return the names an expression shows to be non-empty (see rule c)."""
    names: set[str] = set()
    parts = check.values if isinstance(check, ast.BoolOp) and isinstance(check.op, ast.And) else [check]
    for part in parts:
        if isinstance(part, ast.Name):
            names.add(part.id)
        for sub in ast.walk(part):
            if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant):
                names |= _roots(sub.value)
            if isinstance(sub, ast.Compare):
                names |= _sized_by_compare(sub)
    return names


def _sized_by_compare(cmp: ast.Compare) -> set[str]:
    """Names whose len() (or .shape) a comparison bounds below by a positive constant."""
    sides = [cmp.left, *cmp.comparators]
    if not all(isinstance(op, (ast.Eq, ast.Gt, ast.GtE)) for op in cmp.ops):
        return set()
    positive = any(
        isinstance(s, ast.Constant) and isinstance(s.value, int) and (s.value > 0 or isinstance(op, ast.Gt))
        for s, op in zip(sides[1:], cmp.ops)
    ) or any(isinstance(s, ast.Tuple) and s.elts for s in sides[1:])
    if not positive:
        return set()
    names: set[str] = set()
    for side in sides:
        if isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id == "len":
            names |= _roots(side.args[0]) if side.args else set()
        elif isinstance(side, ast.Attribute) and side.attr == "shape":
            names |= _roots(side.value)
    return names


def _all_collections(node: ast.AST) -> list[ast.AST]:
    """The collections `node` applies all() to: the first generator's iterable, the argument, or `.all()`'s owner
    (for `x.all().all()`, the outer call only)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "all" and node.args:
        arg = node.args[0]
        return [arg.generators[0].iter] if isinstance(arg, (ast.GeneratorExp, ast.ListComp, ast.SetComp)) else [arg]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "all":
        owner = node.func.value
        while isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) and owner.func.attr == "all":
            owner = owner.func.value
        return [owner]
    return []


def _inner_alls(test: ast.AST) -> set[int]:
    """Return the ids of `.all()` calls that are the receiver of another `.all()` (counted once, as the outer)."""
    return {
        id(n.func.value)
        for n in ast.walk(test)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "all"
    }


def all_over_maybe_empty(test: ast.AST, checked: set[str]) -> list[str]:
    """Rule c: all() over a collection that neither `test` nor an earlier assert (`checked`) shows non-empty."""
    seen, inner, found = checked | non_empty(test), _inner_alls(test), []
    for node in ast.walk(test):
        if id(node) in inner:
            continue
        for coll in _all_collections(node):
            literal = isinstance(coll, (ast.Tuple, ast.List, ast.Set)) and coll.elts
            if not literal and not (_roots(coll) & seen):
                found.append(f"all() over {ast.unparse(coll)}, never shown non-empty")
    return found


def _strip_factors(node: ast.AST) -> ast.AST:
    """Return `node` without multiplication or division by constants."""
    while isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
        if isinstance(node.right, ast.Constant):
            node = node.left
        elif isinstance(node.left, ast.Constant) and isinstance(node.op, ast.Mult):
            node = node.right
        else:
            break
    return node


def _sleep_knob(name: str) -> bool:
    tokens = set(re.split(r"[^a-z0-9]+", name.lower()))
    return "sleep" in tokens or ("step" in tokens and bool(tokens & {"s", "ms", "us", "seconds"}))


def _sleep_only(node: ast.AST) -> bool:
    """Return whether `node` is built from a configured sleep (a variable such as `step_ms`) and no measured time."""
    knobs = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and _sleep_knob(n.id)}
    return bool(knobs) and not any(looks_timed(w) for w in leaf_words(node) - knobs)


def against_itself(test: ast.AST, bound: dict[str, set[str]]) -> list[str]:
    """Rule d: both sides the same quantity up to constant factors, or a measured time >= the sleep inside it."""
    found = []
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        sides = [cmp.left, *cmp.comparators]
        for i, op in enumerate(cmp.ops):
            left, right = sides[i], sides[i + 1]
            if isinstance(op, (ast.Lt, ast.LtE)):
                left, right = right, left
            elif not isinstance(op, (ast.Gt, ast.GtE, ast.Eq)):
                continue
            a, b = ast.dump(_strip_factors(left)), ast.dump(_strip_factors(right))
            if a == b and not isinstance(_strip_factors(left), ast.Constant):
                found.append(f"{ast.unparse(cmp)}: both sides are the same quantity")
            elif not isinstance(op, ast.Eq) and reads_timed(left, bound) and _sleep_only(right):
                found.append(f"{ast.unparse(cmp)}: a measured time against the sleep it contains")
    return found


def ending_problem(tree: ast.Module) -> list[str]:
    """Rule e: the last statement is an assert, or `if ...: ... assert` with `else: print("... skipped")`."""
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Assert):
        return []
    if isinstance(last, ast.If) and last.body and isinstance(last.body[-1], ast.Assert) and _prints_skipped(last):
        return []
    return ["the solution does not end with an assert (nor `if ...: assert ... else: print('... skipped')`)"]


def _prints_skipped(node: ast.If) -> bool:
    calls = [s.value for s in node.orelse if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
    return (
        bool(calls)
        and len(calls) == len(node.orelse)
        and all(
            isinstance(c.func, ast.Name) and c.func.id == "print" and "skip" in ast.unparse(c).lower() for c in calls
        )
    )


def shape_findings(source: str) -> list[Finding]:
    """Return every assert shape in solution `source` that cannot fail, and an ending problem if any."""
    tree = ast.parse(source)
    bound = sources_of(tree)
    found = [Finding("e", why, "") for why in ending_problem(tree)]
    checked: set[str] = set()
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assert)), key=lambda n: n.lineno):
        code = ast.unparse(node)
        found += [Finding("a", w, code) for w in duration_vs_zero(node.test, bound)]
        found += [Finding("b", w, code) for w in escape_clauses(node.test)]
        found += [Finding("c", w, code) for w in all_over_maybe_empty(node.test, checked)]
        found += [Finding("d", w, code) for w in against_itself(node.test, bound)]
        checked |= non_empty(node.test)
    return found


def solutions(path: Path) -> list[tuple[int, str, str]]:
    """Return (cell index, exercise number, source) of each solution cell in notebook `path`."""
    cells = json.loads(path.read_text())["cells"]
    out, number = [], "?"
    for i, cell in enumerate(cells):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and (m := re.match(r"\s*\*\*(\d+)\.\*\*", source)):
            number = m.group(1)
        if cell["cell_type"] == "code" and SOLUTION in cell.get("metadata", {}).get("tags", []):
            out.append((i, number, source))
    return out


def notebook_findings(path: Path) -> list[str]:
    """Return one line per finding in notebook `path`: cell index, exercise number, rule, why, the assert."""
    return [
        f"{path.name} cell {i} exercise {number}: ({f.rule}) {f.why}" + (f"\n    {f.code}" if f.code else "")
        for i, number, source in solutions(path)
        for f in shape_findings(source)
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercise_asserts_can_fail(path):
    found = notebook_findings(path)
    assert not found, f"{len(found)} assert shape(s) that cannot fail (see this file's docstring):\n" + "\n".join(found)


def test_every_notebook_has_solutions():
    assert NOTEBOOKS and all(solutions(p) for p in NOTEBOOKS)


def _rules(source: str) -> list[str]:
    return sorted(f.rule for f in shape_findings(source))


@pytest.mark.parametrize(
    ("source", "rules"),
    [
        ("t = bench()\nassert t > 0", []),  # `t` names no duration: not flagged
        ("wall_s = bench()\nassert wall_s > 0", ["a"]),
        ("ex1_one = bandwidth.copy_bandwidth(8)\nassert ex1_one > 0", ["a"]),  # through its assignment
        ("rates = {1: f()}\nassert len(rates) == 1 and all(r > 0 for r in rates.values())", ["a"]),
        ("rows = f()\nassert rows and all(0 <= r['img_per_s'] for r in rows)", ["a"]),
        ("assert x is None or x.sum() == 3", ["b"]),
        ("assert not ran or y == 2", ["b"]),
        ("rows = f()\nassert all(r['n'] == 3 for r in rows)", ["c"]),
        ("rows = f()\nassert rows and all(r['n'] == 3 for r in rows)", []),
        ("rows = f()\nassert len(rows) == 4\nassert all(r['n'] == 3 for r in rows)", []),
        ("b = f()\nassert all(torch.equal(x, b[0]) for x in b)", []),  # b[0] raises on an empty b
        ("assert all(f(n) for n in (1, 2))", []),
        ("t = f()\nassert (t.margin > 2).all()", ["c"]),
        ("t = f()\nassert t.shape == (2, 2) and (t > 1).all().all()", []),
        ("t = f()\nassert (t > 1).all().all() and len(t) == 2", []),  # the same assert, in any order
        ("share = f()\nassert 0 < share < 1", []),  # a range can fail
        ("x = measure_seconds()\nassert x.samples > 0", []),  # an attribute is named by itself
        ("a = f()\nassert a >= 0.95 * a", ["d"]),
        ("step_ms = 100\nrows = f()\nassert len(rows) > 0 and all(r['wall_s'] >= step_ms / 1000 for r in rows)", ["d"]),
        ("step_ms = 100\nwall_s = f()\nassert wall_s < 3 * step_ms / 1000", []),  # an upper bound can fail
        ("a, b = f(), g()\nassert b.figures.step_s > 2 * a.figures.step_s", []),  # two measured times
        ("x = f()\nprint(x)", ["e"]),
        ("if cuda:\n    y = f()\n    assert y == 3\nelse:\n    print('needs a GPU, skipped')", []),
        ("if cuda:\n    y = f()\n    assert y is None or y == 3\nelse:\n    print('needs a GPU, skipped')", ["b"]),
        ("if cuda:\n    assert f()\nelse:\n    y = 2", ["e"]),
    ],
)
def test_the_shapes_are_recognised(source, rules):
    assert _rules(source) == rules


if __name__ == "__main__":
    lines = [line for p in NOTEBOOKS for line in notebook_findings(p)]
    print("\n".join(lines) or "no findings")
    print(f"{len(lines)} finding(s)")
