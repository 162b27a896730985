"""Execute the notebooks the way the stored outputs must be made, clean them, and refresh their run-time cards.

`python -m fastloops_book.notebooks run [--inplace | --out DIR] [--html DIR] [--times FILE] [NOTEBOOK ...]`
runs top to bottom in a fresh kernel with fd capture off (under pytest ipykernel does not capture fd-level
output, so a reference made with it on would hold lines nbval never sees), no timing metadata; it stores each
progress bar as its final line, saves the seconds per notebook and scale in results/notebook_times.json and,
with --inplace, rewrites each card's run-time line. `--scale` (default FASTLOOPS_SCALE) reaches each kernel
through its environment; this process's environment is left as it was.
A card shows the run that made the notebook's stored outputs: only an --inplace run (`make notebooks`) is
recorded for the cards. A run into --out (`make reproduce`) reports its times in results/REPORT.md and leaves
the cards alone. `python -m fastloops_book.notebooks cards [NOTEBOOK ...]` rewrites the cards from the
saved in-place runs only.
Every run marks each solution cell's input and output hidden in JupyterLab (`metadata.jupyter.source_hidden`
and `outputs_hidden`) and starts it with a line that gives nothing away (a collapsed cell shows its first line).

A card's run-time line is generated where the notebook's first cell holds the marker, e.g.
`| **Run time** | <!-- run-time --> |`: everything after the marker up to the next `|` is replaced by
`smoke ~12 s · workshop ~40 s (measured on <CPU>, <date>)`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastloops_helpers import config, measure
from fastloops_helpers.atomic import atomic_write_text

from . import runner
from .instruments.warp import SOLUTION_FIRST_LINE  # what a collapsed solution shows (its first line)

NOTEBOOKS = "notebooks"
CONCLUSION = "13_conclusion.ipynb"  # reads every other notebook's and benchmark's results: runs after them
TIMES_FILE = "notebook_times.json"
RUN_TIME_MARKER = "<!-- run-time -->"
VOLATILE_CELL_KEYS = ("execution", "collapsed", "scrolled", "ExecuteTime")
_CARRIAGE = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)  # the same rule nbval applies before comparing
_CARD_LINE = re.compile(re.escape(RUN_TIME_MARKER) + r"[^|\n]*")
_BAR_LINE = re.compile(r"^.*: *\d+%\|[# ]*\| \d+/\d+$")  # a finished bar of measure.progress (ascii, no rate)
UNCOMPARED = "nbval-ignore-output"
SOLUTION = "solution"  # a worked answer to an exercise: hidden in JupyterLab, folded on the site, not in slides
HIDDEN = ("source_hidden", "outputs_hidden")  # JupyterLab collapses a cell's input and output under these flags


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """Return the notebooks to run: the given ones, else every notebooks/NN_*.ipynb in order.

    Each name is a path, a notebook's name (07_dataloader_anatomy) or its number (07, or 7).
    """
    every = sorted((config.project_root() / NOTEBOOKS).glob("[0-9][0-9]_*.ipynb"))
    return [_one_notebook(name, every) for name in names] if names else every


def _one_notebook(name: str, every: list[Path]) -> Path:
    if Path(name).is_file():
        return Path(name)
    stem = f"{int(name):02d}" if name.isdigit() else Path(name).stem
    found = [p for p in every if p.stem == stem or p.stem.startswith(f"{stem}_")]
    if len(found) != 1:
        raise SystemExit(
            f"no such notebook: {name!r}. Give its path (notebooks/07_dataloader_anatomy.ipynb), its name "
            f"(07_dataloader_anatomy) or its number (07); the notebooks are {', '.join(p.stem for p in every)}"
        )
    return found[0]


def conclusion_last(paths: list[Path]) -> list[Path]:
    """Return `paths` in order with the conclusion moved to the end: it reads what the others saved."""
    return [p for p in paths if p.name != CONCLUSION] + [p for p in paths if p.name == CONCLUSION]


def coalesce_streams(outputs: list[Any]) -> list[Any]:
    """Merge a cell's stream outputs by name and keep only the final state of each carriage-returned line."""
    merged: list[Any] = []
    streams: dict[str, Any] = {}
    for out in outputs:
        if out.get("output_type") != "stream":
            merged.append(out)
        elif out["name"] in streams:
            streams[out["name"]]["text"] += _text(out)
        else:
            out["text"] = _text(out)
            streams[out["name"]] = out
            merged.append(out)
    for out in streams.values():
        out["text"] = resolve_carriage_returns(out["text"])
    return [o for o in merged if o.get("output_type") != "stream" or o["text"]]


def resolve_carriage_returns(text: str) -> str:
    """Return `text` with each `\\r`-rewritten line at its last state (a progress bar's final frame)."""
    return _CARRIAGE.sub("", text)


def _text(out: Any) -> str:
    text = out.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def clean(nb: Any) -> Any:
    """Drop volatile metadata, coalesce stream outputs (one line per progress bar); keep outputs and counts."""
    nb["metadata"].pop("widgets", None)
    nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    for cell in nb["cells"]:
        for key in VOLATILE_CELL_KEYS:
            cell.get("metadata", {}).pop(key, None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = coalesce_streams(cell.get("outputs", []))
            tags = cell.get("metadata", {}).get("tags", [])
            if UNCOMPARED in tags:
                cell["outputs"] = bars_as_text(cell["outputs"])
    hide_solutions(nb)
    return nb


def hide_solutions(nb: Any) -> int:
    """Collapse every solution cell in JupyterLab, input and output; return how many cells changed.

    A collapsed input shows its first line, so a solution starts with SOLUTION_FIRST_LINE. A reader sees the
    exercise and that line, and clicks the cell open after trying.
    """
    changed = 0
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code" and SOLUTION in cell.get("metadata", {}).get("tags", []):
            flags = cell["metadata"].setdefault("jupyter", {})
            before = (dict(flags), cell["source"])
            flags.update(dict.fromkeys(HIDDEN, True))
            cell["source"] = _first_line(cell["source"])
            changed += before != (flags, cell["source"])
    return changed


def _first_line(source: str | list[str]) -> str | list[str]:
    """Return a cell source (text or list of lines, as stored) that starts with SOLUTION_FIRST_LINE."""
    text = "".join(source) if isinstance(source, list) else source
    if text.splitlines()[:1] == [SOLUTION_FIRST_LINE]:
        return source
    text = SOLUTION_FIRST_LINE + "\n" + text
    return text.splitlines(keepends=True) if isinstance(source, list) else text


def bars_as_text(outputs: list[Any]) -> list[Any]:
    """Store a coalesced stderr stream that holds only finished progress bars as stdout, in the order printed.

    GitHub shows stderr as a red block; a finished bar is plain text. Only for cells nbval does not compare: a
    live run prints its bars on stderr.
    """
    streams = {o["name"]: o for o in outputs if o.get("output_type") == "stream"}
    err, out = streams.get("stderr"), streams.get("stdout")
    if err is None or not all(_BAR_LINE.match(line) for line in err["text"].splitlines()):
        return outputs
    if out is None:
        err["name"] = "stdout"
        return outputs
    first, second = (err, out) if outputs.index(err) < outputs.index(out) else (out, err)
    first["name"], first["text"] = "stdout", first["text"] + second["text"]
    return [o for o in outputs if o is not second]


def kernel_env(scale: str) -> dict[str, str]:
    """Return the environment a notebook's kernel starts with: this process's, at `scale`."""
    return {**os.environ, "FASTLOOPS_SCALE": config.scale(scale)}


def execute(path: Path, out: Path, scale: str, timeout: int = 1800) -> float:
    """Execute notebook `path` in a fresh kernel at `scale`, write the cleaned result to `out`; return seconds."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    start = measure.now()
    try:
        nb = runner.in_kernel(nb, path.parent, kernel_env(scale), timeout)
    finally:  # a failed run keeps what it printed up to the failure (nbclient fills `nb` as it goes)
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(clean(nb), out)
    return measure.now() - start


def export_html(path: Path, folder: Path) -> Path:
    """Write an HTML rendering of an executed notebook into `folder`."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(path, as_version=4))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (path.stem + ".html")
    target.write_text(body, encoding="utf-8")
    return target


def run_all(
    paths: list[Path], out_dir: Path | None, html_dir: Path | None, scale: str
) -> tuple[dict[str, float], list[str]]:
    """Execute `paths` in order (in place when `out_dir` is None), printing progress.

    Returns the seconds per notebook and the names of those that failed.
    """
    times: dict[str, float] = {}
    failed: list[str] = []
    start = measure.now()
    for i, path in enumerate(paths, 1):
        target = path if out_dir is None else out_dir / path.name
        print(f"[{i}/{len(paths)}] {path.name} (scale={scale}) ...", flush=True)
        t0 = measure.now()
        try:
            times[path.name] = execute(path, target, scale)
        except Exception as exc:  # keep going: one broken notebook must not hide the others' results
            failed.append(path.name)
            times[path.name] = measure.now() - t0
            print(f"    FAILED: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}", flush=True)
        if html_dir is not None and target.exists():
            export_html(target, html_dir)
        print(f"    {times[path.name]:.1f} s (elapsed {measure.now() - start:.0f} s)", flush=True)
    print(
        f"total: {measure.now() - start:.0f} s for {len(paths)} notebooks"
        + (f"; FAILED: {', '.join(failed)}" if failed else ""),
        flush=True,
    )
    return times, failed


def save_times(
    path: Path, times: dict[str, float], failed: list[str], started: str, scale: str, inplace: bool = False
) -> dict[str, Any]:
    """Merge this run's seconds into `path` under its scale ({scale: {seconds, failed, machine, started, stored}}).

    `started` is kept per notebook, so a result a notebook saved before its latest run shows as a leftover.
    `stored` holds, per notebook, its latest `inplace` run that passed (seconds, machine, started): the run that
    made the committed outputs, which its card shows. A run into another folder leaves `stored` as it was.
    """
    doc = load_times(path)
    entry = doc.get(scale, {"seconds": {}, "failed": []})
    entry["seconds"] = {**entry.get("seconds", {}), **{k: round(v, 1) for k, v in times.items()}}
    entry["failed"] = sorted((set(entry.get("failed", [])) - set(times)) | set(failed))
    starts = entry.get("started") if isinstance(entry.get("started"), dict) else {}
    entry |= {"machine": machine(), "started": {**starts, **{k: started for k in times}}}
    if inplace:
        here = {"machine": entry["machine"], "started": started}
        done = {k: {"seconds": round(v, 1), **here} for k, v in times.items() if k not in failed}
        entry["stored"] = {**entry.get("stored", {}), **done}
    doc[scale] = entry
    atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return doc


def load_times(path: Path) -> dict[str, Any]:
    """Return the saved notebook times by scale ({} when none were saved)."""
    if not Path(path).exists():
        return {}
    return json.loads(Path(path).read_text())


def machine() -> str:
    """Return a short machine label for the cards: CPU model and core count, and the GPU if any."""
    gpu = measure.gpu_name()
    return f"{measure.cpu_name()}, {os.cpu_count()} cores" + (f", {gpu.split(' (')[0]}" if gpu else "")


def duration(seconds: float) -> str:
    """Return `seconds` as a card shows it: ~12 s, ~1.5 min, ~12 min."""
    if seconds < 60:
        return f"~{seconds:.2g} s" if seconds < 10 else f"~{round(seconds):d} s"
    minutes = seconds / 60
    return f"~{minutes:.1f} min" if minutes < 10 else f"~{round(minutes):d} min"


def card_text(name: str, times: dict[str, Any]) -> str | None:
    """Return the run-time text for notebook file `name` from its in-place runs, or None when it has none."""
    parts, machines, dates = [], set(), set()
    for scale in config.SCALES:
        run = times.get(scale, {}).get("stored", {}).get(name)
        if run:
            parts.append(f"{scale} {duration(run['seconds'])}")
            machines.add(run.get("machine", "?"))
            dates.add(str(run.get("started", ""))[:10])
    if not parts:
        return None
    where = "; ".join(sorted(machines))
    when = ", ".join(sorted(d for d in dates if d))
    return f"{RUN_TIME_MARKER} {' · '.join(parts)} (measured on {where}{', ' + when if when else ''}) "


def refresh_card(path: Path, times: dict[str, Any]) -> bool:
    """Rewrite the run-time line after the marker in notebook `path`'s cards; return whether it changed."""
    import nbformat

    text = card_text(path.name, times)
    if text is None:
        return False
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "markdown" and RUN_TIME_MARKER in cell.source:
            new = _CARD_LINE.sub(text.replace("\\", "\\\\"), cell.source)
            changed |= new != cell.source
            cell.source = new
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the notebooks or refresh their cards."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.notebooks")
    parser.add_argument("command", choices=["run", "cards"])
    parser.add_argument("notebooks", nargs="*", help="paths (default: every notebooks/NN_*.ipynb)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--inplace", action="store_true", help="overwrite the committed notebooks")
    where.add_argument("--out", type=Path, help="write executed copies into this folder")
    parser.add_argument("--html", type=Path, help="also export HTML into this folder")
    parser.add_argument("--times", type=Path, help=f"notebook times JSON (default results/{TIMES_FILE})")
    parser.add_argument("--scale", choices=config.PROFILES, help="size profile (default: FASTLOOPS_SCALE or workshop)")
    args = parser.parse_intermixed_args(argv)
    times_path = args.times or config.results_dir() / TIMES_FILE
    paths = conclusion_last(notebook_paths(args.notebooks))
    if args.command == "cards":
        times = load_times(times_path)
        for path in paths:
            print(f"{config.rel(path)}: {'refreshed' if refresh_card(path, times) else 'unchanged'}")
        return 0
    if not (args.inplace or args.out):
        parser.error("run needs --inplace or --out DIR")
    scale = config.scale(args.scale)  # validated before any kernel starts; each kernel gets it in its environment
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    seconds, failed = run_all(paths, None if args.inplace else args.out, args.html, scale)
    times = save_times(times_path, seconds, failed, started, scale, inplace=args.inplace)
    if args.inplace:
        for path in paths:
            refresh_card(path, times)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
