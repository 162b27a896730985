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
_GPU_ROW = re.compile(r"^\|\s*\*\*GPU\*\*\s*\|\s*([^|]*?)\s*\|", re.MULTILINE)


def gpu_card(notebook: Path) -> str:
    """Return what a notebook's card says about a GPU: "optional", "needed", or "" (not needed)."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    found = _GPU_ROW.search("".join(cells[0]["source"])) if cells else None
    if found is None:
        raise ValueError(f"{notebook.name}: its first cell has no '| **GPU** |' row")
    answer = found.group(1).split(":")[0].strip().lower()
    if answer not in GPU_ANSWERS:
        raise ValueError(f"{notebook.name}: GPU row starts with {answer!r}, expected one of {sorted(GPU_ANSWERS)}")
    return GPU_ANSWERS[answer]


def gpu_notebooks(folder: Path | None = None) -> dict[str, str]:
    """Return {notebook number: "optional" | "needed"} for every notebook whose card says it uses a GPU.

    Read from the cards, so the list cannot drift from them. Explained in notebooks/00_setup.ipynb.
    """
    folder = config.project_root() / "notebooks" if folder is None else Path(folder)
    cards = {path.name[:2]: gpu_card(path) for path in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}
    return {number: answer for number, answer in cards.items() if answer}


def _gpu_used_by() -> str:
    try:
        numbers = list(gpu_notebooks())
    except (OSError, ValueError):  # an installed wheel has no notebooks folder
        return "the notebooks whose card marks a GPU as optional or needed"
    return ", ".join(numbers) + " (GPU parts)" if numbers else "none"


# used_by: the notebooks that skip a part without it (a function: read when checked, from the cards)
CHECKS: dict[str, tuple[Callable[[], tuple[bool, str, str]], str | Callable[[], str]]] = {
    "CUDA GPU": (check_gpu, _gpu_used_by),
    "ffcv": (check_ffcv, "10, 11"),
    "tensorflow": (lambda: _package("tensorflow-cpu", "tensorflow", "pip install tensorflow-cpu"), "01"),
    "libjpeg-turbo in Pillow": (check_libjpeg_turbo, "07, 08, 09"),
    "torch.compile (CPU)": (check_compile, "05"),
    "tensordict": (lambda: _package("tensordict", "tensordict", "pip install tensordict"), "06, 09"),
    "optree": (lambda: _package("optree", "optree", "pip install optree"), "06"),
    "dm-tree": (lambda: _package("dm-tree", "tree", "pip install dm-tree"), "06"),
    "simplejpeg": (lambda: _package("simplejpeg", "simplejpeg", "pip install simplejpeg"), "08"),
    "PyTurboJPEG": (lambda: _package("PyTurboJPEG", "turbojpeg", "pip install PyTurboJPEG"), "08"),
    "JAX": (lambda: _package("jax", "jax", "pip install jax (about 600 MB)"), "06"),
}


def check_all() -> list[Capability]:
    """Run every check and return one Capability per optional part."""
    found = []
    for name, (check, used_by) in CHECKS.items():
        ok, detail, how = check()
        notebooks = used_by() if callable(used_by) else used_by
        found.append(Capability(name, bool(ok), detail, "" if ok else how, notebooks))
    return found
