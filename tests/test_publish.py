"""The publishing tools without a browser: slide metadata, text twins, the lab command line, decks, the site."""

from __future__ import annotations

import re

import nbformat
import pytest

from fastloops_book.notebooks import notebook_paths
from fastloops_book.publish import deck, lab, site, slides, twins

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def toy_notebook() -> nbformat.NotebookNode:
    """Return a small notebook shaped like the course's: card, setup, sections, a plot, a save cell."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    plot = code("fig = plots.lines(table)")
    plot.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"})]
    save = code('print("saved", measure.save_results("x", figures).name)')
    save.outputs = [nbformat.v4.new_output("stream", name="stdout", text="saved x.json\n")]
    cells = [
        md("# 99 · Toy\n\n| | |\n|---|---|\n| **Question** | Is `x` fast? |"),
        code("import torch\nprint(config.describe())"),
        md("## 1. Predict\n\nSome prose."),
        code("x = 1"),
        plot,
        md("The plot shows x.\n\n## 2. Measure\n\nMore prose."),
        code("\n".join(f"y{i} = {i}" for i in range(25))),
        md("### A detail"),
        save,
        md("## Exercises"),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def kinds(nb) -> list[str]:
    return [c.metadata.slideshow.slide_type for c in nb.cells]


def test_slide_rules_on_a_toy_notebook():
    nb = slides.tag(toy_notebook())
    # the markdown cell with a mid-cell heading is split: 10 cells become 11
    assert [c.source.splitlines()[0] for c in nb.cells[5:7]] == ["The plot shows x.", "## 2. Measure"]
    assert kinds(nb) == [
        "slide",
        "skip",
        "slide",
        "-",
        "subslide",
        "subslide",
        "slide",
        "subslide",
        "subslide",
        "skip",
        "slide",
    ]
    assert nb.cells[6].id != nb.cells[5].id
    nbformat.validate(nb)


def test_slide_tagging_is_idempotent_and_tags_override():
    once = nbformat.writes(slides.tag(toy_notebook()))
    assert nbformat.writes(slides.tag(nbformat.reads(once, as_version=4))) == once
    nb = toy_notebook()
    nb.cells[3].metadata["tags"] = ["slide:notes"]
    assert kinds(slides.tag(nb))[3] == "notes"
    nb.cells[3].metadata["tags"] = ["slide:bogus"]
    with pytest.raises(ValueError, match="slide:bogus"):
        slides.tag(nb)


def test_every_committed_notebook_carries_slide_metadata():
    stale = []
    for path in notebook_paths():
        stored = nbformat.read(path, as_version=4)
        typed = all(c.metadata.get("slideshow", {}).get("slide_type") in slides.SLIDE_TYPES for c in stored.cells)
        if not typed or nbformat.writes(slides.tag(nbformat.read(path, as_version=4))) != nbformat.writes(stored):
            stale.append(path.name)
    assert not stale, f"slide metadata missing or out of date in {stale}; run: {slides.COMMAND}"


def test_every_notebook_has_a_text_twin_in_sync():
    out = twins.stale(notebook_paths())
    assert not out, f"text twins out of sync: {[p.name for p in out]}; run: {twins.COMMAND}"


def test_twin_check_catches_an_edited_cell_and_an_orphan(tmp_path):
    path = tmp_path / "99_toy.ipynb"
    nbformat.write(toy_notebook(), path)
    assert twins.stale([path]) == [twins.twin_path(path)]
    twins.write([path])
    assert twins.stale([path]) == []
    assert (
        "# %% [markdown]" in twins.twin_path(path).read_text() and "image/png" not in twins.twin_path(path).read_text()
    )
    nb = nbformat.read(path, as_version=4)
    nb.cells[3].source = "x = 2"
    nb.cells[4].outputs = []  # outputs alone never make a twin stale; the source edit does
    nbformat.write(nb, path)
    assert twins.stale([path]) == [twins.twin_path(path)]
    (tmp_path / "py" / "98_gone.py").write_text("# %%\n")
    assert tmp_path / "py" / "98_gone.py" in twins.stale([path])
    twins.write([path])
    assert twins.stale([path]) == [] and not (tmp_path / "py" / "98_gone.py").exists()


@pytest.mark.parametrize("as_root", [True, False])
def test_lab_command_binds_loopback_in_notebooks_and_allows_root_only_as_root(as_root, tmp_path):
    cmd = lab.command(8899, tmp_path, "abc", as_root=as_root)
    assert "--ip=127.0.0.1" in cmd and "--no-browser" in cmd and f"--ServerApp.root_dir={tmp_path}" in cmd
    assert ("--allow-root" in cmd) == as_root
    assert "--LabApp.news_url=None" in cmd
    assert lab.url(8899, "abc") == "http://127.0.0.1:8899/lab?token=abc"
    assert str(lab.CONFIG) in lab.environment()["JUPYTER_CONFIG_PATH"].split(":")
    assert (lab.CONFIG / "labconfig" / "default_setting_overrides.json").is_file()


def test_free_port_skips_a_taken_port():
    import socket

    with socket.socket() as taken:
        taken.bind((lab.HOST, 0))
        port = taken.getsockname()[1]
        assert lab.free_port(port, tries=5) != port


def test_deck_is_offline_and_has_slides(tmp_path):
    path = tmp_path / "99_toy.ipynb"
    nbformat.write(toy_notebook(), path)
    out = deck.render(path, tmp_path / "slides")
    page = out.read_text()
    assert (tmp_path / "slides" / "reveal.js" / "dist" / "reveal.js").is_file()
    assert (tmp_path / "slides" / "reveal.js" / "plugin" / "notes" / "notes.js").is_file()
    assert not re.findall(r"""(?:src|href)=["']https?://""", page), "the deck must load nothing from the network"
    assert page.count("<section") >= 5 and "Reveal.initialize" in page
    assert "import torch" not in page  # the setup cell is skipped


def test_site_pages_link_in_sequence_and_say_when_there_is_no_report(tmp_path):
    paths = []
    for n in (1, 2, 3):
        nb = toy_notebook()
        nb.cells[0].source = nb.cells[0].source.replace("99 · Toy", f"0{n} · Toy {n}")
        paths.append(tmp_path / f"0{n}_toy.ipynb")
        nbformat.write(nb, paths[-1])
    index = site.build(paths, tmp_path / "site", results=tmp_path / "no-results")
    text = index.read_text()
    assert all(f'href="0{n}_toy.html"' in text for n in (1, 2, 3)) and "Is <code>x</code> fast?" in text
    assert "does not exist yet" in text and "make reproduce" in text
    middle = (tmp_path / "site" / "02_toy.html").read_text()
    links = {
        rel: href
        for a in re.findall(r"<a [^>]*>", middle)
        for rel in re.findall(r'rel="(\w+)"', a)
        for href in re.findall(r'href="([^"]+)"', a)
    }
    assert links == {"prev": "01_toy.html", "next": "03_toy.html"} and 'href="index.html"' in middle
    assert not re.findall(r"""(?:src|href)=["']https?://""", middle)


def test_site_includes_the_report_and_its_figures(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "x-plot.png").write_bytes(__import__("base64").b64decode(PNG))
    (results / "REPORT.md").write_text("# report\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n![x-plot](x-plot.png)\n")
    path = tmp_path / "01_toy.ipynb"
    nbformat.write(toy_notebook(), path)
    site.build([path], tmp_path / "site", results=results)
    report = (tmp_path / "site" / "report.html").read_text()
    assert 'src="figures/x-plot.png"' in report and '<table class="fl">' in report
    assert (tmp_path / "site" / "figures" / "x-plot.png").is_file()
    assert 'href="report.html"' in (tmp_path / "site" / "index.html").read_text()


def test_site_claims_table_shows_the_figures_a_notebook_saved(tmp_path):
    from fastloops_book import claims

    c = next(c for c in claims.CLAIMS if c.at_least is not None and "/" not in c.key)
    results = tmp_path / "results"
    results.mkdir()
    doc = {"name": c.notebook, "provenance": {}, "figures": {c.key: c.at_least * 1000 + 0.5}}
    (results / f"{c.notebook}.json").write_text(__import__("json").dumps(doc))
    table = site.claims_table(results)
    assert "reproduced" in table and f"{c.at_least * 1000 + 0.5:.3g}" in table and "make reproduce" not in table
    assert "make reproduce" in site.claims_table(tmp_path / "nothing")


def test_hardware_line_is_found_in_stored_outputs():
    nb = toy_notebook()
    line = "Intel(R) Xeon(R) Processor (2c/2t), 24 GiB RAM, no GPU | python 3.11.7, torch 2.13.0+cpu"
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"scale=smoke\n{line}\n")]
    assert site.hardware(nb) == line
    assert site.card(nb) == ("99 · Toy", "Is `x` fast?")


def test_site_folds_solutions_and_the_deck_leaves_them_out(tmp_path):
    nb = toy_notebook()
    nb.cells += [
        nbformat.v4.new_markdown_cell("## Exercises"),
        nbformat.v4.new_markdown_cell("**1.** Add."),
        nbformat.v4.new_code_cell(
            "answer_cell_marker = 2 + 2\nassert answer_cell_marker == 4",
            metadata={"tags": ["solution", "nbval-ignore-output"]},
        ),
    ]
    path = tmp_path / "01_toy.ipynb"
    nbformat.write(slides.tag(nb), path)
    page = (site.build([path], tmp_path / "site", results=tmp_path / "none").parent / "01_toy.html").read_text()
    folded = re.search(r'<details class="fl-solution">(.*?)</details>', page, re.S)
    assert folded and "answer_cell_marker" in folded.group(1)
    assert "answer_cell_marker" not in deck.render(path, tmp_path / "slides").read_text()


def test_api_reference_documents_the_public_names_and_links_notebooks(tmp_path):
    import fastloops_helpers

    index = site.build([], tmp_path / "site", results=tmp_path / "none")
    page = (index.parent / "api" / "fastloops_helpers.html").read_text()
    assert all(f'id="{name}"' in page for name in fastloops_helpers.__all__ if name != "measure")
    assert '<a href="../03_custom_loader.html">notebooks/03_custom_loader.ipynb</a>' in page
    assert 'href="api/fastloops_helpers.html"' in index.read_text()
    assert 'id="verdict"' in (index.parent / "api" / "fastloops_helpers" / "measure.html").read_text()


def test_the_site_points_show_code_links_at_pages_it_has(tmp_path):
    """show_code links a file (right in JupyterLab and on GitHub) and an API page by module; the site has neither."""
    from fastloops_book.publish import site

    (tmp_path / "api" / "fastloops_helpers").mkdir(parents=True)
    (tmp_path / "api" / "fastloops_helpers" / "measure.html").write_text("<html></html>")
    body = (
        '<a href="../fastloops_helpers/load/rows.py">rows.py</a>'
        '<a href="api/fastloops_helpers/load/batch_loader.html#BatchLoader.__iter__">API reference</a>'
        '<a href="api/fastloops_helpers/experiments/bandwidth.html#copier">API reference</a>'
        '<a href="api/fastloops_helpers/measure.html#Timer">API reference</a>'
    )
    hrefs = re.findall(r'href="([^"]+)"', site.link_sources(body, tmp_path))
    assert hrefs == [
        "src/fastloops_helpers/load/rows.py.html",
        "api/fastloops_helpers.html#BatchLoader",  # a public class: its entry in the reference
        "src/fastloops_helpers/experiments/bandwidth.py.html",  # not in the reference: the file's copy
        "api/fastloops_helpers/measure.html#Timer",  # a page pdoc wrote: kept
    ]
    assert "gather" in (tmp_path / hrefs[0]).read_text() and (tmp_path / hrefs[2]).exists()
