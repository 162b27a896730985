"""Execute the notebooks the way the stored outputs must be made, and clean their metadata.

`python -m fastloops_helpers.notebooks run [--inplace | --out DIR] [--html DIR] [NOTEBOOK ...]`
runs top to bottom in a fresh kernel with fd capture off (NOTEBOOK_TESTING.md: what nbval
sees under pytest is what gets stored), no timing metadata, and prints progress and a total.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import config

NOTEBOOKS = "notebooks"
VOLATILE_CELL_KEYS = ("execution", "collapsed", "scrolled", "ExecuteTime")


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """Return the notebooks to run: the given paths, else every notebooks/NN_*.ipynb in order."""
    if names:
        paths = [Path(n) for n in names]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise SystemExit(f"no such notebook: {', '.join(missing)}")
        return paths
    return sorted((config.project_root() / NOTEBOOKS).glob("[0-9][0-9]_*.ipynb"))


def clean(nb: dict) -> dict:
    """Drop volatile metadata (timings, widget state) and keep outputs and execution counts."""
    nb["metadata"].pop("widgets", None)
    nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    for cell in nb["cells"]:
        for key in VOLATILE_CELL_KEYS:
            cell.get("metadata", {}).pop(key, None)
    return nb


def execute(path: Path, out: Path, timeout: int = 1800) -> float:
    """Execute notebook `path` in a fresh kernel, write the cleaned result to `out`; return seconds."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=timeout, record_timing=False,
                            resources={"metadata": {"path": str(path.parent.resolve())}},
                            extra_arguments=["--IPKernelApp.capture_fd_output=False"])
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(clean(nb), out)
    return time.perf_counter() - start


def export_html(path: Path, folder: Path) -> Path:
    """Write an HTML rendering of an executed notebook into `folder`."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(path, as_version=4))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (path.stem + ".html")
    target.write_text(body, encoding="utf-8")
    return target


def run_all(paths: list[Path], out_dir: Path | None,
            html_dir: Path | None) -> tuple[dict[str, float], list[str]]:
    """Execute `paths` in order (in place when `out_dir` is None), printing progress.

    Returns the seconds per notebook and the names of those that failed.
    """
    times: dict[str, float] = {}
    failed: list[str] = []
    start = time.perf_counter()
    for i, path in enumerate(paths, 1):
        target = path if out_dir is None else out_dir / path.name
        print(f"[{i}/{len(paths)}] {path.name} (scale={config.scale()}) ...", flush=True)
        t0 = time.perf_counter()
        try:
            times[path.name] = execute(path, target)
        except Exception as exc:  # keep going: one broken notebook must not hide the others' results
            failed.append(path.name)
            times[path.name] = time.perf_counter() - t0
            print(f"    FAILED: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}", flush=True)
        if html_dir is not None and target.exists():
            export_html(target, html_dir)
        print(f"    {times[path.name]:.1f} s (elapsed {time.perf_counter() - start:.0f} s)", flush=True)
    print(f"total: {time.perf_counter() - start:.0f} s for {len(paths)} notebooks"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""), flush=True)
    return times, failed


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the notebooks."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_helpers.notebooks")
    parser.add_argument("command", choices=["run"])
    parser.add_argument("notebooks", nargs="*", help="paths (default: every notebooks/NN_*.ipynb)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--inplace", action="store_true", help="overwrite the committed notebooks")
    where.add_argument("--out", type=Path, help="write executed copies into this folder")
    parser.add_argument("--html", type=Path, help="also export HTML into this folder")
    parser.add_argument("--times", type=Path, help="save per-notebook seconds as JSON here")
    args = parser.parse_intermixed_args(argv)
    os.environ["FASTLOOPS_SCALE"] = config.scale()  # validated before any kernel starts
    times, failed = run_all(notebook_paths(args.notebooks), None if args.inplace else args.out, args.html)
    if args.times:
        args.times.parent.mkdir(parents=True, exist_ok=True)
        args.times.write_text(json.dumps({"scale": config.scale(), "seconds": times,
                                          "failed": failed}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
