"""ImageFolder + DataLoader vs a precomputed memmap + batched transforms: images per second, train and val."""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..data import memmap
from ..data.imagefolder import ImageFolder, synthetic_imagefolder
from ..load import transforms as T
from ..load.batch_loader import BatchLoader
from . import BenchResult

RESIZE, CROP = 256, 224  # the tutorial's sizes: train stores 256 x 256 and crops 224 per epoch
SPLITS = ("train", "val")
# the tutorial's own CPU figures (seed 004; its hardware, batch 8, 4 workers), shown beside ours
TUTORIAL_IPS = {("train", "DataLoader + ImageFolder"): 1017, ("train", "memmap, one process"): 1646,
                ("val", "DataLoader + ImageFolder"): 669, ("val", "memmap, one process"): 20452}


def sample_transform(split: str) -> Any:
    """Return the per-sample pipeline of `split` (decode-side, for DataLoader + ImageFolder)."""
    return T.TrainSampleTransform(RESIZE, CROP) if split == "train" else T.ValSampleTransform(RESIZE, CROP)


class BatchTransform:
    """Turn a batch of stored uint8 images into the model's normalised float batch (train: crop + flip first).

    A module-level class, so that DataLoader workers can use it as `collate_fn` under any start method.
    Explained in notebooks/09_precompute_memmap.ipynb.
    """

    def __init__(self, split: str, device: torch.device | str = "cpu") -> None:
        self.train, self.device = split == "train", torch.device(device)

    def __call__(self, batch: memmap.ImageData | dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = (batch["images"], batch["labels"]) if isinstance(batch, dict) else (batch.images, batch.labels)
        images, labels = images.to(self.device), labels.to(self.device)
        if self.train:
            images = T.random_crop(images, CROP, hflip_p=0.5)
        return T.normalize(images), labels


@dataclass
class Prepared:
    """The image folder and its memmaps, ready to load."""

    folder: Path
    train: memmap.ImageData
    val: memmap.ImageData


def prepare(backend: str = "tensordict", num_workers: int = 2) -> Prepared:
    """Return the default synthetic ImageFolder and its train/val memmaps, writing what is missing."""
    folder = synthetic_imagefolder()
    data = {}
    for split in SPLITS:
        tf = sample_transform(split)
        key = {"source": str(folder / split), "resize": RESIZE, "crop": CROP, "split": split}
        root = config.data_dir() / f"memmap-{folder.name}" / f"{split}-{backend}"
        data[split] = memmap.precompute(ImageFolder(folder / split, transform=tf.precompute), root, backend,
                                        key=key, num_workers=num_workers, desc=f"precompute {split}")
    return Prepared(folder, data["train"], data["val"])


def dataloader(folder: Path, split: str, batch_size: int, num_workers: int) -> DataLoader:
    """Return the baseline: DataLoader over ImageFolder with per-sample decoding and transforms."""
    ds = ImageFolder(folder / split, transform=sample_transform(split))
    return DataLoader(ds, batch_size=batch_size, shuffle=split == "train", num_workers=num_workers,
                      persistent_workers=num_workers > 0)


def memmap_loader(data: memmap.ImageData, split: str, batch_size: int, num_workers: int = 0,
                  num_threads: int = 1) -> Any:
    """Return a loader of normalised batches from a memmap: BatchLoader in-process, DataLoader with workers.

    `num_threads` > 1 transforms several batches at once in threads of this process (numpy releases the GIL),
    in order; the random crops then depend on which thread draws first.
    """
    if num_workers == 0:
        # the tensorclass's fields as a dict: BatchLoader gathers them with np.take, or yields views in order
        fields = {"images": data.images, "labels": data.labels}
        loader = BatchLoader(fields, batch_size, shuffle=split == "train", seed=0)
        return _Transformed(loader, BatchTransform(split), num_threads)
    # each worker gathers a whole batch with one __getitems__ call and transforms it (collate_fn)
    return DataLoader(memmap.MemmapDataset(data), batch_size=batch_size, shuffle=split == "train", num_workers=num_workers,
                      collate_fn=BatchTransform(split), persistent_workers=True)


class _Transformed:
    """Apply a batch transform to every batch of a loader, in this thread or in a few threads, in order."""

    def __init__(self, loader: Any, transform: Any, num_threads: int = 1) -> None:
        self.loader, self.transform, self.num_threads = loader, transform, num_threads

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        if self.num_threads <= 1:
            yield from (self.transform(batch) for batch in self.loader)
            return
        with ThreadPoolExecutor(self.num_threads) as pool:
            pending: deque[Future] = deque()
            for batch in self.loader:
                pending.append(pool.submit(self.transform, batch))
                if len(pending) >= 2 * self.num_threads:  # bounded look-ahead: memory stays at a few batches
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()


def images_per_second(loader: Any, repeat: int, warmup: int = 1) -> float:
    """Return images per second over whole epochs (median of `repeat` after `warmup` untimed epochs)."""
    counted = []

    def epoch() -> None:
        n = 0
        for images, _ in loader:
            n += len(images)
        counted.append(n)

    seconds = measure.measure(epoch, repeat=repeat, warmup=warmup)
    return counted[-1] / float(np.median(seconds))


def sweep(prep: Prepared, split: str, workers: list[int], batch_size: int, repeat: int) -> list[dict[str, Any]]:
    """Measure every loader configuration of `split`; return one row each."""
    rows = []
    configs = [("DataLoader + ImageFolder", w) for w in workers]
    configs += [("memmap, one process", 0)] + [("memmap + threads", w) for w in workers if w > 1]
    configs += [("memmap + DataLoader workers", w) for w in workers if w > 0]
    for pipeline, w in measure.progress(configs, desc=f"{split} loaders"):
        with warnings.catch_warnings():  # more workers than cores is part of the sweep, not a mistake here
            warnings.filterwarnings("ignore", message=".*worker processes in total.*")
            if pipeline.startswith("DataLoader"):
                loader = dataloader(prep.folder, split, batch_size, w)
            elif pipeline == "memmap + threads":
                loader = memmap_loader(getattr(prep, split), split, batch_size, num_threads=w)
            else:
                loader = memmap_loader(getattr(prep, split), split, batch_size, w)
            ips = images_per_second(loader, repeat)
        del loader  # stop persistent workers before the next configuration
        rows.append({"split": split, "pipeline": pipeline, "num_workers": w if "threads" not in pipeline else 0,
                     "num_threads": w if "threads" in pipeline else 1, "batch_size": batch_size,
                     "images_per_s": ips, "tutorial_images_per_s": TUTORIAL_IPS.get((split, pipeline))})
    return rows


def speedups(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Return best memmap over best DataLoader images/s for each split in `rows`, and the best rates."""
    figures = {}
    for split in [s for s in SPLITS if any(r["split"] == s for r in rows)]:
        part = [r for r in rows if r["split"] == split]
        base = max(r["images_per_s"] for r in part if r["pipeline"].startswith("DataLoader"))
        best = max(r["images_per_s"] for r in part if r["pipeline"].startswith("memmap"))
        figures.update({f"memmap_{split}_speedup": best / base, f"dataloader_{split}_images_per_s": base,
                        f"memmap_{split}_images_per_s": best})
    return figures


def run() -> BenchResult:
    """Measure both pipelines, train and val, over the scale's workers; figures are best-over-best ratios."""
    s = config.sizes("imagefolder")
    workers = list(s["workers"])
    prep = prepare()
    rows = [row for split in SPLITS for row in sweep(prep, split, workers, s["batch_size"], s["repeat"])]
    knobs = {"batch_size": s["batch_size"], "workers": workers, "train": s["train"], "val": s["val"],
             "px": s["px"], "resize": RESIZE, "crop": CROP, "torch_threads": torch.get_num_threads()}
    return BenchResult(rows, speedups(rows), knobs=knobs, repeats=s["repeat"])
