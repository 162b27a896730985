"""Which optional parts work on this machine, and how to add the ones that are missing.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch

from .. import config
from .clock import Timer
from .threads import torch_threads

SYSLIBS = "sudo apt-get install -y pkg-config libopencv-dev libturbojpeg0-dev"


@dataclass(frozen=True)
class Capability:
    """One optional part: whether it works here, what was found, and how to add it."""

    name: str
    ok: bool
    detail: str
    how_to_add: str
    used_by: str


def _package(dist: str, module: str, how: str) -> tuple[bool, str, str]:
    if importlib.util.find_spec(module) is None:
        return False, "not installed", how
    try:
        return True, f"version {metadata.version(dist)}", how
    except metadata.PackageNotFoundError:
        return True, "installed", how


def check_gpu() -> tuple[bool, str, str]:
    """Report whether torch sees a CUDA GPU."""
    if torch.cuda.is_available():
        return True, torch.cuda.get_device_name(0), ""
    return (
        False,
        f"torch {torch.__version__} sees no CUDA device",
        "a machine with an NVIDIA GPU and a CUDA build of torch",
    )


def check_ffcv() -> tuple[bool, str, str]:
    """Report whether ffcv imports (it needs opencv and libturbojpeg at build time)."""
    how = f"{SYSLIBS} && make setup"
    if importlib.util.find_spec("ffcv") is None:
        return False, "not installed", how
    try:  # importing ffcv sets torch's threads to 1: the guard restores them (a check must not change them)
        with torch_threads(None), warnings.catch_warnings():  # ffcv imports tqdm.auto: ipywidgets warning
            warnings.simplefilter("ignore")
            importlib.import_module("ffcv.loader")
    except Exception as exc:  # a broken build raises anything from ImportError to numba errors
        return False, f"installed but does not import: {type(exc).__name__}: {exc}", how
    return True, f"version {metadata.version('ffcv')}", how


def check_libjpeg_turbo() -> tuple[bool, str, str]:
    """Report whether Pillow decodes JPEG with libjpeg-turbo."""
    from PIL import features

    turbo = bool(features.check_feature("libjpeg_turbo"))
    detail = f"Pillow's libjpeg is {'libjpeg-turbo ' if turbo else 'libjpeg '}{features.version('jpg') or '?'}"
    return turbo, detail, "the Pillow wheels from PyPI bundle libjpeg-turbo: pip install -U Pillow"


def check_compile(device: str = "cpu") -> tuple[bool, str, str]:
    """Compile and run a tiny pointwise function with torch.compile (inductor), timing the compile."""
    fn = torch.compile(lambda x: torch.sigmoid(x.sin() * x.cos() + 1.0), dynamic=False)
    x = torch.randn(1024, device=device)
    try:
        with Timer(device) as first_call:
            ok = torch.allclose(fn(x), torch.sigmoid(x.sin() * x.cos() + 1.0), atol=1e-6)
    except Exception as exc:  # missing compiler or headers surface as many exception types
        return (
            False,
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
            "inductor needs a C++ compiler and Python headers: apt-get install g++ python3-dev",
        )
    return ok, f"inductor on {device}, first call {first_call.seconds:.1f} s (compile included)", ""


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def cache_sizes(cpu: int = 0) -> dict[str, int]:
    """Return {"L1d": bytes, "L2": bytes, "L3": bytes, ...} of one core's data caches, from Linux's sysfs.

    Empty where sysfs does not say (macOS, Windows, some containers). Explained in notebooks/00_setup.ipynb.
    """
    found = {}
    for index in sorted(Path(f"/sys/devices/system/cpu/cpu{cpu}/cache").glob("index*")):
        try:
            level, kind, size = ((index / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        number, unit = (size, "") if size.isdigit() else (size[:-1], size[-1])
        if kind == "Instruction" or not number.isdigit() or unit not in _UNITS:
            continue
        found[f"L{level}" + ("d" if kind == "Data" else "")] = int(number) * _UNITS[unit]
    return found


GPU_ANSWERS = {
    "optional": "optional",
    "yes": "needed",
    "needed": "needed",
    "required": "needed",
    "no": "",
    "not needed": "",
}  # a card's GPU row starts with one of these
_ROW = r"^\|\s*\*\*{}\*\*\s*\|\s*([^|]*?)\s*\|"  # a card's row | **LABEL** | TEXT |


def card_row(notebook: Path, label: str) -> str | None:
    """Return the text of row **label** of a notebook's card (the table in its first cell), None without one."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    found = re.search(_ROW.format(re.escape(label)), "".join(cells[0]["source"]), re.MULTILINE) if cells else None
    return found.group(1) if found else None


def gpu_card(notebook: Path) -> str:
    """Return what a notebook's card says about a GPU: "optional", "needed", or "" (not needed)."""
    answer = ((row := card_row(notebook, "GPU")) or "").split(":")[0].strip().lower()
    if row is None or answer not in GPU_ANSWERS:
        raise ValueError(
            f"{Path(notebook).name}: its card's '| **GPU** |' row "
            + (f"starts with {answer!r}, expected one of {sorted(GPU_ANSWERS)}" if row is not None else "is missing")
        )
    return GPU_ANSWERS[answer]


def _cards(folder: Path | None = None) -> dict[str, Path]:
    """Return {number: path} of every notebook in `folder` (default: the project's notebooks)."""
    root = Path(folder) if folder is not None else config.project_root() / "notebooks"
    return {path.name[:2]: path for path in sorted(root.glob("[0-9][0-9]_*.ipynb"))}


def gpu_notebooks(folder: Path | None = None) -> dict[str, str]:
    """Return {notebook number: "optional" | "needed"} for every notebook whose card says it uses a GPU.

    Read from the cards, so the list cannot drift from them. Explained in notebooks/00_setup.ipynb.
    """
    return {number: answer for number, path in _cards(folder).items() if (answer := gpu_card(path))}


def optional_notebooks(part: str, folder: Path | None = None) -> list[str]:
    """Return the notebooks whose card's **Optional** row names `part` before its colon ("ffcv, jax: ...")."""
    return [
        number
        for number, path in _cards(folder).items()
        if part.lower() in {w.strip().lower() for w in (card_row(path, "Optional") or "").split(":")[0].split(",")}
    ]


def used_by(name: str) -> str:
    """Return the notebooks that use optional part `name` (a key of CHECKS), read from their cards."""
    try:
        numbers = list(gpu_notebooks()) if name == "CUDA GPU" else optional_notebooks(name.split()[0])
    except (OSError, ValueError):  # an installed wheel has no notebooks folder
        numbers = ["the notebooks whose card names it (their GPU or Optional row)"]
    return ", ".join(numbers or ["none"]) + (" (GPU parts)" if name == "CUDA GPU" and numbers else "")


# each optional part's check; the notebooks that use it come from the cards (`used_by`), the part's first word
# lowercased as their Optional row names it
CHECKS: dict[str, Callable[[], tuple[bool, str, str]]] = {
    "CUDA GPU": check_gpu,
    "ffcv": check_ffcv,
    "tensorflow": lambda: _package("tensorflow-cpu", "tensorflow", "pip install tensorflow-cpu"),
    "libjpeg-turbo in Pillow": check_libjpeg_turbo,
    "torch.compile (CPU)": check_compile,
    "tensordict": lambda: _package("tensordict", "tensordict", "pip install tensordict"),
    "optree": lambda: _package("optree", "optree", "pip install optree"),
    "dm-tree": lambda: _package("dm-tree", "tree", "pip install dm-tree"),
    "simplejpeg": lambda: _package("simplejpeg", "simplejpeg", "pip install simplejpeg"),
    "PyTurboJPEG": lambda: _package("PyTurboJPEG", "turbojpeg", "pip install PyTurboJPEG"),
    "JAX": lambda: _package("jax", "jax", "pip install jax (about 600 MB)"),
}


def check_all() -> list[Capability]:
    """Run every check and return one Capability per optional part."""
    found = []
    for name, check in CHECKS.items():
        ok, detail, how = check()
        found.append(Capability(name, bool(ok), detail, "" if ok else how, used_by(name)))
    return found
