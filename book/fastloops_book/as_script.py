"""Run a notebook without a Jupyter kernel: its code cells as one script, in a fresh interpreter.

A benchmark is its notebook's protocol (`python -m fastloops_book.bench NAME`), and it must run where no
kernel can be installed (a GPU machine without network). So the notebook's code cells, in order, become one
script: the worked solutions are left out (an exercise is the reader's, not the protocol) unless asked for
(`make gpu-check` runs them), and each knob given as `NAME=VALUE` is assigned right after the defaults cell,
where the notebook's configuration lives (read and checked as `knobs.py` says), so every call that measures
receives it. The committed notebook is only read, never changed.
`python -m fastloops_book.as_script NOTEBOOK RESULTS SCALE [--solutions]` runs one from the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from . import knobs as knobs_module
from . import runner
from .instruments import hooks

PREAMBLE = """\
try:  # a kernel's display(); print where IPython is missing
    from IPython.display import display
except ImportError:
    display = print
"""


def script(notebook: Path, knobs: dict[str, str] | None = None, solutions: bool = False) -> str:
    """Return `notebook`'s code cells as one script: solutions left out (kept with `solutions`), `knobs` set after
    the defaults (`runner.prepared`)."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))  # plain JSON: no Jupyter package needed
    cells = runner.prepared(nb, notebook.name, knobs, solutions)["cells"]
    return "\n\n".join([PREAMBLE] + [runner.source(c) for c in cells if c["cell_type"] == "code"]) + "\n"


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
    # the library and the book as this process found them, even where they are not installed (a checkout)
    checkout = str(Path(__file__).resolve().parents[2])
    env = hooks.environment({**env, "PYTHONPATH": os.pathsep.join(filter(None, (checkout, env.get("PYTHONPATH"))))})
    # run as a kernel runs a cell: the script is not __main__'s file, so a spawned or forkserver worker does not
    # execute the whole notebook again on start-up (it would, with `python script.py`)
    run_as_cells = (  # a bad knob stops it with its one line (knobs.py), no traceback
        "import sys\nfrom fastloops_book.knobs import EXIT, KnobError\np = sys.argv[1]\n"
        "try:\n    exec(compile(open(p, encoding='utf-8').read(), p, 'exec'))\n"
        "except KnobError as e:\n    print(e, file=sys.stderr)\n    sys.exit(EXIT)"
    )
    done = subprocess.run([sys.executable, "-c", run_as_cells, str(path)], cwd=notebook.parent, env=env, check=False)
    if done.returncode == knobs_module.EXIT:
        raise SystemExit(knobs_module.EXIT)  # its one line is printed
    if done.returncode != 0:
        raise SystemExit(f"{notebook.name} failed (exit {done.returncode}) at the {scale} scale; script: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.as_script", description=__doc__)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("results", type=Path, help="the folder its results are saved in (and its script)")
    parser.add_argument("scale")
    parser.add_argument("--solutions", action="store_true", help="run the exercises' worked solutions too")
    args = parser.parse_args()
    run(args.notebook, args.results, args.scale, solutions=args.solutions)
