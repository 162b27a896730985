"""Datasets and measurements for DataLoader workers: JPEG decoding, per-worker memory, per-worker randomness.

They live in the package so that workers can import them under every start method (fork, spawn, forkserver).
Explained in notebooks/07_dataloader_anatomy.ipynb.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate, get_worker_info

from .. import measure


class ResizeToTensor:
    """Resize a PIL image to `px` x `px` and return it as a uint8 CHW tensor (no torchvision needed)."""

    def __init__(self, px: int) -> None:
        self.px = px

    def __call__(self, image: Any) -> torch.Tensor:
        image = image.resize((self.px, self.px))
        return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)


class StackedImages(Dataset):
    """Decoded images held as one uint8 tensor; fetched one sample at a time (`__getitem__`)."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[i], self.labels[i]


class BatchedStackedImages(StackedImages):
    """The same, plus `__getitems__`: one gather per batch; pair it with `collate_fn=load.getitems.collate_batch`."""

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.as_tensor(indices)
        # index_select, not images[index]: advanced indexing of uint8 was ~100x slower here (torch 2.13 CPU)
        return self.images.index_select(0, index), self.labels.index_select(0, index)


def collate_drop_none(batch: list[Any]) -> Any:
    """Seed 002's collate for broken images: keep the (image, label) pairs whose image is not None.

    Returns None when every image was broken (the training loop must skip it); says nothing about what it dropped.
    """
    batch = [(image, label) for image, label in batch if image is not None]
    if len(batch) == 0:
        return None
    return default_collate(batch)


# ------------------------------------------------------------------------------------ worker memory
class ListRows(Dataset):
    """Rows held as a Python list of `bytes` objects: each access writes a refcount, so forked pages get copied."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = [r.tobytes() for r in rows]
        self.dim = rows.shape[1]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.from_numpy(np.frombuffer(self.rows[i], dtype=np.float32).copy())


class FloatListRows(Dataset):
    """Rows held as lists of Python floats: every number is an object of its own (8x the bytes), each read writes it."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = [r.tolist() for r in rows]
        self.dim = rows.shape[1]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(self.rows[i], dtype=torch.float32)


class ArrayRows(Dataset):
    """Rows held as one numpy array: one object, one refcount; the data pages are only read, so stay shared."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = np.ascontiguousarray(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.from_numpy(self.rows[i].copy())


class MemmapRows(Dataset):
    """Rows read from a raw float32 file through `np.memmap`, opened lazily in each process (page cache shared)."""

    def __init__(self, path: str | Path, dim: int) -> None:
        self.path, self.dim = str(path), dim
        self.length = Path(path).stat().st_size // (4 * dim)
        self._rows: np.memmap | None = None

    def __len__(self) -> int:
        return self.length

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, _rows=None)  # a memmap pickles as a full copy: reopen instead

    def __getitem__(self, i: int) -> torch.Tensor:
        if self._rows is None:
            self._rows = np.memmap(self.path, dtype=np.float32, mode="r", shape=(self.length, self.dim))
        return torch.from_numpy(np.array(self._rows[i]))


def make_rows(megabytes: int, dim: int = 256, seed: int = 0) -> np.ndarray:
    """Return a float32 array of about `megabytes` MB with `dim` columns (1 KiB rows at dim=256)."""
    n = max(1, megabytes * 2**20 // (4 * dim))
    return np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)


def worker_memory(dataset: Dataset, num_workers: int, batch_size: int = 256) -> dict[str, Any]:
    """Run one epoch; measure USS/PSS of main and workers just before the last batch is consumed, and samples/s."""
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(0),
    )
    snapshot, n = [], 0
    start = measure.now()
    for i, batch in enumerate(loader):
        n += len(batch)
        if i == len(loader) - 1:  # every sample has been read; workers are still alive
            seconds = measure.elapsed(start)
            snapshot = measure.memory_by_process()
    workers = [r for r in snapshot if r["role"] == "worker"]
    main = next(r for r in snapshot if r["role"] == "main")
    return {
        "num_workers": num_workers,
        "samples_per_s": n / seconds,
        "main_uss_mb": main["uss_mb"],
        "workers_uss_mb": sum(r["uss_mb"] for r in workers),
        "total_pss_mb": sum(r["pss_mb"] for r in snapshot),
    }


# -------------------------------------------------------------------------------- worker randomness
class NoisyIndex(Dataset):
    """Return (index, a random number) from an RNG the dataset owns: copied as-is into every worker."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n, self.rng = n, np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[int, float]:
        return i, float(self.rng.random())


class GlobalNoisyIndex(NoisyIndex):
    """Return (index, a number from numpy's global RNG), which DataLoader re-seeds in each worker."""

    def __getitem__(self, i: int) -> tuple[int, float]:
        return i, float(np.random.random())


def seed_worker(worker_id: int) -> None:
    """Give this worker's dataset its own RNG, seeded from the per-worker seed DataLoader chose."""
    info = get_worker_info()
    # runs only in a worker, where get_worker_info() is set and the dataset is a NoisyIndex (shown in notebook 07)
    info.dataset.rng = np.random.default_rng(info.seed)  # type: ignore[union-attr]


def duplicated_draws(dataset: Dataset, num_workers: int, worker_init_fn: Any = None, batch_size: int = 4) -> int:
    """Return how many of an epoch's random draws are repeats of another draw (0 when workers differ)."""
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, worker_init_fn=worker_init_fn)
    draws = torch.cat([noise for _, noise in loader]).tolist()
    return len(draws) - len(set(draws))
