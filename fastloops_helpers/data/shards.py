"""Write an image set as shards for streaming: WebDataset tar files and Parquet files, in a chosen class layout.

`write_shards(samples, folder, shards, layout)` takes (JPEG bytes, label) pairs, orders them class-sorted (the
worst case for a shuffle buffer) or shuffled once at write time, cuts them into `shards` runs of equal length,
and writes `shard-NNNNN.tar` (members `KEY.jpg` and `KEY.cls`, as WebDataset expects) and `shard-NNNNN.parquet`
(columns `key`, `jpg`, `cls`) of the same samples, plus `manifest.json` (names, counts, labels per shard).
The folder is written aside and renamed into place: a failed write keeps the last complete copy.

Experimental: the interface may change in a minor version.

Explained in notebooks/16_when_data_no_longer_fits.ipynb.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic import marker_holds, staged
from ..extras import require

LAYOUTS = ("sorted", "shuffled")
MANIFEST = "manifest.json"
ROW_GROUP = 16  # Parquet rows per group: a reader can start on a shard after one small range request


@dataclass(frozen=True)
class Shards:
    """A written shard set: its folder, shard names (without suffix) and the labels in each shard, in order."""

    folder: Path
    names: list[str]
    labels: list[list[int]]
    layout: str

    @property
    def samples(self) -> int:
        """Return the number of samples over all shards."""
        return sum(len(x) for x in self.labels)

    def files(self, suffix: str) -> list[str]:
        """Return the shard file names with `suffix` (".tar" or ".parquet")."""
        return [n + suffix for n in self.names]

    def nbytes(self, suffix: str) -> int:
        """Return the bytes of all shards with `suffix` on disk."""
        return sum((self.folder / f).stat().st_size for f in self.files(suffix))


def ordered(labels: Sequence[int], layout: str, seed: int = 0) -> np.ndarray:
    """Return the write order of samples: grouped by class ("sorted") or one seeded shuffle ("shuffled")."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == "sorted":
        return np.argsort(np.asarray(labels), kind="stable")
    return np.random.default_rng(seed).permutation(len(labels))


def write_shards(
    samples: Sequence[tuple[bytes, int]], folder: str | Path, shards: int, layout: str, seed: int = 0
) -> Shards:
    """Write `samples` as `shards` tar and Parquet shards in `layout` order; reuse a complete identical set."""
    if not 1 <= shards <= len(samples):
        raise ValueError(f"shards must be between 1 and the {len(samples)} samples, got {shards}")
    folder = Path(folder)
    order = ordered([label for _, label in samples], layout, seed)
    cuts = np.array_split(order, shards)
    names = [f"shard-{i:05d}" for i in range(shards)]
    labels = [[int(samples[j][1]) for j in cut] for cut in cuts]
    manifest = {"names": names, "labels": labels, "layout": layout, "seed": seed, "samples": len(samples)}
    if marker_holds(folder / MANIFEST, manifest):
        return Shards(folder, names, labels, layout)
    with staged(folder) as tmp:
        tmp.mkdir(parents=True, exist_ok=True)
        for name, cut in zip(names, cuts):
            rows = [(f"{j:07d}", samples[j][0], int(samples[j][1])) for j in cut]
            write_tar(tmp / f"{name}.tar", rows)
            write_parquet(tmp / f"{name}.parquet", rows)
        (tmp / MANIFEST).write_text(json.dumps(manifest))  # last: its presence means the set is whole
    return Shards(folder, names, labels, layout)


def write_tar(path: Path, rows: Iterable[tuple[str, bytes, int]]) -> None:
    """Write WebDataset members KEY.jpg and KEY.cls for each (key, jpeg bytes, label)."""
    with tarfile.open(path, "w") as tar:
        for key, jpeg, label in rows:
            for member, data in ((f"{key}.jpg", jpeg), (f"{key}.cls", str(label).encode())):
                info = tarfile.TarInfo(member)
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))


def write_parquet(path: Path, rows: Sequence[tuple[str, bytes, int]]) -> None:
    """Write columns key, jpg, cls in row groups of ROW_GROUP rows."""
    pa, pq = require("pyarrow", "stream"), require("pyarrow.parquet", "stream")
    keys, jpegs, labels = zip(*rows)
    table = pa.table({"key": list(keys), "jpg": pa.array(jpegs, pa.binary()), "cls": pa.array(labels, pa.int64())})
    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="none")  # JPEG does not compress further


def load(folder: str | Path) -> Shards:
    """Return the shard set written in `folder`, with a clear error when it is missing or incomplete."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"no complete shard set in {folder}: write it with write_shards()") from exc
    return Shards(folder, manifest["names"], manifest["labels"], manifest["layout"])


def jpeg_samples(root: str | Path) -> list[tuple[bytes, int]]:
    """Return (JPEG bytes, class index) of every image of an ImageFolder split, classes in sorted order."""
    root = Path(root)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not classes:
        raise FileNotFoundError(f"{root} has no class folders: expected root/<class>/*.jpg")
    return [(f.read_bytes(), label) for label, c in enumerate(classes) for f in sorted((root / c).glob("*.jpg"))]
