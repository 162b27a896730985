"""ImageFolder + DataLoader vs a precomputed memmap + batched transforms: the loaders notebooks 09, 14 and 15 share.

Notebook 09 holds the rest of its experiment (the sweep, the rounds, the stage costs) in its own cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from .. import config, measure
from ..data import memmap
from ..data.jpeg_folder import ImageFolder, synthetic_imagefolder
from ..load import transforms
from ..load.batch_loader import BatchLoader

RESIZE, CROP = 256, 224  # the tutorial's sizes: train stores 256 x 256 and crops 224 per epoch
SPLITS = ("train", "val")


def sample_transform(split: str) -> Any:
    """Return the per-sample pipeline of `split` (decode-side, for DataLoader + ImageFolder)."""
    pipeline = transforms.TrainSampleTransform if split == "train" else transforms.ValSampleTransform
    return pipeline(RESIZE, CROP)


def batch_transform(split: str, num_threads: int = 1) -> transforms.OnImages:
    """Return the batched transform of `split` for a loader: stored uint8 batch -> (normalised floats, labels).

    Train crops 224 at a random offset and flips half the images; val only normalises (its crop is stored).
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    train = split == "train"
    fused = transforms.CropFlipNormalize(CROP if train else None, 0.5 if train else 0.0, num_threads=num_threads)
    return transforms.OnImages(fused)


@dataclass
class Prepared:
    """The image folder and its memmaps, ready to load."""

    folder: Path
    train: memmap.ImageData
    val: memmap.ImageData


def prepare(folder: Path | None = None, backend: str = "tensordict", num_workers: int = 2) -> Prepared:
    """Return the ImageFolder in `folder` and its train/val memmaps, writing what is missing.

    Without a folder, the synthetic one of the active scale (`synthetic_imagefolder()`).
    """
    folder = synthetic_imagefolder() if folder is None else Path(folder)
    data = {}
    for split in SPLITS:
        tf = sample_transform(split)
        key = {"source": str(folder / split), "resize": RESIZE, "crop": CROP, "split": split}
        root = config.data_dir() / f"memmap-{folder.name}" / f"{split}-{backend}"
        data[split] = memmap.precompute(
            ImageFolder(folder / split, transform=tf.precompute),
            root,
            backend,
            key=key,
            num_workers=num_workers,
            desc=f"precompute {split}",
        )
    return Prepared(folder, data["train"], data["val"])


def dataloader(folder: Path, split: str, batch_size: int, num_workers: int) -> DataLoader:
    """Return the baseline: DataLoader over ImageFolder with per-sample decoding and transforms."""
    ds = ImageFolder(folder / split, transform=sample_transform(split))
    return DataLoader(
        ds, batch_size=batch_size, shuffle=split == "train", num_workers=num_workers, persistent_workers=num_workers > 0
    )


def memmap_loader(
    data: memmap.ImageData, split: str, batch_size: int, num_workers: int = 0, num_threads: int = 1
) -> Any:
    """Return a loader of normalised batches from a memmap: BatchLoader in-process, DataLoader with workers.

    The loader applies the batched transform to each whole batch; `num_threads` > 1 splits each batch's
    transform over threads of this process (numpy releases the GIL).
    """
    if num_workers == 0:
        # the tensorclass's fields as a dict: BatchLoader gathers them with np.take, or yields views in order
        fields = {"images": data.images, "labels": data.labels}
        return BatchLoader(
            fields, batch_size, shuffle=split == "train", seed=0, transform=batch_transform(split, num_threads)
        )
    # each worker gathers a whole batch with one __getitems__ call and transforms it (collate_fn)
    return DataLoader(
        memmap.MemmapDataset(data),
        batch_size=batch_size,
        shuffle=split == "train",
        num_workers=num_workers,
        collate_fn=batch_transform(split),
        persistent_workers=True,
    )


def batch_images(batch: Any) -> int:
    """Return how many images a loader's batch holds: an (images, labels) pair or a tensorclass batch."""
    return len(batch[0]) if isinstance(batch, (tuple, list)) else len(batch)


def images_per_second(loader: Any, repeat: int, warmup: int = 1) -> dict[str, float]:
    """Time whole epochs of `loader`; return images/s from the median epoch and the epoch's median and p95 s.

    The one definition of images/s in the project's image experiments.
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    counted = []

    def epoch() -> None:
        counted.append(sum(batch_images(batch) for batch in loader))

    seconds = measure.measure(epoch, repeat=repeat, warmup=warmup)
    return {
        "images_per_s": counted[-1] / measure.median(seconds),
        "epoch_s": measure.median(seconds),
        "epoch_s_p95": measure.p95(seconds),
    }
