"""Command line: run one benchmark (or all), print its table and figures, write its JSON."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from .. import config, measure
from ..experiments import available, run


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
    for name in names:
        result, path = run(name, args.scale, args.out)
        print(f"== {name} | scale={config.scale(args.scale)} | {measure.hardware_line()}")
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(result.table().to_string(index=False))
        for key, value in result.figures.items():
            print(f"{key} = {value:.4g}")
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
