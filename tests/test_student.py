"""The students' copies: prose and code kept, outputs, counts and solutions gone."""

from pathlib import Path

import nbformat
import pytest

from fastloops_book import student

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_student_copies_keep_the_prose_and_drop_the_answers(tmp_path):
    assert student.main(["--out", str(tmp_path)] + [str(p) for p in NOTEBOOKS]) == 0
    for path in NOTEBOOKS:
        source, copy = nbformat.read(path, as_version=4), nbformat.read(tmp_path / path.name, as_version=4)
        assert len(copy.cells) == len(source.cells)
        assert [c.source for c in copy.cells if c.cell_type == "markdown"] == [
            c.source for c in source.cells if c.cell_type == "markdown"
        ]
        code = [c for c in copy.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code)
        assert not any("solution" in c.metadata.get("tags", []) for c in copy.cells)
        solutions = sum("solution" in c.metadata.get("tags", []) for c in source.cells)
        assert sum(c.source == student.ANSWER_HERE for c in code) == solutions


def test_a_solution_is_replaced_by_an_empty_answer_cell():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("**1.** Try it."),
        nbformat.v4.new_code_cell(
            "x = 1\nassert x",
            metadata={"tags": ["solution", "nbval-ignore-output"]},
            outputs=[nbformat.v4.new_output("stream", text="1\n")],
            execution_count=3,
        ),
    ]
    copy = student.student_copy(nb)
    assert copy.cells[1].source == student.ANSWER_HERE and copy.cells[1].outputs == []
    assert nb.cells[1].source.startswith("x = 1")  # the original is untouched
    with pytest.raises(SystemExit):
        student.main(["no/such/notebook.ipynb"])
