"""`make setup WHEELS=DIR` on a machine without network whose python3 is itself in a venv (as the GPU machine's is).

The machine is made here: a venv holding this environment's copies of the distributions that the GPU machine has
(.ci/offline/machine.txt), torch among them, and nothing else. The project (this working tree) is copied beside
it and set up from a wheelhouse for this machine's Python, with no index (PIP_NO_INDEX, no pip configuration) and
an `apt-get` on PATH that fails and leaves a mark. Then `make gpu-check` runs notebook 06 with that .venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
from test_wheelhouse import wheelhouse

ROOT = Path(__file__).resolve().parents[1]
PYVER = "{}.{}.{}".format(*sys.version_info[:3])  # in full: some wheels need 3.11.5 or later


def _machine_distributions(run_tier: set[str]) -> list[metadata.Distribution]:
    """Return this environment's copies of the GPU machine's distributions, with what they need here.

    Their own dependencies come along (this huggingface-hub is not the machine's and needs what the machine's
    does not), except those the run tier brings: the wheelhouse must provide those itself.
    """
    todo, seen, found = list(wheelhouse.machine()), set(), []
    while todo:
        name = wheelhouse.canon(todo.pop())
        if name in seen or name in run_tier:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(dist)
        reqs = (wheelhouse.Requirement(r) for r in dist.requires or [])
        todo += [r.name for r in reqs if r.marker is None or r.marker.evaluate()]
    return found


def _machine(folder: Path, run_tier: set[str]) -> Path:
    """Make a venv that has only the GPU machine's distributions (those installed here), linked from here."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})["purelib"])
    here = Path(sysconfig.get_paths()["purelib"])
    for dist in _machine_distributions(run_tier):
        files = dist.files or []
        for top in {f.parts[0] for f in files if f.parts[0] != ".." and (here / f.parts[0]).exists()}:
            if not (site / top).exists():
                (site / top).symlink_to(here / top)
    return folder / "bin" / "python"


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> dict:
    """The made machine, a wheelhouse for this Python, a copy of the project and the offline environment."""
    tmp = tmp_path_factory.mktemp("offline")
    assert wheelhouse.main(["--python-version", PYVER, "--out", str(tmp / "wheels"), "--tiers", "run"]) == 0
    bin_ = tmp / "fake-bin"
    bin_.mkdir()
    (bin_ / "apt-get").write_text(f"#!/bin/sh\necho called >> {tmp / 'apt-called'}\nexit 100\n")
    (bin_ / "apt-get").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON", "FASTLOOPS"))}
    env |= {"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PATH": f"{bin_}:{env['PATH']}"}
    run_tier = {wheelhouse.metadata(w)[0] for w in wheelhouse.wheels(tmp / "wheels" / "run")}
    return {"tmp": tmp, "python": _machine(tmp / "machine", run_tier), "env": env}


def _project(dest: Path) -> Path:
    """Copy this working tree's files (tracked and new, never .venv or data) to `dest`."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in listed:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _make(project: Path, offline: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-C", str(project), *args, f"PYTHON={offline['python']}"],
        env=offline["env"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_setup_from_a_wheelhouse_keeps_the_machines_torch_and_gpu_check_runs(offline):
    project = _project(offline["tmp"] / "project")
    setup = _make(project, offline, "setup", f"WHEELS={offline['tmp'] / 'wheels'}")
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert not (offline["tmp"] / "apt-called").exists()  # offline, apt is never asked
    py = project / ".venv" / "bin" / "python"
    where = subprocess.run(
        [
            str(py),
            "-c",
            "import torch, tensordict, nbval, ipykernel; print(torch.__file__); print(tensordict.__file__)",
        ],
        capture_output=True,
        text=True,
    )
    assert where.returncode == 0, where.stderr
    torch_at, tensordict_at = where.stdout.split()
    assert torch_at.startswith(str(offline["tmp"] / "machine")), torch_at  # the machine's torch, not a second one
    assert tensordict_at.startswith(str(project / ".venv")), tensordict_at  # from the wheelhouse
    check = _make(project, offline, "gpu-check", f"ARGS=--scale smoke --parts 06 --reports {offline['tmp']}")
    assert check.returncode == 0 and "06: passed" in check.stdout, check.stdout + check.stderr
    assert " .venv/bin/python -m fastloops_book.gpu_check" in check.stdout  # the finished .venv ran it
    report = (offline["tmp"] / "README.md").read_text()
    assert "- from the wheelhouse " in report and "tensordict " in report  # what came from where, the torch not
    assert not any(line.startswith("- from") and " torch 2" in line for line in report.splitlines())


@pytest.mark.slow
def test_a_failed_offline_setup_leaves_no_venv(offline):
    project = _project(offline["tmp"] / "broken")
    partial = offline["tmp"] / "partial-wheels" / "run"
    shutil.copytree(offline["tmp"] / "wheels" / "run", partial)
    for wheel in partial.glob("nbval-*.whl"):  # a wheelhouse that lacks one wheel
        wheel.unlink()
    setup = _make(project, offline, "setup", f"WHEELS={partial.parent}")
    assert setup.returncode != 0 and "pip install from" in setup.stdout and "nbval" in setup.stdout, setup.stdout
    assert not (project / ".venv").exists()
    check = _make(project, offline, "-n", "gpu-check")  # with no finished .venv, the machine's python3 runs it
    assert f"{offline['python']} -m fastloops_book.gpu_check" in check.stdout
