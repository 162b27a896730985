"""Unit tests run on real time: the warp (measure/warp.py) is for the notebooks' compared cells.

`make test` sets FASTLOOPS_WARP for its whole pytest run, so that the nbval pass over notebooks/ runs warped.
A unit test checks what code computes from durations it controls (a loader that sleeps 20 ms, a step of 2 ms);
a 16x warp would only test the warp. So every test here runs with the warp off, in this process and in the
processes it starts; tests/test_warp.py turns it on where it tests it. The environment is restored after each
test, so the notebooks' kernels, started later in the same run, still see the seed.
"""

from __future__ import annotations

import pytest

from fastloops_helpers.measure import warp


@pytest.fixture(autouse=True)
def _real_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warp.ENV, raising=False)
    monkeypatch.setattr(warp, "SEED", None)
