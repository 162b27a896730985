"""Build a static site of the executed notebooks for self-study, from their stored outputs.

`python -m fastloops_book.publish.site [--out results/site] [--results results]` writes one HTML page
per notebook (with previous / index / next links and the machine the outputs came from), an index with the
sequence (each notebook's title and question), the seeds' claims, and, when `make reproduce` has written
results/REPORT.md, that report with its figures. Nothing is re-executed and nothing is fetched: open
OUT/index.html from disk, or serve the folder. Explained in README.md, "Present and read".
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from fastloops_helpers import config

from . import api, offline

HARDWARE = re.compile(r"^.+\(\d+c/\d+t\), \d+ GiB RAM, .+ \| python .+$")  # measure.hardware_line()'s shape
QUESTION = re.compile(r"^\|\s*\*\*Question\*\*\s*\|\s*(.+?)\s*\|\s*$", re.M)
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 0 auto; padding: 0 1rem 2rem; }
nav.fl-nav { display: flex; justify-content: space-between; gap: 1rem; padding: .6rem 0; font-size: 15px;
             border-bottom: 1px solid #ddd; margin-bottom: 1rem; }
nav.fl-nav.bottom { border-top: 1px solid #ddd; border-bottom: 0; margin-top: 2rem; }
.fl-hw { color: #555; font-size: 13px; margin: 0 0 1rem; }
table.fl { border-collapse: collapse; margin: 1rem 0; } table.fl td, table.fl th { border: 1px solid #ccc;
           padding: .3rem .6rem; vertical-align: top; text-align: left; }
img { max-width: 100%; }
details.fl-solution { border-left: 3px solid #7a9; padding-left: .6rem; margin: .5rem 0; }
details.fl-solution > summary { cursor: pointer; color: #375; }
"""
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{style}</style></head>
<body>{nav}<main>{body}</main>{nav_bottom}</body></html>
"""
TEMPLATE = (
    offline.NO_CDN_BLOCKS
    + """
{%- extends 'index.html.j2' -%}
{% block html_head_css %}<style>{{ resources.fl_style }}</style>{% endblock html_head_css %}
{% block body_header %}{{ super() }}{{ resources.fl_nav }}{{ resources.fl_hw }}{% endblock body_header %}
{% block body_footer %}{{ resources.fl_nav_bottom }}{{ super() }}{% endblock body_footer %}
{% block codecell %}
{%- if 'solution' in cell.metadata.get('tags', []) -%}
<details class="fl-solution"><summary>Solution: try the exercise first</summary>{{ super() }}</details>
{%- else -%}{{ super() }}{%- endif -%}
{% endblock codecell %}
"""
)


@dataclass
class Entry:
    """One notebook of the sequence: where it is, its page, title, question and the machine it ran on."""

    path: Path
    page: str
    title: str
    question: str
    hardware: str | None


def card(nb: dict) -> tuple[str, str]:
    """Return the notebook's title (its first heading) and the question of its card ('' when none)."""
    first = nb["cells"][0]["source"] if nb["cells"] else ""
    title = next((line.lstrip("# ").strip() for line in first.splitlines() if line.startswith("#")), "")
    match = QUESTION.search(first)
    return title, match.group(1) if match else ""


def hardware(nb: dict) -> str | None:
    """Return the hardware line printed in the notebook's stored outputs, or None."""
    lines = (
        line.strip()
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
        for line in "".join(out.get("text", "")).splitlines()
    )
    return next((line for line in lines if HARDWARE.match(line)), None)


def entries(paths: list[Path]) -> list[Entry]:
    """Read the notebooks' cards and hardware lines, in order."""
    found = []
    for path in paths:
        nb = offline.read(path)
        title, question = card(nb)
        found.append(Entry(path, path.stem + ".html", (title or path.stem).replace("`", ""), question, hardware(nb)))
    return found


def nav(seq: list[Entry], i: int | None, bottom: bool = False) -> str:
    """Return the previous / index / next bar for page `i` of `seq` (None: a page outside the sequence)."""
    prev = seq[i - 1] if i else None
    nxt = seq[i + 1] if i is not None and i + 1 < len(seq) else None

    def link(e: Entry | None, rel: str, arrow: str) -> str:
        return f'<a rel="{rel}" href="{e.page}">{arrow} {html.escape(e.title)}</a>' if e else "<span></span>"

    return (
        f'<nav class="fl-nav{" bottom" if bottom else ""}">{link(prev, "prev", "&larr;")}'
        f'<a href="index.html">index</a>{link(nxt, "next", "&rarr;")}</nav>'
    )


def markdown(text: str) -> str:
    """Render markdown (GitHub tables included) to HTML, as nbconvert renders notebook cells."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(text)


def inline(text: str) -> str:
    """Render one line of markdown (code spans, emphasis) to HTML without the enclosing paragraph."""
    return re.sub(r"^<p>(.*)</p>\s*$", r"\1", markdown(text).strip(), flags=re.S)


def write_notebook_page(seq: list[Entry], i: int, out: Path) -> None:
    """Export notebook `i` of `seq` to out/NN_topic.html with navigation, from its stored outputs."""
    entry = seq[i]
    hw = f'<p class="fl-hw">outputs stored from a run on: {html.escape(entry.hardware)}</p>' if entry.hardware else ""
    resources = {
        "fl_style": STYLE,
        "fl_nav": nav(seq, i),
        "fl_nav_bottom": nav(seq, i, bottom=True),
        "fl_hw": hw,
        "metadata": {"name": entry.title},
    }
    body, _ = offline.exporter("html", TEMPLATE).from_notebook_node(offline.read(entry.path), resources=resources)
    (out / entry.page).write_text(link_sources(body, out), encoding="utf-8")


SOURCE_LINK = re.compile(r'href="\.\./(fastloops_helpers/[\w/]+\.py)"')
API_LINK = re.compile(r'href="api/(fastloops_helpers[\w/]*)\.html#([\w.]+)"')


def link_sources(body: str, out: Path) -> str:
    """Point show_code's links at pages the site has (its listings link a file and an API page by module).

    A file link (`../fastloops_helpers/...py`, right in JupyterLab and on GitHub) goes to a highlighted copy of
    the file in out/src/; an API link goes to the module's reference page where pdoc wrote one, else to the
    public name's entry (`fastloops_helpers.__all__`, `measure.__all__`), else to the file's copy.
    """

    def to_api(match: re.Match[str]) -> str:
        module, qualname = match.group(1), match.group(2)
        if (out / "api" / f"{module}.html").exists():
            return match.group(0)
        return f'href="{public_entry(qualname.split(".")[0]) or source_page(_module_file(module), out)}"'

    return SOURCE_LINK.sub(lambda m: f'href="{source_page(m.group(1), out)}"', API_LINK.sub(to_api, body))


def public_entry(name: str) -> str:
    """Return the API reference's anchor for a public name ("" when the package does not export it)."""
    import fastloops_helpers
    from fastloops_helpers import measure

    if name in fastloops_helpers.__all__:
        return f"api/fastloops_helpers.html#{name}"
    return f"api/fastloops_helpers/measure.html#{name}" if name in measure.__all__ else ""


def _module_file(module: str) -> str:
    path = module.replace("/", ".").replace(".", "/")
    return f"{path}/__init__.py" if (config.project_root() / path).is_dir() else f"{path}.py"


def source_page(rel: str, out: Path) -> str:
    """Write out/src/REL.html, the package file REL highlighted with line anchors; return its link."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    link = f"src/{rel}.html"
    target = out / link
    code = (config.project_root() / rel).read_text(encoding="utf-8")
    formatter = HtmlFormatter(full=True, linenos="inline", lineanchors="L", title=rel, noclasses=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(highlight(code, PythonLexer(), formatter), encoding="utf-8")
    return link


def claims_table(results: Path) -> str:
    """Return the seeds' claims as an HTML table: as measured when results/ holds saved figures."""
    from .. import runs

    docs = runs.load(results)
    if runs.notebooks(docs):
        columns = ["seed", "says", "seed figure", "measured here", "needs", "status", "notebook"]
        note = f"measured in {_shown(results)} (its provenance says where)"
    else:
        columns = ["seed", "says", "seed figure", "needs", "notebook"]
        note = (
            f"no saved results in {_shown(results)}: run <code>make reproduce</code> to measure them here; "
            "notebook 13 shows them as measured in the run stored in the notebooks"
        )
    return f"<p>{note}.</p>" + runs.evaluate(docs)[columns].to_html(
        index=False, classes="fl", border=0, na_rep="-", float_format="{:.3g}".format
    )


def write_report_page(seq: list[Entry], results: Path, out: Path) -> str:
    """Render results/REPORT.md with its figures into out/report.html; return the index's paragraph on it."""
    report = results / "REPORT.md"
    if not report.is_file():
        return (
            f"<p>No report: {_shown(report)} does not exist yet. <code>make reproduce</code> runs every notebook "
            "and benchmark and writes it; <code>make site</code> then adds it here with its figures.</p>"
        )
    text = report.read_text(encoding="utf-8")
    (out / "figures").mkdir(exist_ok=True)
    for name in sorted(set(re.findall(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", text))):
        if (results / name).is_file():
            shutil.copy2(results / name, out / "figures" / Path(name).name)
            text = text.replace(f"]({name})", f"](figures/{Path(name).name})")
    (out / "report.html").write_text(
        PAGE.format(
            title="fastloops: reproduction report",
            style=STYLE,
            nav=nav(seq, None),
            body=markdown(text).replace("<table>", '<table class="fl">'),
            nav_bottom="",
        ),
        encoding="utf-8",
    )
    return f'<p>The <a href="report.html">reproduction report</a> of {_shown(report)}, with every figure and plot.</p>'


def write_index(seq: list[Entry], results: Path, out: Path) -> Path:
    """Write out/index.html: the sequence, the machine of the stored run, the claims and the report."""
    rows = "".join(
        f'<tr><td><a href="{e.page}">{inline(e.title)}</a></td><td>{inline(e.question)}</td></tr>' for e in seq
    )
    machines = sorted({e.hardware for e in seq if e.hardware})
    hw = (
        "<p>The outputs stored in the notebooks come from: " + "; ".join(html.escape(m) for m in machines) + "</p>"
        if machines
        else "<p>No hardware line found in the stored outputs.</p>"
    )
    body = (
        "<h1>fastloops: the notebooks, executed</h1>"
        "<p>How to make a PyTorch training loop wait less for data, measured on one machine. Read the notebooks "
        "in order; each one answers one question. To run them yourself: <code>make lab</code>. To use the "
        'helpers in your own loop: the <a href="api/fastloops_helpers.html">API reference</a>.</p>'
        + hw
        + f'<h2>The sequence</h2><table class="fl"><tr><th>notebook</th><th>question</th></tr>{rows}</table>'
        "<h2>The seeds' claims</h2>" + claims_table(results) + "<h2>Report</h2>" + write_report_page(seq, results, out)
    )
    target = out / "index.html"
    target.write_text(
        PAGE.format(title="fastloops notebooks", style=STYLE, nav="", body=body, nav_bottom=""), encoding="utf-8"
    )
    return target


def build(paths: list[Path], out: Path | None = None, results: Path | None = None) -> Path:
    """Write the site for `paths` into `out` (default results/site); return the index page."""
    out = Path(out) if out is not None else config.results_dir() / "site"
    results = Path(results) if results is not None else config.results_dir()
    out.mkdir(parents=True, exist_ok=True)
    seq = entries(paths)
    api.build(out / "api")  # first: the notebook pages link into it where it documents a module
    print("  api/ (the API reference)", flush=True)
    for i, entry in enumerate(seq):
        write_notebook_page(seq, i, out)
        print(f"  {entry.page}", flush=True)
    return write_index(seq, results, out)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(config.project_root()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    """Build the site and print how to open it."""
    from ..notebooks import notebook_paths

    parser = argparse.ArgumentParser(prog="python -m fastloops_book.publish.site")
    parser.add_argument("notebooks", nargs="*", help="paths (default: every notebooks/NN_*.ipynb)")
    parser.add_argument("--out", type=Path, help="output folder (default results/site)")
    parser.add_argument("--results", type=Path, help="saved results and REPORT.md (default results/)")
    args = parser.parse_args(argv)
    index = build(notebook_paths(args.notebooks), args.out, args.results)
    print(
        f"wrote {_shown(index)}: open it in a browser, or serve it with "
        f"`python -m http.server -d {_shown(index.parent)} --bind 127.0.0.1 8000`"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
