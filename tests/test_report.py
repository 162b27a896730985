import json

import nbformat

from fastloops_helpers import measure, notebooks, report


def test_report_gathers_every_saved_result(tmp_path):
    measure.save_results("01_the_question", {"ratio": 3.0}, rows=[{"loop": "numpy", "ms": 1.5}],
                        path=tmp_path / "01_the_question.json")
    measure.save_results("bench-loops", {"helpers_over_numpy": 0.5}, path=tmp_path / "bench-loops.json")
    (tmp_path / "01_the_question-bars.png").write_bytes(b"png")
    (tmp_path / "notes.json").write_text(json.dumps([1, 2]))  # not a result: ignored
    (tmp_path / "notebook_times.json").write_text(json.dumps(
        {"scale": "smoke", "seconds": {"00_setup.ipynb": 2.0, "01_the_question.ipynb": 3.0}, "failed": []}))
    text = report.build(tmp_path).read_text()
    assert "## 01_the_question" in text and "## bench-loops" in text
    assert "| ratio | 3 |" in text and "| numpy | 1.5 |" in text
    assert "![01_the_question-bars](01_the_question-bars.png)" in text
    assert "| total | 5 |" in text and measure.hardware_line() in text


def test_markdown_table_escapes_pipes_and_fills_missing_cells():
    table = report.markdown_table([{"a": "x|y"}, {"b": 2}])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| x\\|y |  |", "|  | 2 |"]


def test_clean_drops_volatile_metadata_and_keeps_counts():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("1 + 1", execution_count=3)
    cell.metadata["execution"] = {"iopub.status.busy": "2026-01-01"}
    cell.outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=3)]
    nb.cells.append(cell)
    nb.metadata["widgets"] = {"state": {}}
    nb.metadata["kernelspec"] = {"name": "venv-kernel"}
    out = notebooks.clean(nb)
    assert "execution" not in out.cells[0].metadata and "widgets" not in out.metadata
    assert out.cells[0].execution_count == 3 and out.cells[0].outputs
    assert out.metadata["kernelspec"]["name"] == "python3"
