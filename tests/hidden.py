"""Stand-ins that hide installed packages from a child process, as on a bare torch machine (test code)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
_DEPENDENCIES = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
# what a bare machine with the core install can import: pyproject's dependencies, as module names
CORE = tuple({"Pillow": "PIL"}.get(name, name) for name in (re.split(r"[<>=!~;\[ ]", d)[0] for d in _DEPENDENCIES))


def hide(folder: Path, *packages: str) -> dict[str, str]:
    """Return an environment whose PYTHONPATH starts with stand-ins for `packages` that raise ImportError.

    Each also gets metadata of version 0: torch decides from optree's version whether to import it (at
    `import torch._dynamo`), and takes a version below its minimum for no optree, as on a bare machine.
    """
    for name in packages:
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is hidden by a test')\n")
        (folder / f"{name}-0.dist-info").mkdir(exist_ok=True)
        (folder / f"{name}-0.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0\n")
    path = os.pathsep.join([str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}
