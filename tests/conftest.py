"""Unit tests run on real time: the warp (book/fastloops_book/instruments/warp.py) is for the notebooks' compared cells.

`make test` sets FASTLOOPS_WARP for its whole pytest run, so that the nbval pass over notebooks/ runs warped.
A unit test checks what code computes from durations it controls (a loader that sleeps 20 ms, a step of 2 ms);
a 16x warp would only test the warp. So every test here runs with the warp off, in this process and in the
processes it starts; tests/test_warp.py turns it on where it tests it. The environment is restored after each
test, so the notebooks' kernels, started later in the same run, still see the seed.

The same holds for the mutation check (tests/mutation.py): `pytest_configure` starts every kernel of the run with
a start-up file that installs it, unit tests run without it, and tests/test_mutations.py, moved to the end of the
run, reads what the notebooks' kernels recorded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from fastloops_book.instruments import warp
from fastloops_helpers.measure import clock

TESTS = Path(__file__).resolve().parent
STARTUP = """import importlib.util
spec = importlib.util.spec_from_file_location("fastloops_mutation", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.register(get_ipython())
"""
LAST = "test_mutations.py::test_every_solution_fails_a_mutation"


class Mutations:
    """This run's mutation check: where its kernels write, which notebooks nbval collected, which failed."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fastloops-mutations-"))
        self.records = self.root / "records"
        self.records.mkdir()
        startup = self.root / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00_mutation_check.py").write_text(STARTUP.format(path=str(TESTS / "mutation.py")))
        self.env = {"IPYTHONDIR": str(self.root / "ipython"), "FASTLOOPS_MUTATIONS": str(self.records)}
        self.notebooks: set[Path] = set()
        self.failed: set[Path] = set()
        self.summary: list[str] = []  # what tests/test_mutations.py found, printed at the end of the run

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = Path(report.fspath)
        if report.failed and path.suffix == ".ipynb":
            self.failed.add(path.resolve())

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for line in self.summary:
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.mutations = Mutations()  # type: ignore[attr-defined]
    config.pluginmanager.register(config.mutations)  # a plugin, so that it sees the notebooks' reports too
    os.environ.update(config.mutations.env)


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "mutations"):
        shutil.rmtree(config.mutations.root, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.mutations.notebooks = {Path(i.fspath).resolve() for i in items if Path(i.fspath).suffix == ".ipynb"}
    items.sort(key=lambda i: i.nodeid.endswith(LAST))  # stable: the check after every notebook


@pytest.fixture(autouse=True)
def _real_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warp.ENV, raising=False)
    for name in ("IPYTHONDIR", "FASTLOOPS_MUTATIONS"):  # a kernel a unit test starts runs no mutation check
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(warp, "SEED", None)
    monkeypatch.setattr(clock, "_scaling", None)  # make test's sitecustomize installed it in this process too


@pytest.fixture
def slide() -> dict:
    """Stand-ins for notebook 01's slide cells (`experiments.loops.SLIDE`): small loops that count their batches."""
    import numpy as np
    import torch
    from torch.utils.data import DataLoader

    from fastloops_helpers.teach.slide_code import loader_epoch

    def python_epoch(n, batch_size):
        return lambda: len(range(0, n, batch_size))

    def numpy_epoch(n, batch_size):
        return lambda: len(np.random.default_rng(0).permutation(n).reshape(-1, batch_size))

    def slide_dataloader(n, batch_size, num_workers):
        return DataLoader(torch.arange(n), batch_size=batch_size, shuffle=True, num_workers=num_workers)

    return {
        "python_epoch": python_epoch,
        "numpy_epoch": numpy_epoch,
        "slide_dataloader": slide_dataloader,
        "tf_data_pipeline": lambda n, batch_size: None,
        "loader_epoch": loader_epoch,
    }
