"""One way to write files and folders: write aside, then rename into place, so a reader never sees half a write.

A write that fails or is interrupted part-way (a broken input, a full disk, Ctrl-C) leaves the previous complete
copy where it was. Folders get their completion marker last, inside the staged copy. Used by every writer in
`data/` and by `measure.save_results`. Explained in notebooks/09_precompute_memmap.ipynb.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


def _aside(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


@contextlib.contextmanager
def staged(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success move it onto `path`, on failure delete it.

    Works for a file or a folder (the caller creates what it writes at the yielded path). An existing copy at
    `path` is replaced only after the new one is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _aside(path, "tmp")
    _remove(tmp)
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    _swap(tmp, path)


def _swap(tmp: Path, path: Path) -> None:
    if not tmp.is_dir():
        os.replace(tmp, path)  # atomic for files on one file system
        return
    old = _aside(path, "old")
    if path.exists():
        os.replace(path, old)  # a folder cannot be replaced in one step: move the old one aside first
    try:
        os.replace(tmp, path)
    except OSError:
        if old.exists() and not path.exists():
            os.replace(old, path)  # put the previous copy back
        _remove(tmp)
        raise
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a staged file; return `path`."""
    with staged(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def marker_holds(path: str | Path, expected: object) -> bool:
    """Return whether the JSON marker at `path` equals `expected`: a complete copy written with those settings."""
    try:
        return json.loads(Path(path).read_text()) == expected
    except (OSError, ValueError):  # missing, unreadable or cut short: not that copy
        return False
