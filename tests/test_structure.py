"""The package's import structure: no private name crosses a module, and no two modules import each other.

Imports inside functions and under `TYPE_CHECKING` count: a lazy import is still a dependency, and a type-only
one still ties the two modules' designs together.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import fastloops_helpers

PACKAGE = Path(fastloops_helpers.__file__).parent
BOOK = PACKAGE.parent / "book" / "fastloops_book"  # the book's machinery: checked with the library


def modules(*roots: Path) -> dict[str, str]:
    """Return {dotted module name: source} for every module under `roots` (package folders; default: both)."""
    found = {}
    for root in roots or (PACKAGE, BOOK):
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text(encoding="utf-8")
    return found


def _is_package(name: str, sources: dict[str, str]) -> bool:
    return any(other.startswith(name + ".") for other in sources)


def imports(name: str, source: str, sources: dict[str, str]) -> list[tuple[str, str]]:
    """Return (module imported, name taken from it or "") for every import of a package module in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name in sources]
        elif isinstance(node, ast.ImportFrom):
            base = name.split(".") if _is_package(name, sources) else name.split(".")[:-1]
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in sources:
                    found.append((sub, ""))  # `from . import module`
                elif target in sources:
                    found.append((target, alias.name))
    return found


def private_imports(sources: dict[str, str]) -> list[str]:
    """Return "module imports _name from other" for each private name imported from another module."""
    return [
        f"{name} imports {taken} from {target}"
        for name, source in sources.items()
        for target, taken in imports(name, source, sources)
        if taken.startswith("_") and not taken.startswith("__") and target != name
    ]


def circles(sources: dict[str, str]) -> list[list[str]]:
    """Return the groups of modules that import each other, directly or round a longer circle."""
    edges = {n: {t for t, _ in imports(n, s, sources)} - {n} for n, s in sources.items()}
    reach = {n: set(e) for n, e in edges.items()}
    changed = True
    while changed:  # the transitive closure: small packages, a few passes
        changed = False
        for n in reach:
            more = set().union(*(reach[m] for m in reach[n])) - reach[n]
            if more:
                reach[n] |= more
                changed = True
    groups = {frozenset({n} | {m for m in reach[n] if n in reach[m]}) for n in reach if n in reach[n]}
    return sorted(sorted(g) for g in groups)


FIXTURE = {
    "pkg": "",
    "pkg.a": "from .b import helper\n",
    "pkg.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import Thing\ndef helper(): pass\n",
    "pkg.c": "def f():\n    from .a import helper\n    from . import b\n    from .b import _secret\n",
}


def test_the_checks_find_a_private_import_and_a_circle_through_lazy_and_type_only_imports():
    assert private_imports(FIXTURE) == ["pkg.c imports _secret from pkg.b"]
    assert circles(FIXTURE) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert circles(FIXTURE | {"pkg.b": "def helper(): pass\n"}) == []


def test_no_private_name_is_imported_across_modules():
    found = private_imports(modules())
    assert not found, f"make the name public (documented) or keep its use in its module: {found}"


def test_no_modules_import_each_other():
    found = circles(modules())
    assert not found, f"modules that import each other (lazy and type-only imports counted): {found}"


def unread(sources: dict[str, str], notebooks: list[str]) -> list[str]:
    """Return the package's top-level functions and classes that no other package code and no notebook names."""
    words = Counter(w for text in [*sources.values(), *notebooks] for w in re.findall(r"\w+", text))
    return [
        f"{name}.{node.name}"
        for name, source in sources.items()
        for node in ast.parse(source).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("__")
        if words[node.name] < 2  # its definition, and at least one use
    ]


def test_a_function_no_one_reads_is_found():
    sources = {"pkg.a": "def used(): pass\ndef lonely(): pass\n", "pkg.b": "from .a import used\n"}
    assert unread(sources, ["used()"]) == ["pkg.a.lonely"]


def test_no_package_object_is_read_only_by_tests():
    notebooks = [p.read_text(encoding="utf-8") for p in sorted((PACKAGE.parent / "notebooks" / "py").glob("*.py"))]
    found = unread(modules(), notebooks)
    assert not found, f"read by nothing but tests: move each into the notebook that uses it, or delete it: {found}"
