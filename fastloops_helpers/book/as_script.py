"""Run a notebook without a Jupyter kernel: its code cells as one script, in a fresh interpreter.

A benchmark is its notebook's protocol (`python -m fastloops_helpers.book.bench NAME`), and it must run where no
kernel can be installed (a GPU machine without network). So the notebook's code cells, in order, become one
script: the worked solutions are left out (an exercise is the reader's, not the protocol) unless asked for
(`make gpu-check` runs them), and each knob given as `NAME=VALUE` is assigned right after the defaults cell,
where the notebook's configuration lives, so every call that measures receives it. The committed notebook is
only read, never changed. `python -m fastloops_helpers.book.as_script NOTEBOOK RESULTS SCALE [--solutions]`
runs one from the command line.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

DEFAULTS = "defaults"  # the tag of the cell that holds a notebook's configuration
SOLUTION = "solution"  # a worked answer to an exercise: not part of the protocol
PREAMBLE = """\
try:  # a kernel's display(); print where IPython is missing
    from IPython.display import display
except ImportError:
    display = print
"""


def knobs_of(source: str) -> list[str]:
    """Return the names the defaults cell `source` assigns, in order."""
    names = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            names += [t.id for t in elts if isinstance(t, ast.Name)]
    return names


def script(notebook: Path, knobs: dict[str, str] | None = None, solutions: bool = False) -> str:
    """Return `notebook`'s code cells as one script: solutions left out (kept with `solutions`), `knobs` assigned
    after the defaults."""
    knobs = dict(knobs or {})
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]  # plain JSON: no Jupyter package needed
    parts = [PREAMBLE]
    for cell in cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] != "code" or (SOLUTION in tags and not solutions):
            continue
        source = "".join(cell["source"])  # nbformat stores a list of lines (or one string)
        parts.append(source)
        if DEFAULTS in tags:
            unknown = sorted(set(knobs) - set(knobs_of(source)))
            if unknown:
                raise SystemExit(
                    f"{notebook.name} has no knob {', '.join(unknown)} in its defaults cell; "
                    f"its knobs: {', '.join(knobs_of(source))}"
                )
            parts += [f"{name} = {value}  # set by the benchmark" for name, value in knobs.items()]
            knobs = {}
    if knobs:
        raise SystemExit(f"{notebook.name} has no cell tagged {DEFAULTS!r}: cannot set {', '.join(knobs)}")
    return "\n\n".join(parts) + "\n"


def run(
    notebook: Path, results: Path, scale: str, knobs: dict[str, str] | None = None, solutions: bool = False
) -> None:
    """Execute `notebook`'s script at `scale` in a fresh interpreter, its results saved into the folder `results`.

    The script runs where the notebook's kernel would (the notebook's folder) with a non-interactive plot
    backend and this package importable; its output streams to this process's. Raises SystemExit when it fails.
    """
    path = results / f"{notebook.stem}.script.py"
    path.write_text(script(notebook, knobs, solutions), encoding="utf-8")
    env = {**os.environ, "FASTLOOPS_SCALE": scale, "FASTLOOPS_RESULTS": str(results.resolve()), "MPLBACKEND": "Agg"}
    # the package as this process found it, even where it is not installed (a GPU machine runs it from the checkout)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    # run as a kernel runs a cell: the script is not __main__'s file, so a spawned or forkserver worker does not
    # execute the whole notebook again on start-up (it would, with `python script.py`)
    run_as_cells = "import sys; p = sys.argv[1]; exec(compile(open(p, encoding='utf-8').read(), p, 'exec'))"
    done = subprocess.run([sys.executable, "-c", run_as_cells, str(path)], cwd=notebook.parent, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{notebook.name} failed (exit {done.returncode}) at the {scale} scale; script: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m fastloops_helpers.book.as_script", description=__doc__)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("results", type=Path, help="the folder its results are saved in (and its script)")
    parser.add_argument("scale")
    parser.add_argument("--solutions", action="store_true", help="run the exercises' worked solutions too")
    args = parser.parse_args()
    run(args.notebook, args.results, args.scale, solutions=args.solutions)
