"""Unit tests run on real time: the warp (book/fastloops_book/instruments/warp.py) is for the notebooks' compared cells.

`make test` sets FASTLOOPS_WARP for its whole pytest run, so that the nbval pass over notebooks/ runs warped.
A unit test checks what code computes from durations it controls (a loader that sleeps 20 ms, a step of 2 ms);
a 16x warp would only test the warp. So every test here runs with the warp off, in this process and in the
processes it starts; tests/test_warp.py turns it on where it tests it. The environment is restored after each
test, so the notebooks' kernels, started later in the same run, still see the seed.
"""

from __future__ import annotations

import pytest

from fastloops_book.instruments import warp
from fastloops_helpers.measure import clock


@pytest.fixture(autouse=True)
def _real_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warp.ENV, raising=False)
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
