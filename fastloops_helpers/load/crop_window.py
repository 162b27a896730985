"""Resize a batch and cut its centre in one pass over the input window the crop reads (FFCV's CIFAR-10 step).

Explained in notebooks/11_ffcv_cifar.ipynb.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .transforms import check_image


class ResizeCenterCrop:
    """Resize a batch (bilinear) and cut its centre, resizing only the input window that the crop reads.

    Each bilinear output reads two neighbouring pixels per axis, so the crop's outputs need a window of the
    input. The window starts where the input and output grids meet (a multiple of side/gcd(side, resize)
    input pixels), so resizing it alone samples the same positions as the full resize. On a CPU a uint8 batch
    goes through torch's uint8 bilinear kernel, which reads channels-last: store images HWC and pass
    `x.permute(0, 3, 1, 2)` to skip a layout copy. Equals bilinear resize-then-crop (align_corners=False) up to
    rounding. The result is a channels-last view (strides N, 1, W·C, C, like FFCV's batches) into the resized
    window: `.contiguous(memory_format=torch.channels_last)` makes it dense. Explained in
    notebooks/11_ffcv_cifar.ipynb.
    """

    def __init__(self, side: int = 32, resize: int = 48, crop: int = 32) -> None:
        if not 0 < crop <= resize or side < 1:
            raise ValueError(f"need side >= 1 and 0 < crop <= resize, got side={side}, resize={resize}, crop={crop}")
        self.scale = resize / side
        top = int(round((resize - crop) / 2.0))
        self.start, first = self._window_start(side, resize, top)
        last = (top + crop - 0.5) / self.scale - 0.5  # source position of the last output kept
        self.stop = min(side, math.floor(last) + 2)
        if math.floor((self.stop - self.start) * self.scale) < top + crop - first:  # shrinking: resize it all
            self.start, first, self.stop = 0, 0, side
        self.keep = slice(top - first, top - first + crop)

    def _window_start(self, side: int, resize: int, top: int) -> tuple[int, int]:
        """Return (first input pixel, first output) of the window: grids aligned, no clamping inside the crop."""
        g = math.gcd(side, resize)
        k = top // (resize // g)
        while k > 0 and (top - k * resize // g + 0.5) / self.scale < 0.5:
            k -= 1
        return k * side // g, k * resize // g

    def __call__(self, x: Tensor) -> Tensor:
        """Return the resized, center-cropped batch (N, C, crop, crop), or image (C, crop, crop), of x's dtype."""
        check_image(x)
        window = (x if x.dim() == 4 else x[None])[..., self.start : self.stop, self.start : self.stop]
        kw = {"scale_factor": self.scale, "mode": "bilinear", "align_corners": False, "recompute_scale_factor": False}
        # mypy reads kw as dict[str, object]; an annotation would make this differ from notebook 11's cell
        if x.dtype == torch.uint8 and x.device.type == "cpu":
            out = F.interpolate(window.contiguous(memory_format=torch.channels_last), **kw)  # type: ignore[arg-type]
        else:  # GPUs have no uint8 bilinear kernel: compute in float
            out = F.interpolate(window.float(), **kw)  # type: ignore[arg-type]
            out = out.round_().clamp_(0, 255).to(x.dtype) if x.dtype == torch.uint8 else out.to(x.dtype)
        out = out[..., self.keep, self.keep]
        return out if x.dim() == 4 else out[0]
