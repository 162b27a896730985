"""Imports point one way: experiments -> teach -> data -> doctor -> load -> measure -> config (CONTRIBUTING).

The book's machinery (book/fastloops_book/) sits above them all: it imports the library, never the other way.
"""

import ast
from pathlib import Path

import fastloops_helpers

PACKAGE = Path(fastloops_helpers.__file__).parent
# a module may import its own layer or lower ones; data may use load's walkers, load never reads data
LAYER = {
    "config": 0,
    "atomic": 0,
    "extras": 0,
    "tree": 0,
    "models": 0,
    "measure": 1,
    "load": 2,
    "doctor": 3,
    "data": 4,
    "teach": 5,
    "experiments": 6,
    "__init__": 7,
}


def layer_of(parts: tuple[str, ...]) -> int:
    return LAYER[parts[0].removesuffix(".py")]


def internal_imports(path: Path):
    """Yield the fastloops_helpers module paths that `path` imports (relative or absolute)."""
    here = path.relative_to(PACKAGE).parts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - node.level]
            target = base + tuple((node.module or "").split(".")) if node.module else base
            names = [a.name for a in node.names] if not node.module or not target else [None]
            yield from ((target + (n,)) if n else target for n in names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fastloops_helpers."):
            yield tuple(node.module.split(".")[1:])


def test_imports_point_one_way():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).parts
        if rel[0].removesuffix(".py") not in LAYER:
            wrong.append(f"{'/'.join(rel)} is in no layer: add it to LAYER in tests/test_layers.py")
            continue
        for target in internal_imports(path):
            target = tuple(t for t in target if t)
            if target and target[0].removesuffix(".py") in LAYER and layer_of(target) > layer_of(rel):
                wrong.append(f"{'/'.join(rel)} imports {'.'.join(target)} (a higher layer)")
    assert not wrong, "\n".join(wrong)


def test_the_library_never_imports_the_book():
    found = [
        f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if any(name.split(".")[0] == "fastloops_book" for name in _imported(node))
    ]
    assert not found, f"the library imports the book's machinery (it is not in the wheel): {found}"


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []


def test_the_public_api_imports():
    from fastloops_helpers import (
        BatchLoader,
        CUDAPrefetcher,
        ThreadPrefetcher,
        load_memmap,
        measure,
        move_to,
        write_memmap,
    )

    imported = (BatchLoader, CUDAPrefetcher, ThreadPrefetcher, load_memmap, measure, move_to, write_memmap)
    assert all(obj is not None for obj in imported)

    assert set(fastloops_helpers.__all__) >= {
        "BatchLoader",
        "CUDAPrefetcher",
        "ThreadPrefetcher",
        "move_to",
        "write_memmap",
        "load_memmap",
        "measure",
    }
    assert all(hasattr(fastloops_helpers, name) for name in fastloops_helpers.__all__)
