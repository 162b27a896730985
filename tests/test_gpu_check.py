import os
import subprocess
import sys

import pytest
import torch

from fastloops_helpers import config
from fastloops_helpers.book import gpu_check


def test_the_report_is_named_after_the_gpu_else_the_cpu_and_the_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "NVIDIA H200")
    assert gpu_check.slug() == "nvidia-h200-16-cores"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "cpu_name", lambda: "Intel(R) Xeon(R) Processor @ 2.10GHz")
    assert gpu_check.slug() == "intel-xeon-16-cores-cpu"


def _fake_parts(monkeypatch, scripts):
    """Make each part run a tiny Python script instead of its tests or benchmark."""
    monkeypatch.setattr(gpu_check, "command", lambda part, scale: [sys.executable, "-c", scripts[part]])


def test_a_missing_package_skips_its_part_by_name_and_only_failures_fail(monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, {"devices": "pass", "otto": "import sys; sys.exit(3)"})
    monkeypatch.setitem(gpu_check.NEEDS, "cifar", ("no_such_package_here",))
    assert gpu_check.main(["--parts", "devices,cifar", "--reports", str(tmp_path)]) == 0  # a skip is no failure
    out = capsys.readouterr().out
    assert "cifar: skipped in 0 s: missing: no_such_package_here (pip install no_such_package_here)" in out
    report = (tmp_path / f"{gpu_check.slug()}.md").read_text()
    assert "| devices | passed | 0 |" in report and "| cifar | skipped |" in report
    assert gpu_check.main(["--parts", "devices,otto", "--reports", str(tmp_path)]) == 1
    assert "otto: FAILED (exit 3)" in capsys.readouterr().out


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
    run = subprocess.run(
        [sys.executable, "-m", "fastloops_helpers.book.gpu_check", "--reports", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "scale=smoke, no CUDA GPU" in run.stdout and "tests: skipped" in run.stdout
    report = (tmp_path / f"{gpu_check.slug()}.md").read_text()
    assert "- scale: smoke; device: cpu (no CUDA GPU)" in report
    assert all(f"| {name} | passed | 0 |" in report and f"## bench-{name}" in report for name in gpu_check.BENCHMARKS)
    assert {p: p.read_text() for p in (config.project_root() / "reports").glob("*.md")} == committed
