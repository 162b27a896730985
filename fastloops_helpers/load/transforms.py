"""Batched, vectorised image transforms (normalise, random crop and flip, center crop, resize), CPU or GPU.

Every batched function takes a (N, C, H, W) batch or one (C, H, W) image, uint8 or float, on any device, and
draws the random offsets and flips of the whole batch in one call; on a GPU a batch then costs a few kernels.
The per-sample pipelines at the end are the DataLoader baseline (no torchvision needed): they transform one
decoded PIL image at a time with the same arithmetic, so both sides produce the same batches.
Explained in notebooks/09_precompute_memmap.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor, nn

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_NUMPY_OK = (torch.uint8, torch.float32, torch.float64)


def check_image(x: Tensor) -> None:
    """Raise a ValueError naming the shape unless `x` is a (C, H, W) image or an (N, C, H, W) batch."""
    if x.dim() not in (3, 4):
        raise ValueError(f"expected a (C, H, W) image or an (N, C, H, W) batch, got shape {tuple(x.shape)}")


# -------------------------------------------------------------------------------------------- normalise
def normalize(
    x: Tensor,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Return (x / 255 - mean) / std for uint8 input, (x - mean) / std for float input, as `dtype`.

    One multiply-add per pixel (the tutorial's InvAffine with loc = 255 mean, scale = 255 std), so it also
    replaces ToTensor's division by 255. Explained in notebooks/09_precompute_memmap.ipynb.
    """
    check_image(x)
    if len(mean) != x.shape[-3] or len(std) != x.shape[-3]:
        raise ValueError(f"mean and std need one value per channel ({x.shape[-3]}), got {len(mean)} and {len(std)}")
    mul, add = _affine(mean, std, 255.0 if x.dtype == torch.uint8 else 1.0, dtype, x.device)
    if x.device.type == "cpu" and dtype in (torch.float32, torch.float64) and x.dtype in _NUMPY_OK:
        # numpy: a pass that converts and scales, then a shift in place; it beat torch's convert + mul_ + add_
        # on one thread and did not stall like torch's threads on a busy machine (it releases the GIL, too)
        src, m, a = x.detach().numpy(), mul.numpy(), add.numpy()
        out = np.empty(src.shape, dtype=m.dtype)
        for dst, img in zip(out.reshape(-1, *src.shape[-3:]), src.reshape(-1, *src.shape[-3:])):
            _scale_shift(img, m, a, dst)
        return torch.from_numpy(out)
    return x.to(dtype, copy=True).mul_(mul).add_(add)  # copy=True: never scale a float input in place


def _affine(
    mean: Sequence[float], std: Sequence[float], unit: float, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    # x * mul + add == (x / unit - mean) / std, computed in float64 once, then cast
    m, s = torch.tensor(mean, dtype=torch.float64), torch.tensor(std, dtype=torch.float64)
    mul = (1.0 / (unit * s)).to(dtype=dtype, device=device).view(-1, 1, 1)
    return mul, (-m / s).to(dtype=dtype, device=device).view(-1, 1, 1)


def _scale_shift(img: np.ndarray, mul: np.ndarray, add: np.ndarray, dst: np.ndarray) -> None:
    np.multiply(img, mul, out=dst)  # image by image: the shift below then finds `dst` still in cache
    dst += add


class Normalize(nn.Module):
    """Normalise a batch with per-channel mean and std (see `normalize`).

    Explained in notebooks/09_precompute_memmap.ipynb.
    """

    def __init__(
        self,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.mean, self.std, self.dtype = tuple(mean), tuple(std), dtype

    def forward(self, x: Tensor) -> Tensor:
        return normalize(x, self.mean, self.std, self.dtype)


# ------------------------------------------------------------------------------------ random crop, flip
def crop_offsets(
    n: int, height: int, width: int, size: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Draw one (top, left) offset per sample for `size` x `size` crops of a `height` x `width` image."""
    if size > height or size > width:
        raise ValueError(f"crop size {size} is larger than the image ({height} x {width}): resize first")
    tops = torch.randint(height - size + 1, (n,), generator=generator)
    lefts = torch.randint(width - size + 1, (n,), generator=generator)
    return tops, lefts


def crop(x: Tensor, tops: Tensor, lefts: Tensor, size: int, flips: Tensor | None = None) -> Tensor:
    """Cut a `size` x `size` window at a different (top, left) per sample, mirrored where `flips` is True.

    On a GPU: two gathers with broadcast (never materialised) indices, rows then columns, where a flip only
    reverses the column index; one kernel each, whatever the batch size. On a CPU, N strided copies of the
    windows into one output are several times faster than a gather (measured in the notebook), and the
    offsets are still drawn in one call. Explained in notebooks/09_precompute_memmap.ipynb.
    """
    check_image(x)
    single = x.dim() == 3
    x = x.unsqueeze(0) if single else x
    flips = flips if flips is not None else torch.zeros(len(x), dtype=torch.bool)
    out = (
        _crop_copy(x, tops, lefts, size, flips) if x.device.type == "cpu" else _crop_gather(x, tops, lefts, size, flips)
    )
    return out[0] if single else out


def _crop_copy(x: Tensor, tops: Tensor, lefts: Tensor, size: int, flips: Tensor) -> Tensor:
    # numpy copies run on one thread: torch's threaded small copies stall on a busy machine
    src = x.numpy()
    out = np.empty((len(x), x.shape[1], size, size), dtype=src.dtype)
    for i, (top, left, flip) in enumerate(zip(tops.tolist(), lefts.tolist(), flips.tolist())):
        window = src[i, :, top : top + size, left : left + size]
        out[i] = window[..., ::-1] if flip else window
    return torch.from_numpy(out)


def _crop_gather(x: Tensor, tops: Tensor, lefts: Tensor, size: int, flips: Tensor) -> Tensor:
    n, c, _, w = x.shape
    ar = torch.arange(size, device=x.device)
    rows = tops.to(x.device)[:, None] + ar
    cols = lefts.to(x.device)[:, None] + ar
    cols = torch.where(flips.to(x.device)[:, None], cols.flip(-1), cols)
    out = x.gather(2, rows[:, None, :, None].expand(n, c, size, w))
    return out.gather(3, cols[:, None, None, :].expand(n, c, size, size))


def random_crop(x: Tensor, size: int, hflip_p: float = 0.0, generator: torch.Generator | None = None) -> Tensor:
    """Crop each sample at its own random offset and mirror it with probability `hflip_p`.

    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    check_image(x)
    n = 1 if x.dim() == 3 else x.shape[0]
    tops, lefts = crop_offsets(n, x.shape[-2], x.shape[-1], size, generator)
    flips = torch.rand(n, generator=generator) < hflip_p if hflip_p > 0 else None
    return crop(x, tops, lefts, size, flips)


def random_hflip(x: Tensor, p: float = 0.5, generator: torch.Generator | None = None) -> Tensor:
    """Mirror each sample left-right with probability `p`, independently per sample."""
    check_image(x)
    n = 1 if x.dim() == 3 else x.shape[0]
    flips = (torch.rand(n, generator=generator) < p).to(x.device)
    return torch.where(flips.view(-1, 1, 1, 1) if x.dim() == 4 else flips.view(1, 1, 1), x.flip(-1), x)


class RandomCrop(nn.Module):
    """Random `size` x `size` crop per sample, optionally fused with a random horizontal flip.

    Explained in notebooks/09_precompute_memmap.ipynb.
    """

    def __init__(self, size: int, hflip_p: float = 0.0, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.size, self.hflip_p, self.generator = size, hflip_p, generator

    def forward(self, x: Tensor) -> Tensor:
        return random_crop(x, self.size, self.hflip_p, self.generator)


class RandomHFlip(nn.Module):
    """Mirror each sample left-right with probability `p`."""

    def __init__(self, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.p, self.generator = p, generator

    def forward(self, x: Tensor) -> Tensor:
        return random_hflip(x, self.p, self.generator)


# ------------------------------------------------- the image pipeline's batched transform, fused and threaded
_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(num_threads: int) -> ThreadPoolExecutor:
    # one pool per size, shared by every transform of this process (never pickled into DataLoader workers)
    if num_threads not in _POOLS:
        _POOLS[num_threads] = ThreadPoolExecutor(num_threads, thread_name_prefix="fastloops-transform")
    return _POOLS[num_threads]


class CropFlipNormalize(nn.Module):
    """Random crop + random flip + normalise a uint8 batch in one pass per image, over `num_threads` threads.

    `crop=None` only normalises (val). The offsets and flips of the whole batch are drawn in one call, in the
    order `random_crop` draws them, so the output equals `normalize(random_crop(x, crop, hflip_p))` for the
    same generator. On a CPU each image's window is scaled straight into the float output (no uint8 crop in
    between), and the batch is split over threads (numpy releases the GIL); on a GPU it is the two gathers of
    `crop` and one `normalize`. Explained in notebooks/09_precompute_memmap.ipynb.
    """

    def __init__(
        self,
        crop: int | None = None,
        hflip_p: float = 0.0,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        num_threads: int = 1,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        self.crop, self.hflip_p, self.mean, self.std = crop, hflip_p, tuple(mean), tuple(std)
        self.num_threads, self.generator = num_threads, generator

    def forward(self, x: Tensor) -> Tensor:
        check_image(x)
        if x.dim() == 3:
            return self.forward(x.unsqueeze(0))[0]
        n, _, h, w = x.shape
        size = self.crop if self.crop is not None else None
        tops, lefts = crop_offsets(n, h, w, size, self.generator) if size else (torch.zeros(n, dtype=torch.long),) * 2
        flips = (
            torch.rand(n, generator=self.generator) < self.hflip_p
            if self.hflip_p > 0
            else torch.zeros(n, dtype=torch.bool)
        )
        if x.device.type != "cpu" or x.dtype not in _NUMPY_OK:
            cropped = (
                crop(x, tops, lefts, size, flips)
                if size
                else torch.where(flips.to(x.device).view(-1, 1, 1, 1), x.flip(-1), x)
            )
            return normalize(cropped, self.mean, self.std)
        return self._numpy(x, tops.tolist(), lefts.tolist(), flips.tolist(), size or h, size or w)

    def _numpy(self, x: Tensor, tops: list, lefts: list, flips: list, sh: int, sw: int) -> Tensor:
        mul, add = _affine(self.mean, self.std, 255.0 if x.dtype == torch.uint8 else 1.0, torch.float32, x.device)
        src, m, a = x.numpy(), mul.numpy(), add.numpy()
        out = np.empty((len(src), src.shape[1], sh, sw), dtype=np.float32)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                window = src[i, :, tops[i] : tops[i] + sh, lefts[i] : lefts[i] + sw]
                _scale_shift(window[..., ::-1] if flips[i] else window, m, a, out[i])

        bounds = np.linspace(0, len(src), min(self.num_threads, len(src)) + 1).astype(int).tolist()
        if len(bounds) <= 2:
            work(0, len(src))
        else:
            list(_pool(self.num_threads).map(work, bounds[:-1], bounds[1:]))
        return torch.from_numpy(out)


class OnImages(nn.Module):
    """Apply a batched image transform to a batch's images and return `(images, labels)`.

    Takes what the loaders yield: a dict or object with `images` and `labels` (a memmap's ImageData), or an
    `(images, labels)` pair. A module-level class, so DataLoader workers can use it as `collate_fn` under any
    start method. Explained in notebooks/09_precompute_memmap.ipynb.
    """

    def __init__(self, transform: Callable[[Tensor], Tensor]) -> None:
        super().__init__()
        self.transform = transform

    def forward(self, batch: Any) -> tuple[Tensor, Tensor]:
        if isinstance(batch, Mapping):
            images, labels = batch["images"], batch["labels"]
        elif isinstance(batch, (tuple, list)):
            images, labels = batch
        else:
            images, labels = batch.images, batch.labels
        return self.transform(images), labels


# ------------------------------------------------------------------------------- center crop and resize
def center_crop(x: Tensor, size: int) -> Tensor:
    """Return the central `size` x `size` window (a view; rounding like torchvision's CenterCrop)."""
    check_image(x)
    h, w = x.shape[-2:]
    if size > h or size > w:
        raise ValueError(f"crop size {size} is larger than the image ({h} x {w}): resize first")
    top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
    return x[..., top : top + size, left : left + size]


def resize(x: Tensor, size: int | tuple[int, int]) -> Tensor:
    """Resize a batch (bilinear, antialiased): an int sets the shorter side, a pair sets (height, width)."""
    check_image(x)
    h, w = x.shape[-2:]
    hw = _target_size(h, w, size)
    batch = x if x.dim() == 4 else x.unsqueeze(0)
    out = F.interpolate(batch.float(), size=hw, mode="bilinear", antialias=True, align_corners=False)
    if x.dtype == torch.uint8:
        out = out.round_().clamp_(0, 255).to(torch.uint8)
    return out if x.dim() == 4 else out[0]


def _target_size(h: int, w: int, size: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(size, int):
        return (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    return int(size[0]), int(size[1])


# ------------------------------------------------- per-sample pipelines: the DataLoader + ImageFolder side
def pil_resize(img: Image.Image, size: int | tuple[int, int]) -> Image.Image:
    """Resize a PIL image (bilinear, antialiased): an int sets the shorter side, a pair (height, width)."""
    h, w = _target_size(img.height, img.width, size)
    return img.resize((w, h), Image.Resampling.BILINEAR)


def to_tensor(img: Image.Image) -> Tensor:
    """Return a PIL RGB image as a (C, H, W) uint8 tensor (torchvision's PILToTensor, without torchvision)."""
    return torch.from_numpy(np.array(img, dtype=np.uint8, copy=True)).permute(2, 0, 1)


class TrainSampleTransform:
    """One PIL image -> resize to (resize, resize), random crop, random flip, normalise (float CHW)."""

    def __init__(
        self,
        resize: int = 256,
        crop: int = 224,
        hflip_p: float = 0.5,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ) -> None:
        self.resize, self.crop, self.hflip_p, self.mean, self.std = resize, crop, hflip_p, mean, std

    def __call__(self, img: Image.Image) -> Tensor:
        return self.per_epoch(self.precompute(img))

    def precompute(self, img: Image.Image) -> Tensor:
        """Return the deterministic part (resize to a fixed square) as uint8: what a memmap can store."""
        return to_tensor(pil_resize(img, (self.resize, self.resize)))

    def per_epoch(self, x: Tensor) -> Tensor:
        """Return the part that every epoch redoes on the precomputed uint8 image: random crop and flip, normalise."""
        return normalize(random_crop(x, self.crop, self.hflip_p), self.mean, self.std)


class ValSampleTransform:
    """One PIL image -> resize the shorter side, center crop, normalise (float CHW)."""

    def __init__(
        self,
        resize: int = 256,
        crop: int = 224,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ) -> None:
        self.resize, self.crop, self.mean, self.std = resize, crop, mean, std

    def __call__(self, img: Image.Image) -> Tensor:
        return self.per_epoch(self.precompute(img))

    def precompute(self, img: Image.Image) -> Tensor:
        """Return the deterministic part (resize + center crop) as uint8: what a memmap can store."""
        return center_crop(to_tensor(pil_resize(img, self.resize)), self.crop)

    def per_epoch(self, x: Tensor) -> Tensor:
        """Return the part that every epoch redoes on the precomputed uint8 image: normalise."""
        return normalize(x, self.mean, self.std)
