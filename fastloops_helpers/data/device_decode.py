"""JPEG batches decoded where the step runs: CPU threads only read the files' bytes; one call per batch decodes
them on the device (nvJPEG on a CUDA GPU, Pillow standing in on a CPU), then each image is resized and
centre-cropped there, and the batch is stacked.

Explained in notebooks/14_threads_or_processes.ipynb and notebooks/15_is_my_loop_input_bound.ipynb.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..load import transforms
from ..load.thread_loader import ThreadLoader
from . import decoders
from .jpeg_folder import ImageFolder


def read_bytes(path: str) -> torch.Tensor:
    """Return a file's bytes as a 1-D uint8 CPU tensor, what `decode_jpeg` takes (the read releases the GIL)."""
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8))


class DecodeResizeCrop:
    """Collate (bytes, label) samples into (images, labels) on `device`: the list decoded in one call, each image's
    shorter side resized to `resize` (bilinear, antialiased: `transforms.resize`), its centre `crop` x `crop` kept.

    Images come out uint8, (batch, 3, crop, crop); labels int64, both on `device`.
    """

    def __init__(self, device: str | torch.device, resize: int = 256, crop: int = 224) -> None:
        self.device, self.resize, self.crop = torch.device(device), resize, crop
        self.decode = decoders.batch_decoder(self.device)

    def __call__(self, samples: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        blobs, labels = zip(*samples)
        images = [transforms.center_crop(transforms.resize(x, self.resize), self.crop) for x in self.decode(blobs)]
        return torch.stack(images), torch.tensor(labels, device=self.device)


def device_jpeg_loader(
    folder: str | Path, batch_size: int, device: str | torch.device, *, threads: int = 4, **sampling: Any
) -> ThreadLoader:
    """Return a ThreadLoader over the JPEGs of `folder` (one subfolder per class) whose threads read bytes and
    whose collate (`DecodeResizeCrop(device)`) decodes, resizes to 256 and crops 224 on `device`.

    `sampling` goes to ThreadLoader (shuffle, seed, drop_last, rank, world_size, prefetch): the same order, each
    sample once per epoch, as any ThreadLoader over the same folder.
    """
    dataset = ImageFolder(folder, loader=read_bytes)
    return ThreadLoader(dataset, batch_size, threads=threads, collate=DecodeResizeCrop(device), **sampling)
