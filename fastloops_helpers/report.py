"""Gather every saved result under results/ into one REPORT.md.

`python -m fastloops_helpers.report [--results DIR]`. Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import config, measure, runs

TIMES_FILE = "notebook_times.json"


def load_results(folder: Path) -> list[dict[str, Any]]:
    """Return every saved result (a JSON with name, provenance, rows, figures) in `folder`, by file name."""
    return list(runs.load(folder).values())


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Render a list of dicts as a GitHub markdown table (columns in first-seen order)."""
    if not rows:
        return "(no rows)\n"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _records(table: Any) -> list[dict[str, Any]]:
    return [{k: ("" if v is None or v != v else v) for k, v in row.items()} for row in table.to_dict("records")]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def build(folder: Path | None = None) -> Path:
    """Write folder/REPORT.md from the saved results, notebook run times and PNG figures there."""
    folder = Path(folder) if folder is not None else config.results_dir()
    docs = load_results(folder)
    scales = sorted({d["provenance"].get("scale", "?") for d in docs}) or [config.scale()]
    hardware = docs[0]["provenance"]["hardware"] if docs else measure.hardware_line()
    parts = ["# fastloops: reproduction report\n",
             f"- date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"- scale: {', '.join(scales)}", f"- hardware: {hardware}\n"]
    parts += _times_section(folder)
    parts += ["## The seeds' claims on this machine\n", markdown_table(_records(runs.evaluate(runs.load(folder)))),
              "## Checklist, by payoff measured here\n", markdown_table(_records(runs.checklist(runs.load(folder))))]
    for doc in docs:
        parts.append(f"## {doc['name']}\n")
        prov = doc["provenance"]
        if prov.get("hardware") != hardware:
            parts.append(f"hardware: {prov.get('hardware')}\n")
        if prov.get("knobs"):
            parts.append("knobs: " + ", ".join(f"{k}={v}" for k, v in prov["knobs"].items()) + "\n")
        figures = [{"figure": k, "value": v} for k, v in doc["figures"].items()]
        parts += ["### figures\n", markdown_table(figures)]
        if doc.get("rows"):
            parts += ["### rows\n", markdown_table(doc["rows"])]
        parts += [f"![{png.stem}]({png.name})\n" for png in sorted(folder.glob(f"{doc['name']}*.png"))]
    out = folder / "REPORT.md"
    out.write_text("\n".join(parts))
    return out


def _times_section(folder: Path) -> list[str]:
    path = folder / TIMES_FILE
    if not path.exists():
        return []
    times = json.loads(path.read_text())
    rows = [{"notebook": k, "seconds": round(v, 1), "status": "FAILED" if k in times.get("failed", []) else "ok"}
            for k, v in times["seconds"].items()]
    rows.append({"notebook": "total", "seconds": round(sum(times["seconds"].values()), 1), "status": ""})
    return ["## Notebook run times\n", markdown_table(rows)]


def main(argv: list[str] | None = None) -> int:
    """Build the report and print where it is."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_helpers.report")
    parser.add_argument("--results", type=Path, help="folder of saved results (default results/)")
    args = parser.parse_args(argv)
    print(f"wrote {build(args.results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
