"""Command line: a benchmark runs its notebook, then saves the figures the notebook saved as bench-NAME.json.

A benchmark is not a second copy of an experiment: `bench NAME` executes a copy of NAME's notebook at the scale
asked for (`as_script`: the code cells in a fresh interpreter, solutions left out, `--set KNOB=VALUE` assigned
after the defaults cell), reads the figures it saved, and writes results/bench-NAME.json with the benchmark's
figure keys (benchmarks.json, where `*` stands for any text, e.g. a loader's and a model's name; the report, the
claim targets and the README tables read them; "needs_gpu" lists the keys only a GPU run saves). Benchmarks that
share a notebook (getitem and gather: notebook 02) run it once. `--saved` executes nothing: it reads what the
notebooks already saved in the results folder, so `make reproduce` runs each protocol once.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from fastloops_helpers import config, measure

from . import as_script, claims, runs


@cache
def benchmarks() -> dict[str, dict[str, Any]]:
    """Return {name: {"notebook": its notebook's stem, "about": one line, "figures": the keys it saves}}."""
    return json.loads((Path(__file__).parent / "benchmarks.json").read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the benchmarks asked for."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.bench", description=__doc__)
    parser.add_argument("name", nargs="*", help="benchmark name(s), or 'all'")
    parser.add_argument("--scale", choices=config.PROFILES, help="size profile (default: FASTLOOPS_SCALE or workshop)")
    parser.add_argument("--out", help="JSON path (default results/bench-NAME.json; one name only)")
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE", help="a defaults-cell knob")
    parser.add_argument("--saved", action="store_true", help="read what the notebooks saved; execute nothing")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list or not args.name:
        for name, spec in benchmarks().items():
            print(f"{name:12s} {spec['about']}  (notebook {spec['notebook']})")
        return 0
    names = list(benchmarks()) if args.name == ["all"] else args.name
    unknown = [n for n in names if n not in benchmarks()]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; available: {', '.join(benchmarks())}")
    if args.out and len(names) > 1:
        parser.error("--out needs exactly one benchmark name")
    knobs = dict(_knob(parser, text) for text in args.set)
    failed = []
    for notebook, group in _by_notebook(names).items():
        try:
            folder = config.results_dir() if args.saved else execute(notebook, config.scale(args.scale), knobs)
            for name in group:
                report(name, *save(name, folder, args.out))
        except SystemExit as error:  # one notebook's failure: the others still run
            if len(names) == 1:
                raise
            print(error, file=sys.stderr)
            failed += group
        else:
            if not args.saved:
                shutil.rmtree(folder)  # kept when the notebook failed: the error names its script there
    if failed:
        print(f"bench: {', '.join(failed)} failed", file=sys.stderr)
    return 1 if failed else 0


def execute(notebook: str, scale: str, knobs: dict[str, str]) -> Path:
    """Execute a copy of `notebook` at `scale` with `knobs` into a new folder; return the folder."""
    folder = Path(tempfile.mkdtemp(prefix=f"bench-{notebook}-", dir=config.results_dir()))
    as_script.run(config.project_root() / "notebooks" / f"{notebook}.ipynb", folder, scale, knobs)
    return folder


def _knob(parser: argparse.ArgumentParser, text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        parser.error(f"--set takes KNOB=VALUE with a Python value, e.g. --set rounds=12 (got {text!r})")
    return name, value


def _by_notebook(names: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(benchmarks()[name]["notebook"], []).append(name)
    return groups


def save(name: str, folder: Path, out: str | None = None) -> tuple[dict[str, Any], Path]:
    """Write bench-NAME.json from the result NAME's notebook saved in `folder`; return that result and the path."""
    spec = benchmarks()[name]
    source = folder / f"{spec['notebook']}.json"
    if not source.is_file():
        raise SystemExit(f"no {source}: run notebook {spec['notebook']} (or bench {name} without --saved) first")
    doc = json.loads(source.read_text(encoding="utf-8"))
    figures = {k: v for k, v in doc["figures"].items() if any(fnmatch.fnmatchcase(k, p) for p in spec["figures"])}
    prov = doc["provenance"]
    knobs = {**(prov.get("knobs") or {}), "notebook": spec["notebook"]}
    path = measure.save_results(
        f"bench-{name}", figures, doc["rows"], knobs, prov.get("repeats"), path=out, scale=prov.get("scale")
    )
    missing = [p for p in spec["figures"] + spec.get("needs_gpu", []) if not fnmatch.filter(figures, p)]
    return {**doc, "figures": figures, "missing": missing}, path


def report(name: str, doc: dict[str, Any], path: Path) -> None:
    """Print benchmark `name`'s rows, figures and targets, and where they were saved."""
    print(f"== {name} | scale={doc['provenance'].get('scale')} | {measure.hardware_line()}")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(pd.DataFrame(doc["rows"]).to_string(index=False))
    for key, value in doc["figures"].items():
        print(f"{key} = {value:.4g}")
    if doc["missing"]:
        print(f"not saved by the notebook at this scale: {', '.join(doc['missing'])}")
    print(*target_lines(name, doc["figures"], runs.device_of(doc)), f"saved {path}", sep="\n")


def target_lines(name: str, figures: dict[str, float], device: str = "cpu") -> list[str]:
    """Return one line per target of benchmark `name`: the figure, its interval when saved, the verdict (a GPU's
    target reads "needs a GPU" unless the run's `device` was CUDA)."""
    doc = {"figures": figures, "provenance": {"device": device}}
    rows = [runs.target_row(t, doc) for t in claims.TARGETS if t.benchmark == f"bench-{name}"]
    return [
        f"[target] {r['figure']}: "
        + ("not measured" if r["benchmark run"] is None else f"{r['benchmark run']:.4g} ({r['measured how']})")
        + f", needs {r['target']}: {r['verdict']}"
        for r in rows
    ]


if __name__ == "__main__":
    sys.exit(main())
