"""`make wheelhouse`: one folder, in tiers, of what a GPU machine without network lacks (.ci/wheelhouse.py).

The walk over dependencies is tested on tiny made-up wheels; the real wheelhouse for the GPU machine's Python 3.12
is built once per session from the registry (pip's cache makes the second time quick) and must be complete: every
module the package, the book machinery, the notebooks and gpu-check's test files import maps to a distribution
on the machine's list, in a tier, in the FFCV kit, or left out with a reason.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from fastloops_book import gpu_check

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / ".ci" / "wheelhouse.py")
wheelhouse = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wheelhouse)

# modules whose distribution is not installed on this machine, so metadata cannot name it
NOT_HERE = {
    "torchvision": "torchvision",
    "pycuda": "pycuda",
    "torch_tensorrt": "torch-tensorrt",
    "nvidia": "nvidia-nvimgcodec-cu13",  # `from nvidia import nvimgcodec` (notebook 08)
}
# a module that several distributions provide: any one of them will do
ALTERNATIVES = {"cv2": ("opencv-python", "opencv-python-headless")}


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", meta)
    return path


def _walk(tmp_path, wanted, wheels, have=None, python="3.12"):
    reqs = [wheelhouse.Requirement(r) for r in wanted]
    lacking, conflicts = wheelhouse.closure(reqs, wheels, have or {}, wheelhouse.target(python))
    return sorted(wheelhouse.canon(r.name) for r in lacking), conflicts


def test_the_walk_follows_extras_markers_and_the_machine(tmp_path):
    wheels = [
        _wheel(tmp_path, "nbconvert", "7.0", ["bleach[css]", "numpy>=1.2"]),
        _wheel(tmp_path, "bleach", "6.0", ['tinycss2>=1.1; extra == "css"', "webencodings"]),
        _wheel(
            tmp_path,
            "webencodings",
            "0.5",
            ['tomli; python_version < "3.11"', 'typing-extensions; python_version < "3.13"'],
        ),
    ]
    lacking, conflicts = _walk(tmp_path, ["nbconvert"], wheels, {"numpy": "2.5.2"})
    assert lacking == ["tinycss2", "typing-extensions"] and conflicts == []  # an extra's need counts; tomli is for 3.10
    assert _walk(tmp_path, ["nbconvert"], wheels, {"numpy": "2.5.2"}, python="3.13")[0] == ["tinycss2"]


def test_the_walk_names_a_version_the_machine_cannot_meet(tmp_path):
    wheels = [_wheel(tmp_path, "tensordict", "0.99", ["torch>=2.12", "numpy"])]
    lacking, conflicts = _walk(tmp_path, ["tensordict"], wheels, {"torch": "2.11.0", "numpy": ""})
    assert lacking == [] and conflicts == ["torch>=2.12 (the machine has torch 2.11.0)"]


def test_the_machines_list_has_its_torch_and_a_version_where_one_was_seen():
    have = wheelhouse.machine()
    assert have["torch"] == "2.11.0" and have["numpy"] == "2.5.2" and "tensordict" not in have
    assert len(have) >= 190


@pytest.fixture(scope="session")
def gpu_wheelhouse(tmp_path_factory) -> Path:
    """The GPU machine's wheelhouse (Python 3.12), run and lab tiers, built from the registry."""
    out = tmp_path_factory.mktemp("wheelhouse-3.12")
    assert wheelhouse.main(["--python-version", "3.12", "--out", str(out), "--tiers", "run,lab"]) == 0
    return out


def test_make_wheelhouse_writes_both_tiers_complete_and_the_run_tier_travels(gpu_wheelhouse, capsys):
    assert wheelhouse.main(["--python-version", "3.12", "--out", str(gpu_wheelhouse), "--check"]) == 0
    out = capsys.readouterr().out
    sizes = dict(re.findall(r"\[wheelhouse\] (run|lab): \d+ wheels, ([0-9.]+) MiB", out))
    assert set(sizes) == {"run", "lab"} and float(sizes["run"]) <= wheelhouse.RUN_LIMIT_MIB, out
    names = {t: {wheelhouse.metadata(w)[0] for w in wheelhouse.wheels(gpu_wheelhouse / t)} for t in ("run", "lab")}
    assert {"tensordict", "optree", "nbval", "ipykernel", "pyzmq"} <= names["run"] and "jupyterlab" in names["lab"]
    assert not (names["run"] | names["lab"]) & set(wheelhouse.machine())  # never the machine's numpy or torch
    for wheel in wheelhouse.wheels(gpu_wheelhouse / "run"):  # every wheel is for CPython 3.12
        python, abi = wheel.name.split("-")[-3:-1]
        assert abi == "abi3" or set(python.split(".")) & {"py3", "py312", "cp312"}, wheel.name


def _imports(source: str) -> set[str]:
    """Return the top-level modules `source` imports, guarded or not, and those it asks `require` for."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "require",
            "import_module",
        ):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value.split(".")[0])
    return found


def _sources() -> dict[str, str]:
    packages = (ROOT / "fastloops_helpers", ROOT / "book" / "fastloops_book")
    found = {str(p.relative_to(ROOT)): p.read_text() for pkg in packages for p in sorted(pkg.rglob("*.py"))}
    found |= {name: (ROOT / name).read_text() for name in gpu_check.TESTS}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        lines = (line for cell in code for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))
        found[str(path.relative_to(ROOT))] = "\n".join(lines)
    return found


def _distributions(module: str) -> tuple[str, ...]:
    if module in ALTERNATIVES:
        return ALTERNATIVES[module]
    if module in NOT_HERE:
        return (NOT_HERE[module],)
    names = metadata.packages_distributions().get(module)
    assert names, f"no installed distribution provides {module!r}: add it to NOT_HERE with its distribution"
    return tuple(names)


def test_every_import_maps_to_the_machine_a_tier_the_kit_or_a_reason(gpu_wheelhouse):
    tiers = {wheelhouse.metadata(w)[0] for t in ("run", "lab") for w in wheelhouse.wheels(gpu_wheelhouse / t)}
    provided = set(wheelhouse.machine()) | tiers | {"ffcv"} | {wheelhouse.canon(d) for d in wheelhouse.LEFT_OUT}
    modules = {m for source in _sources().values() for m in _imports(source)}
    external = sorted(
        m
        for m in modules
        if m not in sys.stdlib_module_names and m not in ("fastloops_helpers", "fastloops_book", "tests")
    )
    unmapped = [m for m in external if not {wheelhouse.canon(d) for d in _distributions(m)} & provided]
    assert not unmapped, f"imported, but neither on the GPU machine nor in the wheelhouse: {unmapped}"
    assert {"torch", "tensordict", "nbformat", "webdataset", "jupyterlab"} <= set(external)  # the scan sees them all
