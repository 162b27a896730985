"""Is what a notebook shows what it runs? Slow down every function it shows, run it, and see every figure move.

The edited run does what a student would: every function and method defined in a code cell is made
`instruments.slowdown.SLOWDOWN` times as slow, and at least `SLEEP_S` slower, per call and per stretch between two
`yield`s (it sleeps that much longer, in a `finally` and before each yield), and every package object the
notebook renders with `show_code(...)` is slowed the same way in the kernel (its code object is replaced, so
every reference to it, workers forked later included, runs the slow copy). Solution cells are left out of both runs.
Every timing figure the notebook saves (a duration or a rate, named with its unit) must then move the slow
way by at least `FACTOR` against an unedited run. A figure that does not move was timed from code the
notebook does not show.

Package code that runs in a process the notebook starts afresh (torchrun's ranks) is slowed there too: in the
slowed run, `slow` lists what it slowed in the environment (`INHERIT`), and the run's `instruments/site` on
the PYTHONPATH makes every Python process started later call `instruments.slowdown.slow_inherited()` as soon as
it imports the library. No entry point calls it.

`python -m fastloops_book.liveness notebooks/NN_topic.ipynb ...` prints the figures, both runs side by
side, at the smoke scale; `tests/test_liveness.py` runs it on every timing notebook.
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from . import runner
from .instruments.slowdown import IMPORT, INHERIT, SLEEP_S, parseable, slowed_source

FACTOR = 1.5  # a duration must grow, a rate shrink, at least this much
DURATION = re.compile(r"(?:^|_)(?:s|ms|us|ns)(?:_|$)")
RATE = re.compile(r"(?:^|_)per_s(?:_|$)")
INTERVAL = re.compile(r"_ci_(?:low|high)$")
SHOW = "show_code"


def edited(nb: Any, seconds: float = SLEEP_S) -> Any:
    """Return a copy of notebook `nb` as the liveness run executes it: cells slowed, renders slowed, no solutions."""
    import nbformat

    out = runner.prepared(nb, "the notebook")
    cells = [nbformat.v4.new_code_cell(IMPORT + "  # what a slowed function calls")]
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.source = slowed_source(cell.source, seconds)
        cells.append(cell)
        shown = _shown_objects(cell.source) if cell.cell_type == "code" else ""
        if shown:
            slow = "__import__('fastloops_book.instruments.slowdown').instruments.slowdown.slow"
            cells.append(nbformat.v4.new_code_cell(f"{slow}({shown})"))
    out.cells = cells
    return out


def _shown_objects(source: str) -> str:
    """Return the arguments of every `show_code(...)` call in a cell, joined for one `slow(...)` call."""
    calls = [n for n in ast.walk(ast.parse(parseable(source))) if isinstance(n, ast.Call)]
    return ", ".join(ast.unparse(a) for c in calls if ast.unparse(c.func).endswith(SHOW) for a in c.args)


def run(nb: Any, folder: Path, results: Path) -> dict[str, float]:
    """Execute `nb` at the smoke scale, unwarped, saving into `results`; return every figure it saved."""
    env = {k: v for k, v in os.environ.items() if k != "FASTLOOPS_WARP"}
    env |= {"FASTLOOPS_SCALE": "smoke", "FASTLOOPS_RESULTS": str(results), INHERIT: ""}
    runner.in_kernel(nb, folder, env, timeout=900)
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
        before = run(runner.prepared(nb, path.name), path.parent, Path(tmp, "unedited"))
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
