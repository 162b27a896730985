"""Fast collate: stack uint8 images into one uint8 batch, and leave the float conversion to the device.

NVIDIA apex's ImageNet example stops its per-sample transforms before `ToTensor`, collates the uint8 images into
one (N, C, H, W) tensor, lets DataLoader pin it, and converts and normalises the whole batch on the GPU. The batch
that crosses from the workers (and to the GPU) holds a quarter of float32's bytes. It runs in DataLoader workers
as `collate_fn`, so it lives in the package. Explained in notebooks/07_dataloader_anatomy.ipynb.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def fast_collate(batch: Sequence[tuple[Any, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Collate (HWC uint8 image, label) samples into a uint8 (N, C, H, W) batch and an int64 label tensor.

    An image is anything `np.asarray` reads as (H, W, C) or (H, W) uint8: a PIL image, a numpy array, a CPU
    tensor. Each is copied once, channels first, into the batch: no float conversion, no per-sample tensor.
    Explained in notebooks/07_dataloader_anatomy.ipynb.
    """
    if len(batch) == 0:
        raise ValueError("fast_collate needs at least one sample, got an empty batch")
    first = np.asarray(batch[0][0])
    height, width = first.shape[:2]
    channels = first.shape[2] if first.ndim == 3 else 1
    # numpy copies on one thread; the transpose is the HWC -> CHW reordering ToTensor would do per sample
    images = np.empty((len(batch), channels, height, width), dtype=np.uint8)
    for i, (image, _) in enumerate(batch):
        array = np.asarray(image, dtype=np.uint8)
        if array.size != images[i].size or array.shape[:2] != (height, width):
            raise ValueError(f"sample {i} has shape {array.shape}, sample 0 {first.shape}: resize or crop to one size")
        images[i] = array.reshape(height, width, channels).transpose(2, 0, 1)
    labels = torch.tensor([int(label) for _, label in batch], dtype=torch.int64)
    return torch.from_numpy(images), labels
