"""Render a notebook as an offline reveal.js slide deck from its stored outputs (no re-execution).

`python -m fastloops_book.publish.deck NOTEBOOK [--out results/slides]` writes OUT/NN_topic.slides.html
and a copy of reveal.js beside it (OUT/reveal.js/), so the folder opens from disk or any static server
with no network. reveal.js comes from the installed `sphinx-revealjs` package (the `docs` extra), which
ships its built files; set FASTLOOPS_REVEALJS to another reveal.js 4/5 folder (one with dist/ and plugin/)
to use that instead. Slide boundaries come from the cells' metadata (`publish.slides`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from fastloops_helpers import config

from . import offline, slides

REVEAL_PARTS = ("dist/reveal.js", "dist/reveal.css", "dist/reset.css", "dist/theme", "plugin/notes/notes.js")
REVEAL_DIR = "reveal.js"

TEMPLATE = (
    offline.NO_CDN_BLOCKS
    + """
{%- extends 'index.html.j2' -%}
{% block html_head_css %}
<style>
:root { --jp-code-font-size: 15px; }  /* 88-column code lines fit the 960 px slide */
.reveal .slides > section, .reveal .slides > section > section { overflow-y: auto; max-height: 100%; }
.reveal section img { max-height: 560px; width: auto; }
.reveal .jp-OutputArea-output pre { max-height: 420px; overflow-y: auto; }
</style>
{% endblock html_head_css %}
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({controls: true, progress: true, hash: true, center: false,
                   transition: "{{ resources.reveal.transition }}", slideNumber: "c/t",
                   width: {{ resources.reveal.width or 960 }}, height: {{ resources.reveal.height or 700 }},
                   plugins: [RevealNotes]});
</script>
{% endblock footer_js %}
</html>
"""
)


def reveal_source() -> Path:
    """Return the folder of an installed reveal.js build (FASTLOOPS_REVEALJS, else sphinx-revealjs's copy)."""
    if os.environ.get("FASTLOOPS_REVEALJS"):
        folder = Path(os.environ["FASTLOOPS_REVEALJS"])
    else:
        spec = importlib.util.find_spec("sphinx_revealjs")  # found without importing Sphinx
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                "reveal.js is not installed: run `make setup` (the docs extra installs "
                "sphinx-revealjs, which ships it) or set FASTLOOPS_REVEALJS to a reveal.js folder"
            )
        folder = Path(list(spec.submodule_search_locations)[0]) / "_static" / "revealjs"
    if not (folder / "dist" / "reveal.js").is_file():
        raise FileNotFoundError(f"no dist/reveal.js in {folder}: point FASTLOOPS_REVEALJS at a built reveal.js 4/5")
    return folder


def vendor_reveal(out: Path) -> Path:
    """Copy the parts of reveal.js a deck loads into out/reveal.js (skipped when already there)."""
    source, target = reveal_source(), out / REVEAL_DIR
    for part in REVEAL_PARTS:
        src, dst = source / part, target / part
        if dst.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.map"))
        else:
            shutil.copy2(src, dst)
    return target


def render(path: Path, out: Path | None = None) -> Path:
    """Write notebook `path` as out/NN_topic.slides.html with reveal.js beside it; return the deck's path."""
    out = Path(out) if out is not None else config.results_dir() / "slides"
    nb = offline.read(path)
    if not any(c.get("metadata", {}).get("slideshow") for c in nb.cells):
        nb = slides.tag(nb)  # an untagged notebook still makes a deck, by the same rules
    vendor_reveal(out)
    body, _ = offline.exporter(
        "slides", TEMPLATE, reveal_url_prefix=REVEAL_DIR, reveal_theme="white", reveal_transition="none"
    ).from_notebook_node(nb)
    target = out / f"{Path(path).stem}.slides.html"  # vendor_reveal made `out`
    target.write_text(body, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    """Render the given notebooks as decks and print where they are."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.publish.deck")
    parser.add_argument("notebooks", nargs="+", help="notebook paths, e.g. notebooks/07_dataloader_anatomy.ipynb")
    parser.add_argument("--out", type=Path, help="output folder (default results/slides)")
    args = parser.parse_args(argv)
    for name in args.notebooks:
        if not Path(name).is_file():
            raise SystemExit(f"no such notebook: {name} (try: make slides NB=notebooks/07_dataloader_anatomy.ipynb)")
        deck = render(Path(name), args.out)
        print(
            f"wrote {deck.relative_to(Path.cwd()) if deck.is_relative_to(Path.cwd()) else deck}"
            f" (open it in a browser; arrow keys move, S opens the speaker notes)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
