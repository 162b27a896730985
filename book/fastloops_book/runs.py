"""Read one run's saved results: the notebooks' figures (one value per name), the benchmarks' apart, the claims.

A notebook saves results/NN_name.json and a benchmark results/bench-NAME.json (`measure.save_results`).
Notebook 13 and REPORT.md show the notebooks' figures; a benchmark's figures appear only in its own table.
Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from . import claims

NOTEBOOK_RESULT = re.compile(r"^\d\d_[A-Za-z0-9_]+$")
BENCH_PREFIX = "bench-"


def load(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Return {result name: saved document} for every result JSON (name, provenance, figures) in `folder`."""
    found = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a half-written or foreign file is not a result
        if isinstance(doc, dict) and {"name", "provenance", "figures"} <= doc.keys():
            found[doc["name"]] = doc
    return found


def notebooks(docs: dict[str, dict]) -> dict[str, dict]:
    """Return the results the notebooks saved (NN_name), in notebook order."""
    return {k: v for k, v in sorted(docs.items()) if NOTEBOOK_RESULT.match(k)}


def benchmarks(docs: dict[str, dict]) -> dict[str, dict]:
    """Return the results the benchmarks saved (bench-NAME)."""
    return {k: v for k, v in sorted(docs.items()) if k.startswith(BENCH_PREFIX)}


def figure_table(docs: dict[str, dict]) -> pd.DataFrame:
    """Return one row per (figure, notebook) the notebooks saved: figure, value, notebook."""
    rows = [
        {"figure": k, "value": float(v), "notebook": name}
        for name, doc in notebooks(docs).items()
        for k, v in doc["figures"].items()
    ]
    return pd.DataFrame(rows, columns=["figure", "value", "notebook"])


def conflicts(docs: dict[str, dict]) -> dict[str, list[str]]:
    """Return {figure name: notebooks} for names that more than one notebook saves (two quantities, one name)."""
    producers = figure_table(docs).groupby("figure").notebook.apply(list)
    return {k: v for k, v in producers.items() if len(v) > 1}


def device_of(doc: dict) -> str:
    """Return the device a saved result's run measured on (its provenance; "cpu" where none is recorded)."""
    return str(doc.get("provenance", {}).get("device", "cpu"))


def evaluate(docs: dict[str, dict]) -> pd.DataFrame:
    """Return one row per claim, measured by its notebook in this run (never by a benchmark)."""
    rows = []
    for c in claims.CLAIMS:
        doc = notebooks(docs).get(c.notebook, {})
        figures = doc.get("figures", {}) if doc else None
        value = claims.value_of(figures, c.key) if figures is not None else None
        rows.append(
            {
                "claim": c.name,
                "seed": c.seed,
                "says": c.claim,
                "seed figure": claims.quote(c.name) if c.seed_figure else "",
                "measured here": value,
                # its interval, or "single run"
                "measured how": "" if value is None else claims.how_measured(claims.interval(c.name, figures)),
                "needs": c.needed(),
                "notebook": c.notebook,
                "status": claims.status(c.name, figures, device_of(doc) if doc else None),
            }
        )
    return pd.DataFrame(rows)


def target_row(target: claims.Target, doc: dict | None) -> dict[str, Any]:
    """Return a benchmark's target with the value its run `doc` saved (None: not run), and whether it met it."""
    value = claims.value_of(doc["figures"], target.figure) if doc else None
    return {
        "benchmark": target.benchmark.removeprefix(BENCH_PREFIX),
        "figure": target.figure,
        "target": target.needed(),
        "benchmark run": value,
        "measured how": claims.how_measured(claims.saved_interval(doc["figures"], target.figure))
        if doc and value is not None
        else "",
        "verdict": target.verdict(doc["figures"], device_of(doc)) if doc else "not run",
    }


def targets(docs: dict[str, dict]) -> pd.DataFrame:
    """Return the benchmarks' targets with the value of the benchmark run saved here, and whether it met them."""
    return pd.DataFrame([target_row(t, benchmarks(docs).get(t.benchmark)) for t in claims.TARGETS])


def checklist(docs: dict[str, dict]) -> pd.DataFrame:
    """Return the checklist ordered by the payoff its notebooks measured here (largest first; unmeasured last)."""
    rows = []
    for advice, notebook, key in claims.CHECKLIST:
        figures = notebooks(docs).get(notebook, {}).get("figures", {})
        payoff = claims.value_of(figures, key)
        rows.append(
            {
                "do this": advice,
                "payoff here (x)": payoff,
                "paid off here": paid_off(payoff, claims.saved_interval(figures, key)),
                "notebook": notebook,
            }
        )
    return pd.DataFrame(rows).sort_values("payoff here (x)", ascending=False, na_position="last").reset_index(drop=True)


def paid_off(payoff: float | None, interval: tuple[float, float] | None = None) -> str:
    """Return whether a checklist item paid off in this run: "yes" (faster: its saved 95 % interval above 1),
    "no: not faster here" (below 1), a tie (the interval spans 1), or "not measured"; "(single run)" where the
    notebook saved no interval."""
    if payoff is None or payoff != payoff:
        return "not measured"
    return {"met": "yes", "missed": "no: not faster here"}.get(
        claims.decide(*(interval or (payoff, payoff)), 1.0), claims.TIE
    ) + ("" if interval else " (single run)")


def stale(docs: dict[str, dict], times: dict[str, Any]) -> list[str]:
    """Return the notebook results saved before their notebook's latest run at their scale started: leftovers.

    `times` is the runner's results/notebook_times.json ({scale: {"started": {"NN_x.ipynb": ISO date}}}).
    """
    found = []
    for name, doc in notebooks(docs).items():
        started = times.get(doc["provenance"].get("scale"), {}).get("started", {})
        start = started.get(f"{name}.ipynb", "") if isinstance(started, dict) else ""
        if start and str(doc["provenance"].get("date", "")) < start:
            found.append(name)
    return found
