"""The tensordict tutorial's batched transforms (seed 004), rebuilt to be timed beside the helpers' own.

The tutorial normalises with an affine module (`InvAffine`: subtract a location, divide by a scale), crops
every image of a batch at its own offset with two `gather` calls on expanded index tensors, and flips a random
half of the batch by adding two `masked_fill`ed copies, one of them mirrored. These are our implementations of
that approach (the same operations in the same order), applied in the tutorial's order: normalise the uint8
batch to float first, then crop and flip the float batch. The helpers' `CropFlipNormalize` does the same work
in one pass per image. Explained in notebooks/09_precompute_memmap.ipynb.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

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
        return inv_affine(x, self.loc, self.scale)


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
