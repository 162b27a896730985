"""The docs name what exists: every backticked path and dotted package name in CONTRIBUTING.md, README.md and the
module docstrings of the library and the book's machinery resolves (a file or folder, a module, a class, a function,
an attribute)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import fastloops_helpers

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(fastloops_helpers.__file__).parent
BOOK = ROOT / "book" / "fastloops_book"  # the book's machinery: `book.claims` names fastloops_book.claims
TOP = {p.stem for p in PACKAGE.iterdir() if (p.suffix == ".py" or p.is_dir()) and not p.name.startswith("_")}
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
PATH = re.compile(r"^[\w.-]+(/[\w.-]*)+$|^[\w-]+\.(py|ipynb|md|json|toml|txt|cfg|yml|sh)$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
PLACEHOLDER = re.compile(r"\b(NN|TOPIC|NAME|MODULE|DIR|FILE|PATH|KNOB|VALUE|SCALE|N)(\b|_)|[*<>{}$]|\.\.\.")
FOLDERS = (ROOT, PACKAGE, BOOK, ROOT / "tests", ROOT / "notebooks", ROOT.parent)
# What a command writes (not in a clean clone), and names of things outside the project (the real data's folder)
MADE = ("results/", "reports/gpu/", ".venv/", "wheelhouse/", "cifar-10-batches-py/")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] == "book":
        parts[0] = "fastloops_book"
    if parts[0] not in ("fastloops_helpers", "fastloops_book"):
        parts = ["fastloops_helpers", *parts]
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def unknown_references(text: str, here: Path = ROOT) -> list[str]:
    """Return the backticked paths and package names in `text` that name nothing (placeholders left out)."""
    unknown = []
    for span in SPAN.findall(text):
        span = span.strip().split("(")[0].split(" ")[0].split(":")[0].rstrip(",.")
        if not span or PLACEHOLDER.search(span) or span.startswith(MADE):
            continue
        if PATH.match(span) and not DOTTED.match(span.removesuffix(".py")):
            if not any((folder / span).exists() for folder in (here, *FOLDERS)):
                unknown.append(span)
        elif DOTTED.match(span) and span.split(".")[0] in TOP | {"fastloops_helpers", "fastloops_book", "book"}:
            if not _resolves(span):
                unknown.append(span)
    return unknown


def _docstrings() -> dict[str, str]:
    found = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *BOOK.rglob("*.py")]):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if doc:
            found[path.relative_to(ROOT).as_posix()] = doc
    return found


def test_a_made_up_name_or_path_is_caught():
    text = "Use `load.move.move_to` and `tests/test_docs.py`; not `load.move.teleport` nor `data/nowhere.py`."
    assert unknown_references(text) == ["load.move.teleport", "data/nowhere.py"]
    assert unknown_references("Put it in `experiments/TOPIC.py`, run `make bench NAME=loops`.") == []


def test_the_contributing_guide_and_readme_name_what_exists():
    docs = ("CONTRIBUTING.md", "README.md")
    found = {name: unknown_references((ROOT / name).read_text(encoding="utf-8")) for name in docs}
    assert not any(found.values()), found


def test_module_docstrings_name_what_exists():
    found = {where: unknown_references(doc, (ROOT / where).parent) for where, doc in _docstrings().items()}
    found = {k: v for k, v in found.items() if v}
    assert not found, found
