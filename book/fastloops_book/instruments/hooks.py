"""Install the instruments in a process the moment the library has been imported (`site/sitecustomize.py`)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SITE = Path(__file__).parent / "site"  # the folder a run puts first on PYTHONPATH


def environment(env: dict[str, str]) -> dict[str, str]:
    """Return `env` with SITE and the book first on its PYTHONPATH, so each child installs the instruments."""
    book = str(Path(__file__).resolve().parents[2])
    paths = [str(SITE), book, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


class _After(importlib.abc.MetaPathFinder):
    """Find module `name` as usual, and call `then()` once it has run."""

    def __init__(self, name: str, then: Callable[[], Any]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once, and out of the way of the search below
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            self.then()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def after_import(name: str, then: Callable[[], Any]) -> None:
    """Call `then()` right after module `name` is first imported in this process (now, if it already is)."""
    if name in sys.modules:
        then()
    else:
        sys.meta_path.insert(0, _After(name, then))


def install() -> None:
    """Turn on what this process's environment asks for: the warp's scaling, the liveness run's slowed code."""
    from . import slowdown, warp

    warp.install()
    slowdown.slow_inherited()
