"""Write the API reference of the public names (`fastloops_helpers.__all__` and `measure`'s) with pdoc.

`build(out)` writes OUT/index.html and one page per documented module, offline (pdoc inlines its assets), and
turns each docstring's "Explained in notebooks/NN_topic.ipynb" into a link to that notebook's page on the site.
`make site` calls it and links the reference from the site's index.
"""

from __future__ import annotations

import re
from pathlib import Path

MODULES = ("fastloops_helpers",)  # its __all__ includes `measure`, documented with its own __all__
NOTEBOOK = re.compile(r"(?<![\"'/\w])notebooks/(\d\d_\w+)\.ipynb")


def build(out: Path) -> Path:
    """Write the reference into `out` and return its index page."""
    import pdoc.render  # binds pdoc too

    pdoc.render.configure(
        docformat="numpy", footer_text="fastloops_helpers: the public API", search=False, show_source=True
    )
    pdoc.pdoc(*MODULES, output_directory=out)
    for page in out.rglob("*.html"):
        up = "../" * len(page.relative_to(out).parts)  # from api/DEPTH/page.html to the site's root
        page.write_text(link_notebooks(page.read_text(encoding="utf-8"), up), encoding="utf-8")
    return out / "index.html"


def link_notebooks(html: str, up: str) -> str:
    """Link every "notebooks/NN_topic.ipynb" in text (not in attributes) to the site's page of that notebook."""
    parts = re.split(r"(<[^>]+>)", html)
    return "".join(
        p if p.startswith("<") else NOTEBOOK.sub(rf'<a href="{up}\1.html">notebooks/\1.ipynb</a>', p) for p in parts
    )
