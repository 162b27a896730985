"""Command line: run one benchmark (or all), print its table and figures, write its JSON.

Several benchmarks (or `all`) run one after another, each in a fresh interpreter: what one imports or starts
(JAX's threads, an initialised CUDA context) cannot reach the processes the next one forks.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pandas as pd

from .. import config, measure
from ..experiments import available, run
from . import claims


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the benchmarks asked for."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_helpers.book.bench", description=__doc__)
    parser.add_argument("name", nargs="*", help="benchmark name(s), or 'all'")
    parser.add_argument("--scale", choices=config.SCALES, help="size profile (default: FASTLOOPS_SCALE or workshop)")
    parser.add_argument("--out", help="JSON path (default results/bench-NAME.json; one name only)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list or not args.name:
        for name, doc in available().items():
            print(f"{name:12s} {doc}")
        return 0
    names = list(available()) if args.name == ["all"] else args.name
    if args.out and len(names) > 1:
        parser.error("--out needs exactly one benchmark name")
    if len(names) > 1:
        unknown = [n for n in names if n not in available()]
        if unknown:
            parser.error(f"unknown benchmark {unknown[0]!r}; available: {', '.join(available())}")
        return run_each(names, args.scale)
    for name in names:  # one
        result, path = run(name, args.scale, args.out)
        print(f"== {name} | scale={config.scale(args.scale)} | {measure.hardware_line()}")
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(result.table().to_string(index=False))
        for key, value in result.figures.items():
            print(f"{key} = {value:.4g}")
        for line in target_lines(name, result.figures):
            print(line)
        print(f"saved {path}")
    return 0


def run_each(names: list[str], scale: str | None) -> int:
    """Run each benchmark in its own fresh interpreter, in turn; return 1 if any failed (after running them all)."""
    failed = []
    for name in names:
        command = [sys.executable, "-m", "fastloops_helpers.book.bench", name]
        command += ["--scale", scale] if scale else []
        if subprocess.run(command, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"bench: {', '.join(failed)} failed", file=sys.stderr)
    return 1 if failed else 0


def target_lines(name: str, figures: dict[str, float]) -> list[str]:
    """Return one line per target of benchmark `name`: the figure, its interval when saved, the verdict."""
    lines = []
    for t in claims.TARGETS:
        if t.benchmark != f"bench-{name}":
            continue
        value = claims.value_of(figures, t.figure)
        label = claims.how_measured(claims.saved_interval(figures, t.figure))
        shown = "not measured" if value is None else f"{value:.4g} ({label})"
        lines.append(f"[target] {t.figure}: {shown}, needs {t.needed()}: {t.verdict(figures)}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
