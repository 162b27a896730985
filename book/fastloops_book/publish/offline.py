"""nbconvert exporters that load nothing from a CDN: no require.js, jQuery, MathJax or mermaid.

The notebooks use no LaTeX, no widgets and no mermaid diagrams, so the pages need none of them; images
are embedded as data URIs by nbconvert already. Explained in README.md, "Present and read".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Blocks of nbconvert's lab and reveal templates that would fetch scripts from a CDN, emptied.
NO_CDN_BLOCKS = """
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
"""


def exporter(kind: str, template: str, **traits: Any) -> Any:
    """Return an nbconvert exporter ('html' or 'slides') whose template is `template` (Jinja source)."""
    import jinja2
    from nbconvert import HTMLExporter, SlidesExporter

    cls, base = {"html": (HTMLExporter, "lab"), "slides": (SlidesExporter, "reveal")}[kind]
    return cls(
        template_name=base,
        template_file="fastloops.html.j2",
        extra_loaders=[jinja2.DictLoader({"fastloops.html.j2": template})],
        **traits,
    )


def read(path: Path) -> Any:
    """Read a notebook as an nbformat v4 node."""
    import nbformat

    return nbformat.read(path, as_version=4)
