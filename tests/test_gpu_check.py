import ast
import os
import subprocess
import sys

import pytest
import torch
from hidden import CORE, hide  # tests/hidden.py

from fastloops_helpers import config
from fastloops_helpers.book import as_script, bench, gpu_check

ROOT = config.project_root()
# their data sets are ImageData tensorclasses: whoever imports them needs tensordict
TENSORCLASSES = {"fastloops_helpers.data.memmap", "fastloops_helpers.experiments.imagefolder"}


def test_the_report_is_named_after_the_gpu_else_the_cpu_and_the_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "NVIDIA H200")
    assert gpu_check.slug() == "nvidia-h200-16-cores"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "cpu_name", lambda: "Intel(R) Xeon(R) Processor @ 2.10GHz")
    assert gpu_check.slug() == "intel-xeon-16-cores-cpu"


def imported_beyond_the_core(source: str) -> set[str]:
    """Return the packages beyond the core that `source` needs: its module-level imports (not under try, if or def)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    top = {name.split(".")[0] for name in names} | ({"tensordict"} if names & TENSORCLASSES else set())
    return top - set(sys.stdlib_module_names) - set(CORE) - {"fastloops_helpers"}


def test_each_part_needs_what_its_test_files_or_notebook_import_beyond_the_core():
    """NEEDS holds neither more nor less than the parts import: a part is skipped only where it could not run."""
    found = {"tests": set().union(*(imported_beyond_the_core((ROOT / f).read_text()) for f in gpu_check.TESTS))}
    for part in gpu_check.BENCHMARKS:
        notebook = ROOT / "notebooks" / f"{bench.benchmarks()[part]['notebook']}.ipynb"
        found[part] = imported_beyond_the_core(as_script.script(notebook))  # what the benchmark runs
    assert {part: set(needs) for part, needs in gpu_check.NEEDS.items()} == found
    assert found["devices"] == {"tensordict", "optree"} and found["otto"] == found["fusion"] == set()


def check_in_a_subprocess(args: list[str], env: dict[str, str], cwd, timeout: float) -> subprocess.CompletedProcess:
    """Run `python -m fastloops_helpers.book.gpu_check ARGS` in a fresh interpreter; return what it did."""
    argv = [sys.executable, "-m", "fastloops_helpers.book.gpu_check", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def _fake_parts(monkeypatch, scripts):
    """Make each part run a tiny Python script instead of its tests or benchmark."""
    monkeypatch.setattr(gpu_check, "command", lambda part, scale: [sys.executable, "-c", scripts[part]])


def test_a_package_that_does_not_import_skips_its_part_by_name_and_only_failures_fail(monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, {"otto": "pass", "fusion": "import sys; sys.exit(3)", "cifar": "pass"})
    monkeypatch.setitem(sys.modules, "tensordict", None)  # installed, but its import fails here: as if hidden
    assert gpu_check.main(["--parts", "otto,cifar", "--reports", str(tmp_path)]) == 0  # a skip is no failure
    out = capsys.readouterr().out
    assert "cifar: skipped in 0 s: missing: tensordict (not importable here: bring it with `make wheelhouse`" in out
    report = (tmp_path / f"{gpu_check.slug()}.md").read_text()
    assert "| otto | passed | 0 |" in report and "| cifar | skipped |" in report
    assert gpu_check.main(["--parts", "otto,fusion", "--reports", str(tmp_path)]) == 1
    assert "fusion: FAILED (exit 3)" in capsys.readouterr().out


def test_a_package_that_is_present_but_broken_counts_as_missing(monkeypatch, tmp_path):
    (tmp_path / "broken_here").mkdir()
    (tmp_path / "broken_here" / "__init__.py").write_text("raise RuntimeError('built for another torch')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert gpu_check.missing(("broken_here", "torch")) == [
        "broken_here (not importable here: bring it with `make wheelhouse` on a machine with the registry, "
        "then `make setup WHEELS=DIR`; it raised RuntimeError: built for another torch)"
    ]


def test_without_tensordict_the_check_imports_and_skips_the_parts_that_need_it(tmp_path):
    """A bare torch machine: the parts that need tensordict are skipped, by name, and the check exits 0."""
    parts = [p for p in gpu_check.BENCHMARKS if "tensordict" in gpu_check.NEEDS[p]]
    env = hide(tmp_path / "shim", "tensordict", "optree")
    run = check_in_a_subprocess(["--parts", ",".join(parts), "--reports", str(tmp_path)], env, tmp_path, 300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert parts == ["devices", "cifar", "diagnose"]
    for part in parts:
        assert f"{part}: skipped in 0 s: missing: tensordict (not importable here: " in run.stdout
    assert "bring it with `make wheelhouse` on a machine with the registry, then `make setup WHEELS=DIR`" in run.stdout
    assert "devices: skipped in 0 s: missing: tensordict (" in run.stdout and "optree (not importable" in run.stdout
    report = next(tmp_path.glob("*.md")).read_text()
    assert all(f"| {part} | skipped |" in report for part in parts)


def test_a_part_past_its_timeout_is_killed_with_its_children_and_fails(monkeypatch, tmp_path, capsys):
    sleeper = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    _fake_parts(monkeypatch, {"devices": sleeper + "print('started', flush=True); time.sleep(60)"})
    monkeypatch.setitem(gpu_check.TIMEOUT_S, "devices", 3)
    logs = tmp_path / "kept"
    assert gpu_check.main(["--parts", "devices", "--reports", str(tmp_path), "--logs", str(logs)]) == 1
    out = capsys.readouterr().out
    assert "devices: timed out in" in out and "killed after 3 s" in out
    assert (logs / "logs" / "devices.log").read_text() == "started\n"
    ps = subprocess.run(["pgrep", "-f", "time.sleep\\(60\\)"], capture_output=True, text=True).stdout.split()
    assert not ps  # the grandchild went with its group


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine it runs at the workshop scale: make gpu-check")
def test_on_a_cpu_machine_it_runs_at_smoke_skips_the_cuda_tests_and_writes_its_report(tmp_path):
    committed = {p: p.read_text() for p in (config.project_root() / "reports").glob("*.md")}
    env = {**os.environ, "PYTHONPATH": str(config.project_root())}
    run = check_in_a_subprocess(["--reports", str(tmp_path)], env, tmp_path, 900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "scale=smoke, no CUDA GPU" in run.stdout and "tests: skipped" in run.stdout
    report = (tmp_path / f"{gpu_check.slug()}.md").read_text()
    assert "- scale: smoke; device: cpu (no CUDA GPU)" in report
    assert all(f"| {name} | passed | 0 |" in report and f"## bench-{name}" in report for name in gpu_check.BENCHMARKS)
    assert {p: p.read_text() for p in (config.project_root() / "reports").glob("*.md")} == committed
