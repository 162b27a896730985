"""A knob changed in the defaults block changes what is measured (not only what is recorded).

The notebook runs at the smoke scale with one cell inserted after its `defaults` cell, as a reader would edit
it; the saved measurement must move by a bound that holds on any machine, busy or not.
"""

import json
import os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_with_override(name: str, override: str, results: Path) -> dict:
    """Execute notebooks/NAME with `override` inserted after its defaults cell; return its saved JSON."""
    from nbclient import NotebookClient

    path = ROOT / "notebooks" / name
    nb = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "defaults" in c.metadata.get("tags", []))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(override))
    env = {**os.environ, "FASTLOOPS_SCALE": "smoke", "FASTLOOPS_RESULTS": str(results)}
    NotebookClient(
        nb,
        kernel_name="python3",
        timeout=600,
        resources={"metadata": {"path": str(path.parent)}},
        extra_arguments=["--IPKernelApp.capture_fd_output=False"],
    ).execute(env=env)
    return json.loads((results / f"{path.stem}.json").read_text())


@pytest.mark.slow
def test_notebook_07_step_ms_reaches_the_epoch(tmp_path):
    from fastloops_helpers import config

    saved = run_with_override(
        "07_dataloader_anatomy.ipynb", "step_ms = step_ms * 10  # a ten times longer step", tmp_path
    )
    step_ms = saved["provenance"]["knobs"]["step_ms"]
    assert step_ms == 10 * config.size("anatomy.step_ms", "smoke")
    figures = saved["figures"]
    # num_workers=0 runs each step after its batch: the epoch lasts at least batches x step, whatever the CPU does
    assert figures["workers0_epoch_s"] >= figures["workers0_batches"] * step_ms / 1000


@pytest.mark.slow
def test_notebook_01_batch_size_reaches_every_loop(tmp_path):
    saved = run_with_override("01_the_question.ipynb", "batch_size = 3000  # exercise 2, followed as written", tmp_path)
    samples = saved["provenance"]["knobs"]["samples"]
    assert saved["provenance"]["knobs"]["batch_size"] == 3000
    # every loop, timed or not, made the batches a 3000-sample batch makes: ceil(samples / 3000)
    assert {r["loop"]: r["batches_per_epoch"] for r in saved["rows"]} == {
        r["loop"]: -(-samples // 3000) for r in saved["rows"]
    }
