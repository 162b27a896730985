"""The experiments that several notebooks share: the protocols' drivers, each taking its sizes as parameters.

A benchmark is its notebook (`python -m fastloops_book.bench NAME` executes it and reads what it saved),
so a module here holds only what a notebook passes its defaults to and what more than one caller needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class BenchResult:
    """What an experiment measured: one row per configuration and the flat figures its notebook saves."""

    rows: list[dict[str, Any]]
    figures: dict[str, float]
    knobs: dict[str, Any] = field(default_factory=dict)
    repeats: int | None = None

    def table(self) -> pd.DataFrame:
        """Return the rows as a DataFrame."""
        return pd.DataFrame(self.rows)
