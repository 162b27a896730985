import functools
import json
from pathlib import Path

import nbformat
import pytest

from fastloops_book import notebooks, report
from fastloops_helpers import measure


def test_report_gathers_every_saved_result(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_SCALE", "smoke")  # the times below are a smoke run's
    measure.save_results(
        "01_the_question", {"ratio": 3.0}, rows=[{"loop": "numpy", "ms": 1.5}], path=tmp_path / "01_the_question.json"
    )
    measure.save_results("bench-loops", {"helpers_over_numpy": 0.5}, path=tmp_path / "bench-loops.json")
    (tmp_path / "01_the_question-bars.png").write_bytes(b"png")
    (tmp_path / "notes.json").write_text(json.dumps([1, 2]))  # not a result: ignored
    (tmp_path / "notebook_times.json").write_text(
        json.dumps({"smoke": {"seconds": {"00_setup.ipynb": 2.0, "01_the_question.ipynb": 3.0}, "failed": []}})
    )
    text = report.build(tmp_path).read_text()
    assert "## 01_the_question" in text and "## bench-loops" in text
    assert "| ratio | 3 |" in text and "| numpy | 1.5 |" in text
    assert "![01_the_question-bars](01_the_question-bars.png)" in text
    assert "| total | smoke | 5 |" in text and measure.hardware_line() in text


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


def test_stored_progress_bar_keeps_its_final_line_and_streams_coalesce():
    frames = "".join(f"\repochs: {10 * i}%|{'#' * i}{' ' * (10 - i)}| {i}/10" for i in range(11)) + "\n"
    outs = [
        nbformat.v4.new_output("stream", name="stderr", text=frames[:40]),
        nbformat.v4.new_output("stream", name="stdout", text="a\n"),
        nbformat.v4.new_output("stream", name="stderr", text=frames[40:]),
        nbformat.v4.new_output("stream", name="stdout", text="b\n"),
    ]
    merged = notebooks.coalesce_streams(outs)
    assert [o["name"] for o in merged] == ["stderr", "stdout"]
    assert merged[0]["text"] == "epochs: 100%|##########| 10/10\n" and merged[1]["text"] == "a\nb\n"


def test_finished_bars_of_an_uncompared_cell_are_stored_as_plain_text_in_order():
    bar = "load only: 100%|##########| 9/9\n"
    outs = [
        nbformat.v4.new_output("stream", name="stderr", text=bar),
        nbformat.v4.new_output("stream", name="stdout", text="table\n"),
    ]
    assert [(o["name"], o["text"]) for o in notebooks.bars_as_text(outs)] == [("stdout", bar + "table\n")]
    alone = notebooks.bars_as_text([nbformat.v4.new_output("stream", name="stderr", text=bar)])
    assert [o["name"] for o in alone] == ["stdout"]
    warned = [nbformat.v4.new_output("stream", name="stderr", text=bar + "UserWarning: careful\n")]
    assert notebooks.bars_as_text(warned)[0]["name"] == "stderr"  # a warning stays where it is seen
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", name="stderr", text=bar)])]
    assert notebooks.clean(nb).cells[0].outputs[0]["name"] == "stderr"  # compared by nbval: left as run


def test_coalescing_matches_what_nbval_compares():
    plugin = __import__("pytest").importorskip("nbval.plugin")
    text = "x\rab\ncd\r\ref\b\bgh\n\r"
    ours = notebooks.coalesce_streams([nbformat.v4.new_output("stream", name="stderr", text=text)])
    theirs = plugin.coalesce_streams([nbformat.v4.new_output("stream", name="stderr", text=text)])
    assert ours[0]["text"] == theirs[0]["text"]
    again = notebooks.coalesce_streams([nbformat.v4.new_output("stream", name="stderr", text=ours[0]["text"])])
    assert again[0]["text"] == ours[0]["text"]  # idempotent: a stored notebook stays as it is


def test_run_time_card_is_generated_at_the_marker(tmp_path, monkeypatch):
    save = functools.partial(notebooks.save_times, tmp_path / "t.json", inplace=True)  # runs of the committed files
    times = save({"05_x.ipynb": 14.2}, [], "2026-01-02T00:00:00+00:00", "smoke")
    times = save({"05_x.ipynb": 95.0}, [], "2026-01-03T00:00:00+00:00", "workshop")
    assert set(times) == {"smoke", "workshop"}  # each run is filed under the scale it ran at
    nb = nbformat.v4.new_notebook()
    nb.cells.append(
        nbformat.v4.new_markdown_cell(
            f"# 05 · X\n\n| | |\n|---|---|\n| **Run time** | {notebooks.RUN_TIME_MARKER} old text |\n"
        )
    )
    path = tmp_path / "05_x.ipynb"
    nbformat.write(nb, path)
    assert notebooks.refresh_card(path, times)
    line = [ln for ln in nbformat.read(path, as_version=4).cells[0].source.splitlines() if "Run time" in ln][0]
    assert "workshop ~1.6 min" in line and "old text" not in line and line.endswith("|")
    assert not notebooks.refresh_card(path, times)  # nothing new: unchanged


def test_a_run_into_another_folder_leaves_the_cards_alone(tmp_path, monkeypatch):
    """make reproduce runs copies (--out): its times go to the report, the cards keep the committed outputs' run."""
    monkeypatch.setenv("FASTLOOPS_SCALE", "workshop")  # the report shows the scale it runs at: make test sets smoke
    path = tmp_path / "05_x.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(f"| **Run time** | {notebooks.RUN_TIME_MARKER} old text |"))
    nbformat.write(nb, path)
    times_file = tmp_path / "notebook_times.json"
    times = notebooks.save_times(times_file, {"05_x.ipynb": 95.0}, [], "2026-01-03T00:00:00+00:00", "workshop")
    assert notebooks.card_text("05_x.ipynb", times) is None and not notebooks.refresh_card(path, times)
    notebooks.save_times(times_file, {"05_x.ipynb": 30.0}, [], "2026-01-04T00:00:00+00:00", "workshop", inplace=True)
    times = notebooks.save_times(times_file, {"05_x.ipynb": 95.0}, [], "2026-01-05T00:00:00+00:00", "workshop")
    assert "workshop ~30 s" in notebooks.card_text("05_x.ipynb", times)  # the in-place run, not the later copy
    assert times["workshop"]["seconds"]["05_x.ipynb"] == 95.0  # what the report shows
    assert notebooks.main(["cards", "--times", str(times_file), str(path)]) == 0
    assert "workshop ~30 s" in nbformat.read(path, as_version=4).cells[0].source
    report_text = report.build(tmp_path).read_text()
    assert "| 05_x.ipynb | workshop | 95 | ok |" in report_text and "not this one" in report_text


def test_make_reproduce_never_rewrites_the_cards():
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    recipe = makefile.split("\nreproduce:")[1].split("\n\n")[0]
    assert "book.notebooks run --out" in recipe and "--inplace" not in recipe and " cards" not in recipe
    assert "book.report" in recipe  # the run times go to the report


def test_duration_formats():
    assert [notebooks.duration(s) for s in (4.24, 14.6, 95, 1500)] == ["~4.2 s", "~15 s", "~1.6 min", "~25 min"]


def test_readme_blocks_are_rewritten_and_the_rest_kept(tmp_path):
    measure.save_results("bench-gather", {"helpers_gb_per_s": 3.5}, path=tmp_path / "bench-gather.json")
    readme = tmp_path / "README.md"
    readme.write_text(
        "intro\n<!-- generated: benchmarks (make reproduce) -->\nold\n<!-- /generated: benchmarks -->\noutro\n"
    )
    assert report.rewrite_readme(readme, tmp_path) == ["benchmarks"]
    text = readme.read_text()
    assert text.startswith("intro\n<!-- generated: benchmarks") and text.endswith(
        "<!-- /generated: benchmarks -->\noutro\n"
    )
    assert "| gather | helpers_gb_per_s | >= 3 GB/s | 3.5 | single run | met |" in text and "\nold\n" not in text


def test_report_shows_each_notebook_figure_once_and_benchmarks_qualified(tmp_path):
    measure.save_results("01_the_question", {"helpers_over_numpy": 0.7}, path=tmp_path / "a.json")
    measure.save_results("bench-loops", {"helpers_over_numpy": 1.1}, path=tmp_path / "b.json")
    text = report.build(tmp_path).read_text()
    assert text.count("| helpers_over_numpy | 0.7 |") == 1
    assert "| bench-loops.helpers_over_numpy | 1.1 |" in text and "| helpers_over_numpy | 1.1 |" not in text


def test_rel_prints_paths_without_the_machine(monkeypatch, tmp_path):
    from fastloops_helpers import config

    monkeypatch.setenv("FASTLOOPS_DATA", str(tmp_path / "shared"))
    assert config.rel(config.project_root() / "results" / "a.json") == "results/a.json"
    assert config.rel(tmp_path / "shared" / "otto" / "x.npy") == "$FASTLOOPS_DATA/otto/x.npy"
    assert config.rel("/somewhere/else/file.txt") == "file.txt"
    assert "/" not in config.describe().split("data=")[1].split(",")[0].removeprefix("$FASTLOOPS_DATA")


def test_the_conclusion_runs_after_the_notebooks_it_reads():
    paths = notebooks.conclusion_last(notebooks.notebook_paths())
    assert paths[-1].name == notebooks.CONCLUSION and len(paths) == len(notebooks.notebook_paths())
    assert [p.name for p in paths[:-1]] == sorted(p.name for p in paths[:-1])


def test_clean_hides_each_solution_input_and_output_in_the_lab():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("assert x", metadata={"tags": ["solution"]}),
    ]
    out = notebooks.clean(nb)
    assert out.cells[1].metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    assert out.cells[1].source == notebooks.SOLUTION_FIRST_LINE + "\nassert x"  # what the collapsed cell shows
    assert "jupyter" not in out.cells[0].metadata  # only solutions are hidden
    assert notebooks.hide_solutions(out) == 0  # idempotent


def test_a_notebook_is_named_by_its_path_its_name_or_its_number():
    path = notebooks.notebook_paths()[7]
    named = notebooks.notebook_paths([str(path), path.stem, path.stem[:2], str(int(path.stem[:2]))])
    assert [p.resolve() for p in named] == [path.resolve()] * 4
    with pytest.raises(SystemExit, match=r"no such notebook: '99'.*its number \(07\).*00_setup"):
        notebooks.notebook_paths(["99"])
