"""Show package code in a notebook from the object that runs, never from a pasted copy (nbdev's `show_doc` idea).

`show_code(BatchLoader.__iter__, BatchLoader._batches)` renders each object's live source (`inspect.getsource`):
highlighted, titled with its module and qualified name, linked into the API reference (on the site) and to its
file (in JupyterLab or on GitHub), and folded when it is long. A notebook that times `BatchLoader` therefore
shows the code it times; an edit to the package shows up at the next run, and nothing can drift. Explained in
CONTRIBUTING.md, "A notebook".
"""

from __future__ import annotations

import html
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FOLD_LINES = 25  # longer listings start folded (click the title to open)
PRE_STYLE = "font-family: monospace; font-size: 0.9em; line-height: 1.3; margin: 0.3em 0 0.6em 1em"


@dataclass(frozen=True)
class Listing:
    """One object's live source, with where it lives."""

    module: str  # e.g. fastloops_helpers.load.batch_loader
    qualname: str  # e.g. BatchLoader.__iter__
    path: str  # the file, relative to the project root
    line: int  # its first line in that file
    source: str  # dedented

    @property
    def title(self) -> str:
        return f"{self.module}.{self.qualname}"


def listing(obj: Any) -> Listing:
    """Return the live source of a package function, method, class or property, and where it is defined."""
    func = _underlying(obj)
    module = getattr(func, "__module__", "") or ""
    if not module.startswith("fastloops_helpers"):
        raise ValueError(
            f"show_code shows the package's own code; {obj!r} comes from {module or 'nowhere'}: "
            "define it in a cell instead, so the notebook times what it shows"
        )
    lines, first = inspect.getsourcelines(func)
    file = Path(inspect.getsourcefile(func) or "")
    root = Path(__file__).resolve().parents[2]
    path = file.resolve().relative_to(root).as_posix() if file.resolve().is_relative_to(root) else file.name
    return Listing(module, func.__qualname__, path, first, textwrap.dedent("".join(lines)).rstrip() + "\n")


def _underlying(obj: Any) -> Any:
    """Return the function or class whose source `obj` shows (a property's getter, a bound method's function)."""
    if isinstance(obj, property):
        return obj.fget
    obj = getattr(obj, "__func__", obj)
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        raise TypeError(
            f"show_code takes functions, methods, properties and classes, not {type(obj).__name__}: "
            "pass e.g. BatchLoader.__iter__ or load.rows.gather"
        )
    return inspect.unwrap(obj)


class Code:
    """What `show_code` returns: listings that Jupyter renders as HTML and a text view prints as source."""

    def __init__(self, listings: list[Listing]):
        self.listings = listings

    def __repr__(self) -> str:
        return "\n".join(f"# {x.title}  ({x.path}, line {x.line})\n{x.source}" for x in self.listings).rstrip()

    def _repr_html_(self) -> str:
        return "\n".join(_html(x) for x in self.listings)


def _html(x: Listing) -> str:
    """One listing as HTML: a linked title over highlighted code, inside <details> (open when short)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = highlight(x.source, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True, prestyles=PRE_STYLE))
    page = "api/" + x.module.replace(".", "/") + ".html#" + x.qualname
    opened = " open" if x.source.count("\n") <= FOLD_LINES else ""
    return (
        f"<details{opened}><summary><code>{html.escape(x.title)}</code> "
        f'(<a href="{page}">API reference</a>, <a href="../{x.path}">{html.escape(x.path)}</a> line {x.line}, '
        f"{x.source.count(chr(10))} lines)</summary>{code}</details>"
    )


def show_code(*objs: Any) -> Code:
    """Return the live source of package objects for a notebook to display (the last expression of a cell)."""
    if not objs:
        raise TypeError("show_code needs at least one object, e.g. show_code(BatchLoader.__iter__)")
    return Code([listing(obj) for obj in objs])
