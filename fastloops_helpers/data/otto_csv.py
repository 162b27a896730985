"""Otto Group Product Classification: read `train.csv`, or generate a seeded synthetic one in the same format.

The real file (Kaggle, 2015) has a header `id,feat_1,...,feat_93,target`, 61,878 rows of 93 sparse
non-negative integer counts and a target `Class_1`..`Class_9`. Explained in notebooks/10_ffcv_otto.ipynb.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import config
from ..atomic import staged

NUM_FEATURES = 93
CLASSES = tuple(f"Class_{i}" for i in range(1, 10))
HEADER = ["id", *(f"feat_{i}" for i in range(1, NUM_FEATURES + 1)), "target"]
ROWS = 61_878
# Class counts of the real train.csv; the generator draws labels in these proportions.
CLASS_COUNTS = np.array([1929, 16122, 8004, 2691, 2739, 14135, 2839, 8464, 4955])


def generate_otto(path: str | Path, rows: int = ROWS, seed: int = 0) -> Path:
    """Write a synthetic Otto `train.csv` at `path`: sparse counts, imbalanced, learnable classes.

    Each class has its own mean count per feature (a shared base rate times a class-specific factor);
    each row draws gamma-Poisson (over-dispersed) counts around its class's means, so most entries are 0,
    a few are large, and the classes overlap like the real ones. Explained in notebooks/10_ffcv_otto.ipynb.
    """
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    rng = np.random.default_rng(seed)
    base = rng.gamma(0.6, 0.6, size=NUM_FEATURES)  # most features rare, a few common
    factor = rng.lognormal(0.0, 1.1, size=(len(CLASSES), NUM_FEATURES))  # what tells the classes apart
    y = rng.choice(len(CLASSES), size=rows, p=CLASS_COUNTS / CLASS_COUNTS.sum())
    activity = rng.gamma(2.0, 0.5, size=(rows, 1))  # some products have more of everything
    rate = base * factor[y] * activity * rng.gamma(0.5, 2.0, size=(rows, NUM_FEATURES))
    X = rng.poisson(rate).astype(np.int64)
    frame = pd.DataFrame(X, columns=HEADER[1:-1])
    frame.insert(0, "id", np.arange(1, rows + 1))
    frame["target"] = np.asarray(CLASSES)[y]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


def read_otto(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Parse an Otto `train.csv` into float32 features (N, 93) and int64 labels 0..8.

    Raises ValueError naming the line for a wrong header, a field that is not a non-negative integer,
    or an unknown class. Explained in notebooks/10_ffcv_otto.ipynb.
    """
    path = Path(path)
    with path.open() as f:
        header = f.readline().rstrip("\r\n").split(",")
    if header != HEADER:
        bad = next((i for i, (a, b) in enumerate(zip(header, HEADER)) if a != b), min(len(header), len(HEADER)))
        got = header[bad] if bad < len(header) else "<missing>"
        raise ValueError(
            f"{path}: line 1 is not Otto's header: column {bad + 1} is {got!r}, expected "
            f"{HEADER[bad] if bad < len(HEADER) else '<nothing>'!r} "
            f"(want id,feat_1..feat_{NUM_FEATURES},target)"
        )
    try:
        frame = pd.read_csv(path, na_filter=False)  # C parser: int64 columns unless a field is not an integer
    except pd.errors.ParserError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    X = _features(frame, path)
    return X.astype(np.float32), _labels(frame["target"], path)


def _features(frame: pd.DataFrame, path: Path) -> np.ndarray:
    raw = frame[HEADER[1:-1]]
    first: tuple[int, str] | None = None  # (row, column) of the earliest bad field
    for name in raw.columns:
        values = (
            pd.to_numeric(raw[name], errors="coerce").to_numpy(dtype=np.float64)
            if raw[name].dtype.kind != "i"
            else raw[name].to_numpy()
        )  # text, floats or blanks -> NaN check
        bad = np.flatnonzero(np.isnan(values) | (values < 0) | (values != np.floor(values)))
        if bad.size and (first is None or bad[0] < first[0]):
            first = (int(bad[0]), name)
    if first is not None:
        row, name = first
        raise ValueError(
            f"{path}: line {row + 2}, column {name}: '{raw[name].iat[row]}' is not a non-negative integer count"
        )
    return raw.to_numpy(dtype=np.int64)


def _labels(target: pd.Series, path: Path) -> np.ndarray:
    codes = target.map({c: i for i, c in enumerate(CLASSES)}).fillna(-1).to_numpy(dtype=np.int64)
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raise ValueError(
            f"{path}: line {row + 2}: unknown class {target.iat[row]!r} (expected one of Class_1..Class_{len(CLASSES)})"
        )
    return codes


def split(
    X: np.ndarray, y: np.ndarray, val_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return X_train, y_train, X_val, y_val from a seeded shuffle (float32 features, int64 labels)."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    order = np.random.default_rng(seed).permutation(len(X))
    n_val = max(1, int(round(len(X) * val_fraction)))
    val, train = order[:n_val], order[n_val:]
    X, y = np.ascontiguousarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)
    return X[train], y[train], X[val], y[val]


def load_otto(
    rows: int | None = None, seed: int = 0, path: str | Path | None = None, val_fraction: float = 0.2
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read `path` (a real train.csv) or a cached synthetic one of `rows` rows; return the split.

    Explained in notebooks/10_ffcv_otto.ipynb.
    """
    if path is None:
        rows = config.size("otto.rows") if rows is None else rows
        path = config.data_dir() / f"otto-synthetic-{rows}-s{seed}" / "train.csv"
        if not path.exists():
            with staged(path) as tmp:  # two processes (DDP ranks) may generate at once: each writes aside
                generate_otto(tmp, rows, seed)
    return split(*read_otto(path), val_fraction=val_fraction, seed=seed)


class OttoRows(torch.utils.data.Dataset):
    """The seed's per-sample dataset: `__getitem__` returns one (float32 row, label); for DataLoader.

    Lives in the package so DataLoader workers can import it under any start method.
    Explained in notebooks/10_ffcv_otto.ipynb.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray) -> None:
        self.X, self.y = X, y

    def __len__(self) -> int:
        return len(self.X)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.int64]:
        return self.X[index].astype(np.float32), self.y[index]
