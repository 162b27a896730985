"""Gather one run's saved results into REPORT.md, and rewrite the README's generated blocks from them.

`python -m fastloops_book.report [--results DIR] [--readme README.md]`. The notebooks' figures come from
the notebooks (results/NN_name.json), one value per name; each benchmark's figures appear in its own table,
named `bench-NAME.figure`, and never replace a notebook's. Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastloops_helpers import config, measure

from . import notebooks, runs

TIMES_FILE = notebooks.TIMES_FILE
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z-]+)[^>]*-->\n)(?P<body>.*?)(<!-- /generated: (?P=name) -->)", re.S)


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
    return str(value).replace("|", "\\|").replace("\n", " ")


def build(folder: Path | None = None) -> Path:
    """Write folder/REPORT.md from the saved results, notebook run times and PNG figures there."""
    folder = Path(folder) if folder is not None else config.results_dir()
    docs = runs.load(folder)
    nbs, benches = runs.notebooks(docs), runs.benchmarks(docs)
    scales = sorted({d["provenance"].get("scale", "?") for d in nbs.values()}) or [config.scale()]
    hardware = next(iter(nbs.values()))["provenance"]["hardware"] if nbs else measure.hardware_line()
    times = notebooks.load_times(folder / TIMES_FILE)
    parts = [
        "# fastloops: reproduction report\n",
        f"- date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- scale: {', '.join(scales)}",
        f"- hardware: {hardware}\n",
    ]
    parts += _warnings(docs, times)
    parts += _times_section(times, scales)
    parts += [
        "## The seeds' claims, as the notebooks measured them in this run\n",
        markdown_table(_records(runs.evaluate(docs))),
        "## Checklist, by the payoff the notebooks measured here\n",
        markdown_table(_records(runs.checklist(docs))),
        "## Every figure the notebooks saved (one value per name)\n",
        markdown_table(_records(runs.figure_table(docs))),
    ]
    for name, doc in nbs.items():
        parts += doc_section(name, doc, folder, hardware)
    if benches:
        parts += [
            "# Benchmarks (the notebooks' saved figures, against the project's targets)\n",
            "## Targets\n",
            markdown_table(_records(runs.targets(docs))),
        ]
        for name, doc in benches.items():
            parts += doc_section(name, doc, folder, hardware, qualify=True)
    out = folder / "REPORT.md"
    out.write_text("\n".join(parts))
    return out


def _warnings(docs: dict[str, dict], times: dict[str, Any]) -> list[str]:
    lines = [
        f"- `{k}` is saved by {', '.join(v)}: two quantities share a name (rename one)"
        for k, v in runs.conflicts(docs).items()
    ]
    lines += [
        f"- `{k}` was saved before its notebook's latest run started: a leftover of an earlier run"
        for k in runs.stale(docs, times)
    ]
    return ["## Warnings\n", "\n".join(lines) + "\n"] if lines else []


def doc_section(name: str, doc: dict, folder: Path, hardware: str, qualify: bool = False) -> list[str]:
    """Return a saved result's section: when and where it ran (`hardware` when it differs), knobs, figures, rows."""
    prov = doc["provenance"]
    parts = [f"## {name}\n", f"saved {prov.get('date', '?')}, scale {prov.get('scale', '?')}\n"]
    if prov.get("hardware") != hardware:
        parts.append(f"hardware: {prov.get('hardware')}\n")
    if prov.get("knobs"):
        parts.append("knobs: " + ", ".join(f"{k}={v}" for k, v in prov["knobs"].items()) + "\n")
    if qualify:  # a benchmark's figures carry its name, beside the notebook's own that they copy
        figures = [{"figure": f"{name}.{k}", "value": v} for k, v in doc["figures"].items()]
        parts += ["### this benchmark's figures\n", markdown_table(figures)]
    if doc.get("rows"):
        parts += ["### rows\n", markdown_table(doc["rows"])]
    parts += [f"![{png.stem}]({png.name})\n" for png in sorted(folder.glob(f"{name}*.png"))]
    return parts


def _times_section(times: dict[str, Any], scales: list[str]) -> list[str]:
    rows = []
    for scale in scales:
        entry = times.get(scale, {})
        failed = set(entry.get("failed", []))
        rows += [
            {"notebook": k, "scale": scale, "seconds": v, "status": "FAILED" if k in failed else "ok"}
            for k, v in sorted(entry.get("seconds", {}).items())
        ]
        if entry.get("seconds"):
            rows.append(
                {"notebook": "total", "scale": scale, "seconds": round(sum(entry["seconds"].values()), 1), "status": ""}
            )
    machines = sorted({times.get(s, {}).get("machine", "?") for s in scales if times.get(s, {}).get("seconds")})
    where = (
        f"Measured in this run on {'; '.join(machines)}. The notebooks' cards show the run that made their stored "
        "outputs (`make notebooks`), not this one.\n"
    )
    return ["## Notebook run times\n", where, markdown_table(rows)] if rows else []


def notebook_table(times: dict[str, Any]) -> str:
    """Return the README's notebook table: title, seeds, GPU from each card, run times from `times`."""
    rows = []
    for path in notebooks.notebook_paths():
        card = _card(path)
        cells = {s: _seconds(times, s, path.name) or "-" for s in ("smoke", "workshop")}
        link = f"[{card.get('title', path.stem)}](notebooks/{path.name})"
        seeds = card.get("Seeds", card.get("Seed", ""))
        seeds = ", ".join(dict.fromkeys(re.findall(r"\b00[0-4](?:/00[0-4])?\b", seeds))) or seeds.split(":")[0]
        rows.append(
            {
                "#": path.name[:2],
                "notebook": link,
                "seeds": seeds,
                "GPU": card.get("GPU", "").split(":")[0],
                "smoke / workshop": f"{cells['smoke']} / {cells['workshop']}",
            }
        )
    machines = sorted({e.get("machine", "?") for e in times.values() if e.get("seconds")})
    note = f"\nRun times measured on {'; '.join(machines)} (`make reproduce` rewrites this table).\n"
    return markdown_table(rows) + (note if machines else "")


def _seconds(times: dict[str, Any], scale: str, name: str) -> str:
    seconds = times.get(scale, {}).get("seconds", {}).get(name)
    return notebooks.duration(seconds).lstrip("~") if seconds is not None else ""


def _card(path: Path) -> dict[str, str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    source = nb.cells[0].source if nb.cells else ""
    card = {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| \*\*(\w[\w ]*)\*\* \| (.*?) \|$", source, re.M)}
    title = re.search(r"^# (?:\d\d\s*·\s*)?(.+)$", source, re.M)
    if title:
        card["title"] = title.group(1).strip()
    return card


def benchmark_table(docs: dict[str, dict]) -> str:
    """Return the README's benchmark table: each target and what the last benchmark run saved measured."""
    table = runs.targets(docs)
    dates = sorted({d["provenance"].get("date", "")[:10] for d in runs.benchmarks(docs).values()})
    scales = sorted({d["provenance"].get("scale", "?") for d in runs.benchmarks(docs).values()})
    note = (
        (
            f"\nMeasured by `make reproduce` at scale {', '.join(scales)} on {', '.join(dates)}"
            " (it rewrites this table).\n"
        )
        if dates
        else "\n(no benchmark run saved yet: `make reproduce`)\n"
    )
    return markdown_table(_records(table)) + note


def rewrite_readme(readme: Path, folder: Path) -> list[str]:
    """Rewrite README's `<!-- generated: notebooks|benchmarks -->` blocks from `folder`; return blocks rewritten."""
    docs, times = runs.load(folder), notebooks.load_times(folder / TIMES_FILE)
    makers = {"notebooks": lambda: notebook_table(times), "benchmarks": lambda: benchmark_table(docs)}
    done: list[str] = []

    def fill(m: re.Match) -> str:
        if m.group("name") not in makers:
            return m.group(0)
        done.append(m.group("name"))
        return m.group(1) + makers[m.group("name")]() + m.group(4)

    text = readme.read_text()
    new = _BLOCK.sub(fill, text)
    if new != text:
        readme.write_text(new)
    return done


def main(argv: list[str] | None = None) -> int:
    """Build the report (and rewrite the README's generated blocks) and print where they are."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.report")
    parser.add_argument("--results", type=Path, help="folder of saved results (default results/)")
    parser.add_argument("--readme", type=Path, help="also rewrite this README's generated blocks")
    args = parser.parse_args(argv)
    folder = args.results or config.results_dir()
    print(f"wrote {config.rel(build(folder))}")
    if args.readme:
        print(f"rewrote {config.rel(args.readme)}: {', '.join(rewrite_readme(args.readme, folder)) or 'no blocks'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
