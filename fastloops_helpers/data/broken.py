"""Broken samples: a dataset that marks undecodable files, a collate that drops them, and a report.

Nothing is dropped silently: the dataset warns with the file name, the collate ships the dropped
names with each batch, and `BrokenReport` counts and names them at the end of each epoch.
Explained in notebooks/07_dataloader_anatomy.ipynb.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from torch.utils.data import default_collate

from .jpeg_folder import ImageFolder

DECODE_ERRORS = (OSError, SyntaxError, ValueError)  # Pillow: truncated, unidentified, corrupt headers


class Broken(NamedTuple):
    """Stands in for a sample that could not be decoded: its file and why."""

    path: str
    reason: str


class SafeImageFolder(ImageFolder):
    """An ImageFolder whose undecodable files become `Broken` markers (with a warning) instead of errors.

    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    def __getitem__(self, index: int) -> Any:
        try:
            return super().__getitem__(index)
        except DECODE_ERRORS as exc:
            path = self.samples[index][0]
            warnings.warn(f"broken sample {path}: {type(exc).__name__}: {exc}", stacklevel=2)
            return Broken(path, f"{type(exc).__name__}: {exc}")


def collate_drop_broken(samples: list[Any]) -> tuple[Any, list[str]]:
    """Collate the good samples and return (batch or None if all were broken, the dropped file names)."""
    good = [s for s in samples if not isinstance(s, Broken)]
    dropped = [s.path for s in samples if isinstance(s, Broken)]
    return (default_collate(good) if good else None), dropped


class BrokenReport:
    """Wrap a loader built with `collate_drop_broken`: yield the good batches, count and name the dropped.

    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """

    def __init__(self, verbose: bool = True) -> None:
        self.verbose = verbose
        self.dropped: list[str] = []
        self.empty_batches = self.batches = 0

    def watch(self, loader: Iterable[tuple[Any, list[str]]]) -> Iterator[Any]:
        """Yield each non-empty batch of one epoch; at its end, print the report if `verbose`."""
        self.dropped, self.empty_batches, self.batches = [], 0, 0
        for batch, dropped in loader:
            self.dropped += dropped
            if batch is None:
                self.empty_batches += 1
                continue
            self.batches += 1
            yield batch
        if self.verbose:
            print(self.report())

    def report(self) -> str:
        """Return one line: how many samples were dropped, which files, and how many batches were empty."""
        if not self.dropped:
            return "epoch done: no broken samples"
        names = ", ".join(sorted(Path(p).name for p in self.dropped))
        return (
            f"epoch done: dropped {len(self.dropped)} broken sample(s): {names}; "
            f"{self.empty_batches} all-broken batch(es) skipped, {self.batches} batches used"
        )


def plant_broken(folder: str | Path, good_jpeg: str | Path) -> list[Path]:
    """Write three broken files into `folder`: a truncated JPEG, a zero-byte .jpg and a text file named .jpg."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = Path(good_jpeg).read_bytes()
    files = {
        "broken_truncated.jpg": data[: len(data) // 2],
        "broken_empty.jpg": b"",
        "broken_text.jpg": b"this is not an image, only text with a .jpg name\n",
    }
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return [folder / name for name in files]
