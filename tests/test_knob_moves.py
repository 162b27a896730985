"""A knob changed in the defaults block changes what is measured (not only what is recorded).

The notebook runs at the smoke scale with its knob set after its `defaults` cell, the one way every runner sets
one (`runner.prepared`); the saved measurement must move by a bound that holds on any machine, busy or not.
"""

import json
import os
from pathlib import Path

import nbformat
import pytest

from fastloops_book import runner

ROOT = Path(__file__).resolve().parents[1]


def run_with_knobs(name: str, knobs: dict[str, str], results: Path) -> dict:
    """Execute notebooks/NAME with `knobs` set after its defaults cell, as the runner sets them; return its JSON."""
    path = ROOT / "notebooks" / name
    nb = runner.prepared(nbformat.read(path, as_version=4), name, knobs, solutions=True)
    env = {**os.environ, "FASTLOOPS_SCALE": "smoke", "FASTLOOPS_RESULTS": str(results)}
    runner.in_kernel(nb, path.parent, env, timeout=600)
    return json.loads((results / f"{path.stem}.json").read_text())


@pytest.mark.slow
def test_notebook_07_step_ms_reaches_the_epoch(tmp_path):
    from fastloops_helpers import config

    ten_times = 10 * config.size("anatomy.step_ms", "smoke")  # a ten times longer step
    saved = run_with_knobs("07_dataloader_anatomy.ipynb", {"step_ms": repr(ten_times)}, tmp_path)
    step_ms = saved["provenance"]["knobs"]["step_ms"]
    assert step_ms == 10 * config.size("anatomy.step_ms", "smoke")
    figures = saved["figures"]
    # num_workers=0 runs each step after its batch: the epoch lasts at least batches x step, whatever the CPU does
    assert figures["workers0_epoch_s"] >= figures["workers0_batches"] * step_ms / 1000


@pytest.mark.slow
def test_notebook_01_batch_size_reaches_every_loop(tmp_path):
    saved = run_with_knobs("01_the_question.ipynb", {"batch_size": "3000"}, tmp_path)  # exercise 2, as written
    samples = saved["provenance"]["knobs"]["samples"]
    assert saved["provenance"]["knobs"]["batch_size"] == 3000
    # every loop, timed or not, made the batches a 3000-sample batch makes: ceil(samples / 3000)
    assert {r["loop"]: r["batches_per_epoch"] for r in saved["rows"]} == {
        r["loop"]: -(-samples // 3000) for r in saved["rows"]
    }
