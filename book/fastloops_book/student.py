"""Write the students' copies of the notebooks for a workshop: the prose and code kept, nothing answered.

`python -m fastloops_book.student [--out results/student] [NOTEBOOK ...]` writes one copy per notebook
with every output and execution count removed and each exercise's worked solution (a cell tagged `solution`)
replaced by an empty cell to answer in. fastbook's "clean" notebooks are the model. Explained in README.md,
"Present and read".
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

from fastloops_helpers import config

from .notebooks import SOLUTION, notebook_paths

ANSWER_HERE = "# Your answer: change a knob or a few lines, run, and print what you find.\n"


def student_copy(nb: Any) -> Any:
    """Return a copy of notebook `nb` without outputs, counts or solutions (each solution becomes an empty cell)."""
    import nbformat

    out = copy.deepcopy(nb)
    out.cells = [
        nbformat.v4.new_code_cell(ANSWER_HERE, metadata={"tags": ["exercise"]})  # each with an id of its own
        if cell.cell_type == "code" and SOLUTION in cell.metadata.get("tags", [])
        else cell
        for cell in out.cells
    ]
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return out


def write(paths: list[Path], folder: Path) -> list[Path]:
    """Write the student copy of each notebook in `paths` into `folder`; return the paths written."""
    import nbformat

    folder.mkdir(parents=True, exist_ok=True)
    for path in paths:
        nbformat.write(student_copy(nbformat.read(path, as_version=4)), folder / path.name)
    return [folder / path.name for path in paths]


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and write the copies."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.student", description=__doc__)
    parser.add_argument("notebooks", nargs="*", help="paths (default: every notebooks/NN_*.ipynb)")
    parser.add_argument("--out", type=Path, help="folder (default results/student)")
    args = parser.parse_args(argv)
    folder = args.out or config.results_dir() / "student"
    written = write(notebook_paths(args.notebooks), folder)
    print(f"{len(written)} student copies in {config.rel(folder)} (no outputs, no solutions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
