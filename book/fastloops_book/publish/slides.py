"""Give every cell of a notebook slide metadata, so that a deck has one idea per slide.

`python -m fastloops_book.publish.slides tag [NOTEBOOK ...]` writes the metadata (every notebook by
default; idempotent: a second run changes nothing); `... check` exits 1 and names the notebooks whose
metadata differs from what `tag` would write. The rules depend only on the cells, so re-running after an
edit gives the same deck structure everywhere:

- the title/card cell and a markdown cell opening with a `#`/`##` heading start a **slide**;
  a markdown cell with such a heading below its first line is split there first (prose stays with the
  slide it explains, the heading opens the next one);
- a `###` heading, a plot (a code cell with an image output) and the cell after a plot start a
  **subslide** (the plot gets the whole slide), and so does a cell that would overflow the slide it joins;
- the setup cell (the first code cell: imports, device and scale) and cells that only save results (they
  call `save_results` and print nothing but "saved ...") and exercise solutions (tagged `solution`) are
  **skip**ped (they run in a live RISE show, they are not shown);
- everything else continues the current slide (`-`).
A cell tag `slide:TYPE` (TYPE one of slide, subslide, fragment, skip, notes, -) overrides the rules.
"""

from __future__ import annotations

import argparse
import copy
import math
import re
import sys

SLIDE_TYPES = ("slide", "subslide", "fragment", "skip", "notes", "-")
SLIDE_LINES = 20  # lines that fit on a 960x700 reveal slide at the deck's font sizes
OUTPUT_LINES_SHOWN = 12  # long outputs scroll inside their slide; count only what shows at first
WRAP = 90  # characters per rendered line of prose
_HEADING = re.compile(r"^(#{1,6}) ")
_SAVES = re.compile(r"save_results\(")
COMMAND = "make slides-meta   (python -m fastloops_book.publish.slides tag)"


def heading_level(source: str) -> int:
    """Return the level of the heading that opens `source` (0 when it opens with none)."""
    match = _HEADING.match(source)
    return len(match.group(1)) if match else 0


def split_at_headings(cells: list[dict]) -> list[dict]:
    """Split markdown cells before each `#`/`##` heading that is not on their first line."""
    out: list[dict] = []
    for cell in cells:
        parts = _split_markdown(cell["source"]) if cell["cell_type"] == "markdown" else [cell["source"]]
        for k, part in enumerate(parts):
            piece = copy.deepcopy(cell)
            piece["source"] = part
            if k and "id" in cell:
                piece["id"] = f"{cell['id'][:60]}-{k}"
            out.append(piece)
    return out


def _split_markdown(source: str) -> list[str]:
    lines, fenced = source.split("\n"), False
    parts: list[list[str]] = [[]]
    for line in lines:
        fenced ^= line.startswith("```")
        if not fenced and 1 <= heading_level(line) <= 2 and any(s.strip() for s in parts[-1]):
            parts.append([])
        parts[-1].append(line)
    return ["\n".join(p).strip("\n") for p in parts]


def has_image(cell: dict) -> bool:
    """Return whether a code cell's stored outputs hold an image (a plot)."""
    return any(k.startswith("image/") for o in cell.get("outputs", []) for k in o.get("data", {}))


def output_lines(cell: dict) -> list[str]:
    """Return the text lines of a code cell's stored outputs (streams and plain-text results)."""
    return [
        line
        for out in cell.get("outputs", [])
        for line in "".join(out.get("text") or out.get("data", {}).get("text/plain", "")).splitlines()  # str or list
    ]


def housekeeping(cell: dict) -> bool:
    """Return whether a code cell only saves results (it calls save_results and prints nothing but 'saved ...')."""
    return bool(_SAVES.search(cell["source"])) and all(s.startswith("saved") for s in output_lines(cell))


def weight(cell: dict) -> int:
    """Return about how many slide lines `cell` takes (source, plus the first lines of its text outputs)."""
    if cell["cell_type"] == "markdown":
        return sum(max(1, math.ceil(len(line) / WRAP)) for line in cell["source"].split("\n"))
    return len(cell["source"].split("\n")) + min(len(output_lines(cell)), OUTPUT_LINES_SHOWN)


def override(cell: dict) -> str | None:
    """Return the slide type a `slide:TYPE` tag asks for, or None."""
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith("slide:"):
            kind = tag.split(":", 1)[1]
            if kind not in SLIDE_TYPES:
                raise ValueError(f"tag {tag!r}: slide type must be one of {', '.join(SLIDE_TYPES)}")
            return kind
    return None


def slide_types(cells: list[dict]) -> list[str]:
    """Return the slide type of each cell by the rules in this module's docstring."""
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), None)
    kinds: list[str] = []
    load, after_plot = 0, False
    for i, cell in enumerate(cells):
        kind = override(cell) or _rule(i, cell, first_code, load, after_plot)
        kinds.append(kind)
        if kind in ("slide", "subslide"):
            load = 0
        if kind not in ("skip", "notes"):
            load += weight(cell)
            after_plot = cell["cell_type"] == "code" and has_image(cell)
    return kinds


def _rule(i: int, cell: dict, first_code: int | None, load: int, after_plot: bool) -> str:
    level = heading_level(cell["source"]) if cell["cell_type"] == "markdown" else 0
    if i == 0 or 1 <= level <= 2:
        return "slide"
    if cell["cell_type"] == "code" and (
        i == first_code or housekeeping(cell) or "solution" in cell.get("metadata", {}).get("tags", [])
    ):
        return "skip"
    if level >= 3 or after_plot or (cell["cell_type"] == "code" and has_image(cell)):
        return "subslide"
    return "subslide" if load and load + weight(cell) > SLIDE_LINES else "-"


def tag(nb: dict) -> dict:
    """Split cells at headings and write `metadata.slideshow.slide_type` on every cell; return `nb`."""
    nb["cells"] = split_at_headings(nb["cells"])
    for cell, kind in zip(nb["cells"], slide_types(nb["cells"])):
        cell.setdefault("metadata", {})["slideshow"] = {"slide_type": kind}
    return nb


def main(argv: list[str] | None = None) -> int:
    """Tag notebooks with slide metadata, or check that they carry what `tag` would write."""
    import nbformat

    from ..notebooks import notebook_paths

    parser = argparse.ArgumentParser(prog="python -m fastloops_book.publish.slides")
    parser.add_argument("command", choices=["tag", "check"])
    parser.add_argument("notebooks", nargs="*", help="paths (default: every notebooks/NN_*.ipynb)")
    args = parser.parse_args(argv)
    stale = []
    for path in notebook_paths(args.notebooks):
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        if nbformat.writes(tag(nb)) != before:
            stale.append(path)
            if args.command == "tag":
                nbformat.write(nb, path)
        slides = sum(c.metadata.slideshow.slide_type == "slide" for c in nb.cells)
        print(
            f"{path.name}: {len(nb.cells)} cells, {slides} slides"
            + (" (updated)" if args.command == "tag" and path in stale else "")
        )
    if args.command == "check" and stale:
        print(f"slide metadata out of date in {', '.join(p.name for p in stale)}; run: {COMMAND}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
