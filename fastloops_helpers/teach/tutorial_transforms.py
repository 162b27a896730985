"""The tensordict tutorial's batched transforms, tensorclass and collate (seed 004), rebuilt to be timed.

The tutorial normalises with an affine module (`InvAffine`: subtract a location, divide by a scale), crops
every image of a batch at its own offset with two `gather` calls on expanded index tensors, and flips a random
half of the batch by adding two `masked_fill`ed copies, one of them mirrored. These are our implementations of
that approach (the same operations in the same order), applied in the tutorial's order: normalise the uint8
batch to float first, then crop and flip the float batch. The helpers' `CropFlipNormalize` does the same work
in one pass per image.

Its data set is a tensorclass (`ImageNetData`) filled once from a Dataset into memory-mapped tensors, and its
loader is a DataLoader over that tensorclass: each batch is gathered with one tensorclass indexing call and handed
to `Collate`, an `nn.Module` that moves the batch to the device and applies the batched transform. The helpers'
equivalents are `data.memmap` (ImageData, write_memmap, MemmapDataset) and `BatchLoader`.
Explained in notebooks/09_precompute_memmap.ipynb.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import MemoryMappedTensor, tensorclass
from torch import Tensor, nn
from torch.utils.data import DataLoader

from ..load.transforms import IMAGENET_MEAN, IMAGENET_STD


def inv_affine(x: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
    """Return (x - loc) / scale: two full passes over the batch, the second over floats."""
    return (x - loc) / scale


def gather_crop(x: Tensor, tops: Tensor, lefts: Tensor, height: int, width: int) -> Tensor:
    """Crop each image at (top, left) with a gather over rows, then one over columns (index tensors expanded)."""
    n, c, _, w = x.shape
    rows = (tops.view(n, 1) + torch.arange(height, device=x.device)).view(n, 1, height, 1).expand(n, c, height, w)
    cols = (lefts.view(n, 1) + torch.arange(width, device=x.device)).view(n, 1, 1, width).expand(n, c, height, width)
    return x.gather(-2, rows).gather(-1, cols)


def masked_fill_flip(x: Tensor, flips: Tensor) -> Tensor:
    """Mirror the images where `flips` is True: keep the others, add a mirrored copy of the flipped ones."""
    mask = flips.view(-1, 1, 1, 1).expand_as(x)
    return x.masked_fill(mask, 0) + x.masked_fill(~mask, 0).flip(-1)


class InvAffine(nn.Module):
    """The tutorial's normaliser: (x - 255 mean) / (255 std) for uint8 input."""

    def __init__(self, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD) -> None:
        super().__init__()
        self.register_buffer("loc", torch.tensor(mean).view(-1, 1, 1) * 255)
        self.register_buffer("scale", torch.tensor(std).view(-1, 1, 1) * 255)

    def forward(self, x: Tensor) -> Tensor:
        return inv_affine(x, self.loc, self.scale)  # type: ignore[arg-type]


class GatherRandomCrop(nn.Module):
    """The tutorial's crop: offsets drawn in [0, H - height) (the last offset is never drawn), two gathers."""

    def __init__(self, height: int, width: int, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.height, self.width, self.generator = height, width, generator

    def forward(self, x: Tensor) -> Tensor:
        n, h, w = x.shape[0], x.shape[-2], x.shape[-1]
        tops = torch.randint(h - self.height, (n,), generator=self.generator).to(x.device)
        lefts = torch.randint(w - self.width, (n,), generator=self.generator).to(x.device)
        return gather_crop(x, tops, lefts, self.height, self.width)


class MaskedFillHFlip(nn.Module):
    """The tutorial's flip: a Bernoulli(1/2) draw per image, applied with two masked_fills and one flip."""

    def __init__(self, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.generator = generator

    def forward(self, x: Tensor) -> Tensor:
        flips = torch.rand(x.shape[0], generator=self.generator) < 0.5
        return masked_fill_flip(x, flips.to(x.device))


def tutorial_train_transform(crop: int, generator: torch.Generator | None = None) -> nn.Sequential:
    """Return the tutorial's train transform: normalise, then random crop, then random flip."""
    return nn.Sequential(InvAffine(), GatherRandomCrop(crop, crop, generator), MaskedFillHFlip(generator))


@tensorclass
class ImageNetData:
    """The tutorial's tensorclass: uint8 images (N, C, H, W) and int64 targets (N,), indexable like a Dataset."""

    images: Tensor
    targets: Tensor

    @classmethod
    def from_dataset(cls, dataset: Any, prefix: str | None = None, batch_size: int = 64, num_workers: int = 0) -> Any:
        """Decode every (uint8 image, target) of `dataset` once into memory-mapped tensors; return them.

        With `prefix` the tensors are files in that folder; without (the tutorial) they live in shared memory.
        """
        n, shape = len(dataset), dataset[0][0].squeeze().shape
        data = cls(  # type: ignore[call-arg]
            images=MemoryMappedTensor.empty((n, *shape), dtype=torch.uint8),
            targets=MemoryMappedTensor.empty((n,), dtype=torch.int64),
            batch_size=[n],
        )
        data.memmap_(prefix)  # type: ignore[attr-defined]  # locks it: every write below goes to the memory map
        i = 0
        for image, target in DataLoader(dataset, batch_size=batch_size, num_workers=num_workers):
            data[i : i + len(image)] = cls(images=image, targets=target, batch_size=[len(image)])  # type: ignore[call-arg, index]
            i += len(image)
        return data


class Collate(nn.Module):
    """The tutorial's `collate_fn`: move the batch the tensorclass gathered to `device`, transform its images."""

    def __init__(self, transform: nn.Module | None = None, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.transform = transform
        self.device = torch.device(device) if device is not None else None

    def __call__(self, x: ImageNetData) -> ImageNetData:
        out = x.pin_memory() if self.device is not None and self.device.type == "cuda" else x  # type: ignore[attr-defined]
        if self.device is not None:
            out = out.to(self.device)  # type: ignore[union-attr]
        if self.transform is not None:
            out.images = self.transform(out.images)
        return out
