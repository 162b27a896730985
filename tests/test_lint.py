"""Ruff formats and lints the package and the tests; mypy checks the package's types (config: pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists() and not shutil.which(name):
        pytest.skip(f"{name} is not installed: pip install -e '.[lint]'")
    return str(path) if path.exists() else name


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    done = _run(_tool("ruff"), "check", "--no-fix")
    assert done.returncode == 0, done.stdout[-4000:]


def test_ruff_format_changes_nothing():
    done = _run(_tool("ruff"), "format", "--check")
    assert done.returncode == 0, f"run `ruff format` (the package and tests only):\n{done.stdout[-3000:]}"


def test_ruff_leaves_notebooks_and_twins_alone():
    done = _run(_tool("ruff"), "check", "--show-files")
    listed = done.stdout.splitlines()
    assert listed and not [f for f in listed if "/notebooks/" in f]


def test_mypy_finds_nothing():
    done = _run(_tool("mypy"))
    assert done.returncode == 0, done.stdout[-4000:]
