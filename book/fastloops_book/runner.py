"""The one way a notebook is run: a notebook, its knobs and an edit, then a kernel or a plain script.

`prepared` makes the copy every run executes: solution cells left out unless asked for, and the knobs set in a
cell right after the defaults cell (read and checked as `knobs.py` says). `in_kernel` executes a copy in a fresh
Jupyter kernel (`make notebooks`, `make reproduce`, liveness, the knob tests); `as_script.run` executes it with no
kernel (bench, gpu-check). Both start their processes with the test instruments' folder on the PYTHONPATH
(`instruments/hooks.py`), which installs nothing unless the environment asks for the warp or the slowdown.

`python -m fastloops_book.runner pytest [ARGS ...]` runs pytest the same way (`make test`: nbval's kernels, the
unit tests' children, DataLoader's workers and torchrun's ranks all inherit the folder).
"""

from __future__ import annotations

import ast
import copy
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .instruments import hooks
from .knobs import assignments

DEFAULTS = "defaults"  # the tag of the cell that holds a notebook's configuration
SOLUTION = "solution"  # a worked answer to an exercise: not part of the protocol


def source(cell: Any) -> str:
    """Return a cell's source as one string (nbformat stores a list of lines, or one string)."""
    text = cell["source"]
    return "".join(text) if isinstance(text, list) else text


def knobs_of(text: str) -> list[str]:
    """Return the names the defaults cell's source `text` assigns, in order."""
    names = []
    for node in ast.parse(text).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            names += [t.id for t in elts if isinstance(t, ast.Name)]
    return names


def prepared(nb: Any, name: str, knobs: dict[str, str] | None = None, solutions: bool = False) -> Any:
    """Return a copy of notebook `nb` (named `name` in errors) as a run executes it.

    Solution cells are left out unless `solutions`; `knobs` ({name: text}) are set in a code cell inserted right
    after the defaults cell. Raises SystemExit on a knob the defaults cell does not assign.
    """
    out, knobs, cells = copy.deepcopy(nb), dict(knobs or {}), []
    for cell in out["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and SOLUTION in tags and not solutions:
            continue
        cells.append(cell)
        if cell["cell_type"] == "code" and DEFAULTS in tags and knobs:
            known = knobs_of(source(cell))
            unknown = sorted(set(knobs) - set(known))
            if unknown:
                raise SystemExit(
                    f"{name} has no knob {', '.join(unknown)} in its defaults cell; its knobs: {', '.join(known)}"
                )
            cells.append(
                {
                    "cell_type": "code",
                    "metadata": {},
                    "source": "\n".join(assignments(knobs)),
                    "outputs": [],
                    "execution_count": None,
                }
            )
            knobs = {}
    if knobs:
        raise SystemExit(f"{name} has no cell tagged {DEFAULTS!r}: cannot set {', '.join(knobs)}")
    out["cells"] = cells
    return out


def in_kernel(nb: Any, folder: Path, env: dict[str, str], timeout: int = 1800) -> Any:
    """Execute notebook `nb` in a fresh kernel started in `folder` with `env`; return it with its outputs.

    The kernel talks over local sockets, not TCP, and with fd capture off (under pytest ipykernel does not
    capture fd-level output, so a reference made with it on would hold lines nbval never sees).
    """
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    if not all(isinstance(c, nbformat.NotebookNode) for c in [nb, *nb["cells"]]):  # a knobs cell is a plain dict
        nb = nbformat.from_dict(nb)  # (a NotebookNode is run as it is: a failed run's outputs stay in it)
    sockets = Path(tempfile.mkdtemp(prefix="fastloops-kernel-"))
    local = Config({"KernelManager": {"transport": "ipc", "ip": str(sockets / "ipc")}})
    try:
        NotebookClient(
            nb,
            config=local,
            kernel_name="python3",
            timeout=timeout,
            record_timing=False,
            resources={"metadata": {"path": str(Path(folder).resolve())}},
            extra_arguments=["--IPKernelApp.capture_fd_output=False"],
        ).execute(env=hooks.environment(env))
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    return nb


def main(argv: list[str] | None = None) -> None:
    """Replace this process with pytest, given `argv` after "pytest", the instruments' folder on its PYTHONPATH."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["pytest"]:
        raise SystemExit("usage: python -m fastloops_book.runner pytest [PYTEST ARGS ...]")
    os.execve(sys.executable, [sys.executable, "-m", "pytest", *args[1:]], hooks.environment(dict(os.environ)))


if __name__ == "__main__":
    main()
