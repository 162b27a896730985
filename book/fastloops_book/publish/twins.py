"""Keep a text twin of each notebook for review: notebooks/py/NN_topic.py, a jupytext percent script.

A committed .ipynb carries its outputs, so a diff of its prose or code is hard to read; the twin holds the
same cells (markdown as comments, cell tags and slide types on the `# %%` lines) and no outputs, so a
review reads the twin's diff. `python -m fastloops_book.publish.twins write` regenerates every twin
(`make twins`); `... check` exits 1 and names the twins out of sync (also a test). The .ipynb stays the
source: edit the notebook, then run `make twins`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FOLDER = "py"  # notebooks/py/, beside the notebooks it mirrors
FORMAT = "py:percent"
COMMAND = "make twins   (python -m fastloops_book.publish.twins write)"


def twin_path(notebook: Path) -> Path:
    """Return where the twin of `notebook` lives."""
    return notebook.parent / FOLDER / (notebook.stem + ".py")


def text(notebook: Path) -> str:
    """Return the percent script of `notebook`: its cells' sources and metadata, no outputs, no header."""
    import jupytext

    nb = jupytext.read(notebook)
    # No YAML header (kernelspec, jupytext version): the twin then changes only when a cell does.
    nb.metadata["jupytext"] = {"notebook_metadata_filter": "-all", "cell_metadata_filter": "tags,slideshow"}
    return jupytext.writes(nb, fmt=FORMAT)


def stale(notebooks: list[Path]) -> list[Path]:
    """Return the twins that are missing or differ from their notebooks, and twins whose notebook is gone."""
    out = [
        twin_path(nb)
        for nb in notebooks
        if not twin_path(nb).is_file() or twin_path(nb).read_text(encoding="utf-8") != text(nb)
    ]
    # an orphan is a twin whose notebook is gone, not one of a notebook left off the command line
    out += [
        p
        for f in {nb.parent for nb in notebooks}
        for p in sorted((f / FOLDER).glob("*.py"))
        if not (f / (p.stem + ".ipynb")).is_file()
    ]
    return out


def write(notebooks: list[Path]) -> list[Path]:
    """Write every twin that is out of date, remove orphans; return the paths changed."""
    changed = stale(notebooks)
    stems = {nb.stem: nb for nb in notebooks}
    for path in changed:
        if path.stem in stems:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text(stems[path.stem]), encoding="utf-8")
        else:
            path.unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    """Write the twins, or check that they match the notebooks."""
    from ..notebooks import notebook_paths

    parser = argparse.ArgumentParser(prog="python -m fastloops_book.publish.twins")
    parser.add_argument("command", choices=["write", "check"])
    parser.add_argument("notebooks", nargs="*", help="paths (default: every notebooks/NN_*.ipynb)")
    args = parser.parse_args(argv)
    paths = notebook_paths(args.notebooks)
    if args.command == "write":
        changed = write(paths)
        print(
            f"{len(paths)} notebooks, {len(changed)} twins written or removed: "
            + (", ".join(p.name for p in changed) or "none")
        )
        return 0
    out = stale(paths)
    if out:
        print(f"text twins out of sync: {', '.join(p.name for p in out)}; run: {COMMAND}")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
