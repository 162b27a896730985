import ast
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import torch
from hidden import CORE, hide  # tests/hidden.py

from fastloops_book import as_script, gpu_check, notebooks
from fastloops_helpers import config

ROOT = config.project_root()
# their data sets are ImageData tensorclasses: whoever imports them needs tensordict
TENSORCLASSES = {"fastloops_helpers.data.memmap", "fastloops_helpers.experiments.imagefolder"}
NOTEBOOK_PARTS = [p for p in gpu_check.ORDER if p != "tests"]


def test_the_report_is_named_after_the_gpu_else_the_cpu_and_the_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "NVIDIA H200")
    assert gpu_check.slug() == "nvidia-h200-16-cores"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "cpu_name", lambda: "Intel(R) Xeon(R) Processor @ 2.10GHz")
    assert gpu_check.slug() == "intel-xeon-16-cores-cpu"


def test_every_notebook_runs_gpu_parts_first_and_the_conclusion_last():
    every = [p.stem[:2] for p in notebooks.notebook_paths()]
    assert sorted(NOTEBOOK_PARTS) == every and len(every) == 17
    assert gpu_check.ORDER[0] == "tests" and NOTEBOOK_PARTS[:6] == ["11", "10", "06", "05", "08", "15"]
    assert NOTEBOOK_PARTS[-1] == "13"


def test_the_gpu_scale_budgets_fit_one_command_of_eight_minutes_with_the_set_up():
    """The arithmetic: the parts' budgets, plus the offline set-up and ffcv's build, within COMMAND_S."""
    assert set(gpu_check.BUDGET_S) == set(gpu_check.ORDER) and all(s > 0 for s in gpu_check.BUDGET_S.values())
    total = sum(gpu_check.BUDGET_S.values()) + sum(gpu_check.SET_UP_S.values())
    assert gpu_check.COMMAND_S == 480 and total <= gpu_check.COMMAND_S, total


def imported_beyond_the_core(source: str) -> set[str]:
    """Return the packages beyond the core that `source` needs: its module-level imports (not under try, if or def)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    top = {name.split(".")[0] for name in names} | ({"tensordict"} if names & TENSORCLASSES else set())
    return top - set(sys.stdlib_module_names) - set(CORE) - {"fastloops_helpers", "fastloops_book"}


def test_each_part_needs_what_its_test_files_or_notebook_import_beyond_the_core():
    """NEEDS holds neither more nor less than the parts import: a part is skipped only where it could not run."""
    found = {"tests": set().union(*(imported_beyond_the_core((ROOT / f).read_text()) for f in gpu_check.TESTS))}
    for part in NOTEBOOK_PARTS:
        found[part] = imported_beyond_the_core(as_script.script(notebooks.notebook_paths([part])[0], solutions=True))
    assert {part: set(needs) for part, needs in gpu_check.NEEDS.items()} == {p: s for p, s in found.items() if s}
    assert found["06"] == {"tensordict", "optree"} and found["10"] == found["05"] == set()


def test_solutions_run_only_when_asked_for():
    path = notebooks.notebook_paths(["03"])[0]
    cells = json.loads(path.read_text())["cells"]
    solution = next("".join(c["source"]) for c in cells if "solution" in c["metadata"].get("tags", []))
    assert solution not in as_script.script(path) and solution in as_script.script(path, solutions=True)


def _fake_parts(monkeypatch, scripts):
    """Make each part run a tiny Python script instead of its tests or notebook."""
    monkeypatch.setattr(gpu_check, "command", lambda part, scale, mode, folders: [sys.executable, "-c", scripts[part]])


def test_a_package_that_does_not_import_skips_its_part_by_name_and_only_failures_fail(monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, {"10": "pass", "05": "import sys; sys.exit(3)", "11": "pass"})
    monkeypatch.setitem(sys.modules, "tensordict", None)  # installed, but its import fails here: as if hidden
    assert gpu_check.main(["--parts", "10,11", "--reports", str(tmp_path)]) == 0  # a skip is no failure
    out = capsys.readouterr().out
    assert "11: skipped in 0 s: missing: tensordict (not importable here: bring it with `make wheelhouse`" in out
    report = (tmp_path / "README.md").read_text()
    assert "| 10 | passed | 0 |" in report and "| 11 | skipped |" in report
    assert gpu_check.main(["--parts", "10,05", "--reports", str(tmp_path)]) == 1
    assert "05: FAILED (exit 3)" in capsys.readouterr().out


def test_a_package_that_is_present_but_broken_counts_as_missing(monkeypatch, tmp_path):
    (tmp_path / "broken_here").mkdir()
    (tmp_path / "broken_here" / "__init__.py").write_text("raise RuntimeError('built for another torch')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert gpu_check.missing(("broken_here", "torch")) == [
        "broken_here (not importable here: bring it with `make wheelhouse` on a machine with the registry, "
        "then `make setup WHEELS=DIR`; it raised RuntimeError: built for another torch)"
    ]


def check_in_a_subprocess(args: list[str], env: dict[str, str], cwd, timeout: float) -> subprocess.CompletedProcess:
    """Run `python -m fastloops_book.gpu_check ARGS` in a fresh interpreter; return what it did."""
    argv = [sys.executable, "-m", "fastloops_book.gpu_check", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def test_without_tensordict_the_check_imports_and_skips_the_parts_that_need_it(tmp_path):
    """A bare torch machine: the parts that need tensordict are skipped, by name, and the check exits 0."""
    parts = [p for p in gpu_check.ORDER if "tensordict" in gpu_check.NEEDS.get(p, ())]
    env = hide(tmp_path / "shim", "tensordict", "optree")
    run = check_in_a_subprocess(["--parts", ",".join(parts), "--reports", str(tmp_path)], env, tmp_path, 300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert parts == ["tests", "11", "06", "15", "14", "09", "16"]
    for part in parts:
        assert f"{part}: skipped in 0 s: missing: tensordict (not importable here: " in run.stdout
    assert "06: skipped in 0 s: missing: tensordict (" in run.stdout and "optree (not importable" in run.stdout
    assert all(f"| {part} | skipped |" in (tmp_path / "README.md").read_text() for part in parts)


def test_a_part_past_its_timeout_is_killed_with_its_children_and_fails(monkeypatch, tmp_path, capsys):
    sleeper = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    _fake_parts(monkeypatch, {"06": sleeper + "print('started', flush=True); time.sleep(60)", "13": "pass"})
    monkeypatch.setitem(gpu_check.BUDGET_S, "06", 2)  # at the gpu scale a part may take twice its budget
    monkeypatch.setitem(gpu_check.BUDGET_S, "13", 100)  # while the parts keep to the sum of theirs
    assert gpu_check.main(["--scale", "gpu", "--parts", "06,13", "--reports", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "06: timed out in" in out and "killed after 4 s" in out and "13: passed" in out
    assert (tmp_path / "logs" / "06.log").read_text() == "started\n"
    ps = subprocess.run(["pgrep", "-f", "time.sleep\\(60\\)"], capture_output=True, text=True).stdout.split()
    assert not ps  # the grandchild went with its group


def test_each_part_is_in_the_archive_as_soon_as_it_ends_and_the_report_names_its_provenance(monkeypatch, tmp_path):
    """A run stopped while part 03 runs still leaves 11's log: 03 itself reads the archive to show it."""
    lister = f"import tarfile; print(tarfile.open({str(tmp_path / gpu_check.ARCHIVE)!r}).getnames())"
    tests = "print('3 passed, 1 skipped, 2 deselected in 0.50s')"
    _fake_parts(monkeypatch, {"tests": tests, "11": "print('eleven')", "03": lister})
    monkeypatch.setattr(gpu_check, "git_state", lambda: {"commit": "0123456789abcdef", "dirty": True})
    assert gpu_check.main(["--parts", "03,11,tests", "--reports", str(tmp_path), "--mode", "script"]) == 0
    assert "'logs/tests.log', 'logs/11.log'" in (tmp_path / "logs" / "03.log").read_text()
    with tarfile.open(tmp_path / gpu_check.ARCHIVE) as tar:
        assert tar.getnames() == ["logs/tests.log", "logs/11.log", "logs/03.log", "README.md"]
    report = (tmp_path / "README.md").read_text()
    first = report.splitlines()[0]
    assert "commit 0123456789ab" in first and "DIRTY tree" in first
    assert "- date: 20" in report and "; scale: smoke; notebooks as script" in report and "; ffcv: " in report
    assert "## Tests\n\n3 passed, 1 skipped, 2 deselected\n" in report
    assert "| 11 | passed | 0 |" in report and "| script |" in report and "| pytest |" in report


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine its runs go to reports/gpu/")
def test_without_a_gpu_it_never_writes_under_reports_gpu(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="holds GPU runs only"):
        gpu_check.main(["--parts", "13", "--reports", str(ROOT / "reports" / "gpu" / "here")])
    default = gpu_check.out_folder(None, gpu=False)
    assert (ROOT / "reports") not in default.parents and default.is_dir()
    shutil.rmtree(default)
    monkeypatch.setattr(gpu_check, "slug", lambda: "nvidia-h200-16-cores")
    assert gpu_check.out_folder(None, gpu=True) == ROOT / "reports" / "gpu" / "nvidia-h200-16-cores"


def test_packages_from_the_set_up_are_named_with_their_source_and_the_machines_are_not(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # no set-up's marker here: the machine's own interpreter
    assert gpu_check.foreign_packages() == {}
    venv = ROOT / ".venv"
    if not (venv / ".fastloops-installed").exists() or sys.prefix == str(venv):
        pytest.skip("no finished set-up in .venv")
    monkeypatch.setattr(sys, "prefix", str(venv))
    found = gpu_check.foreign_packages()
    names = {n.split()[0].lower() for group in found.values() for n in group}
    assert "pandas" in names and "torch" in names and all(w.startswith("the ") for w in found)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine it runs at the gpu scale: make gpu-check")
@pytest.mark.parametrize("mode", ["kernel", "script"])
def test_on_a_cpu_machine_two_notebooks_run_at_smoke_into_copies_an_archive_and_a_report(tmp_path, mode):
    """A subset of what the GPU machine runs: notebook 03, then the conclusion reading what 03 saved."""
    committed = sorted(p.relative_to(ROOT) for p in (ROOT / "reports").rglob("*"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = check_in_a_subprocess(["--parts", "13,03", "--reports", str(tmp_path), "--mode", mode], env, tmp_path, 600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "scale=smoke, no CUDA GPU" in run.stdout and "03: passed" in run.stdout and "13: passed" in run.stdout
    with tarfile.open(tmp_path / gpu_check.ARCHIVE) as tar:
        names = tar.getnames()
    copies = ["03_custom_loader.ipynb", "13_conclusion.ipynb"] if mode == "kernel" else []
    expected = ["logs/03.log", *copies[:1], "results/03_custom_loader.json", "logs/13.log", *copies[1:]]
    assert names == [*expected, "README.md"]  # the conclusion saves no result of its own
    if mode == "kernel":
        executed = json.loads((tmp_path / "03_custom_loader.ipynb").read_text())
        assert any(c.get("outputs") for c in executed["cells"] if c["cell_type"] == "code")
    else:
        assert "smoke" in (tmp_path / "logs" / "03.log").read_text()  # the script's printout stands in for a copy
    assert f"; scale: smoke; notebooks as {mode}" in (tmp_path / "README.md").read_text()
    assert sorted(p.relative_to(ROOT) for p in (ROOT / "reports").rglob("*")) == committed


def test_the_conclusion_reads_a_gpu_machines_results(tmp_path):
    """Notebook 13 over the committed H200 results (a copy: it writes its report into the folder it reads)."""
    committed = ROOT / "reports" / "runs" / "nvidia-h200-16-cores-2026-11-27"
    shutil.copytree(committed, tmp_path / "h200")
    env = {**os.environ, "FASTLOOPS_RESULTS": str(tmp_path / "h200"), "FASTLOOPS_DATA": str(tmp_path / "data")}
    script = tmp_path / "13.py"
    script.write_text(as_script.script(notebooks.notebook_paths(["13"])[0], solutions=True))
    run = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT / "notebooks", env={**env, "MPLBACKEND": "Agg"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "benchmark results" in run.stdout and "cuda" in run.stdout
