"""What every saved result carries: the machine, the versions, the scale, the knobs, the repeats, the commit.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import config
from ..atomic import atomic_write_text

VERSIONED = ("torch", "numpy", "tensordict", "tensorflow-cpu", "ffcv", "Pillow")


def versions() -> dict[str, str | None]:
    """Return the installed versions of python and the packages that shape the figures."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for dist in VERSIONED:
        try:
            found[dist.removesuffix("-cpu").lower()] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist.removesuffix("-cpu").lower()] = None
    return found


def cpu_name() -> str:
    """Return the CPU model name (from /proc/cpuinfo on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_name() -> str | None:
    """Return the GPU's name, memory and CUDA version, or None without one."""
    if not torch.cuda.is_available():
        return None
    p = torch.cuda.get_device_properties(0)
    return f"{p.name} ({p.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}, x{torch.cuda.device_count()})"


def hardware_line() -> str:
    """Return one line describing this machine and the software versions."""
    import psutil

    ram = psutil.virtual_memory().total / 2**30
    cores = f"{psutil.cpu_count(logical=False) or '?'}c/{os.cpu_count()}t"
    gpu = gpu_name() or "no GPU"
    soft = ", ".join(f"{k} {v}" for k, v in versions().items() if v)
    return f"{cpu_name()} ({cores}), {ram:.0f} GiB RAM, {gpu} | {soft}"


def git_state() -> dict[str, Any]:
    """Return the project's git commit and whether the work tree differed from it (None outside a checkout)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=config.project_root(), capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def provenance(
    knobs: Mapping[str, Any] | None = None, repeats: int | None = None, scale: str | None = None
) -> dict[str, Any]:
    """Return what a saved result needs to be read later: machine, versions, scale, knobs, repeats, commit."""
    return {
        "hardware": hardware_line(),
        "versions": versions(),
        "scale": config.scale(scale),
        "device": str(config.device()),
        "knobs": dict(knobs or {}),
        "repeats": repeats,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **git_state(),
    }


def save_results(
    name: str,
    figures: Mapping[str, float],
    rows: Sequence[Mapping[str, Any]] = (),
    knobs: Mapping[str, Any] | None = None,
    repeats: int | None = None,
    path: str | Path | None = None,
    scale: str | None = None,
) -> Path:
    """Write `{"name", "provenance", "rows", "figures"}` as JSON (default results/NAME.json), atomically."""
    out = Path(path) if path is not None else config.results_dir() / f"{name}.json"
    doc = {
        "name": name,
        "provenance": provenance(knobs, repeats, scale),
        "rows": [dict(r) for r in rows],
        "figures": {k: float(v) for k, v in figures.items()},
    }
    atomic_write_text(out, json.dumps(doc, indent=2, default=_jsonable) + "\n")
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (torch.device, torch.dtype, Path)):
        return str(value)
    raise TypeError(f"cannot save {type(value).__name__} as JSON: convert it to a number or string first")
