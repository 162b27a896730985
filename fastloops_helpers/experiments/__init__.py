"""The experiments: one module per notebook topic, each computing its figures once for every caller.

A module with `run(scale) -> BenchResult` is also a benchmark (`python -m fastloops_helpers.book.bench NAME`):
`run` is the one place that reads the sizes table, once, and passes every size on as an argument. The functions
it calls take their sizes as parameters, so a notebook passes its own defaults block to the same functions and
a notebook and its benchmark never disagree.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import config, measure


@dataclass
class BenchResult:
    """What a benchmark measured: one row per configuration and the flat figures targets check."""

    rows: list[dict[str, Any]]
    figures: dict[str, float]
    knobs: dict[str, Any] = field(default_factory=dict)
    repeats: int | None = None

    def table(self) -> pd.DataFrame:
        """Return the rows as a DataFrame."""
        return pd.DataFrame(self.rows)


def available() -> dict[str, str]:
    """Return {benchmark name: its one-line description}."""
    names = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            if callable(getattr(module, "run", None)):
                doc = (module.__doc__ or "").strip()
                names[info.name] = doc.splitlines()[0] if doc else ""
    return dict(sorted(names.items()))


def run(name: str, scale: str | None = None, out: str | Path | None = None) -> tuple[BenchResult, Path]:
    """Run benchmark `name` at `scale`, save its JSON (default results/bench-NAME.json), return both."""
    known = available()
    if name not in known:
        raise SystemExit(f"unknown benchmark {name!r}; available: {', '.join(known) or 'none'}")
    scale = config.scale(scale)  # validated; FASTLOOPS_SCALE when None
    result = importlib.import_module(f"{__name__}.{name}").run(scale)
    path = measure.save_results(
        f"bench-{name}", result.figures, result.rows, result.knobs, result.repeats, path=out, scale=scale
    )
    return result, path
