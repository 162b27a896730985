"""The package as an adopter gets it: the wheel alone, in a new virtual environment, with only its core dependencies.

Slow (about a minute: torch is installed into the new environment from pip's cache or a local wheel).
"""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import fastloops_helpers

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str, cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT))
    (path,) = out.glob("fastloops_helpers-*.whl")
    return path


def test_the_wheel_has_one_version_and_the_library_alone(wheel):
    assert wheel.name.startswith(f"fastloops_helpers-{fastloops_helpers.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("fastloops_book")], "the book's machinery is not the library"
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "fastloops_helpers").rglob("*.py")}
    assert modules <= set(names), f"modules missing from the wheel: {sorted(modules - set(names))[:5]}"
    assert not [n for n in names if n.startswith(("tests/", "notebooks/"))]


@pytest.mark.slow
def test_the_wheel_alone_runs_a_real_loop(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    # the constraints keep torch at the tested CPU build (unpinned, pip would fetch GBs of CUDA packages)
    _run(python, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel))
    out = _run(python, str(ROOT / "tests" / "wheel" / "use_the_helpers.py"), cwd=tmp_path)
    assert "wheel ok" in out and "fastloops-helpers[stream]" in out and "fastloops-helpers[trees]" in out
