"""Loaders, samplers, prefetchers and measurement tools behind the fastloops notebooks.

The public API: what an engineer takes into a real training loop, listed in `__all__` and documented in the API
reference (`make site`, results/site/api/). Everything else lives in the packages by pipeline stage (`data`,
`load`), the measurement harness (`measure`), the loop doctor (`doctor`), the slides' replicas (`teach`), the
notebooks' drivers (`experiments`) and the collection's own machinery (`book`), which ships in the wheel but is
not part of the API.

Experimental (its interface may change in a minor version): the streaming pieces, `serve`, `write_shards`,
`ShuffleBuffer`, `ParquetStream`, `split_shards`, `tar_samples`.
"""

from . import measure
from .data.device_decode import device_jpeg_loader
from .data.jpeg_folder import ImageFolder
from .data.memmap import load_memmap, write_memmap
from .data.shards import write_shards
from .data.store import serve
from .doctor import Diagnosis, diagnose
from .load.batch_loader import BatchLoader
from .load.crop_window import ResizeCenterCrop
from .load.getitems import BatchRowDataset, RowDataset
from .load.move import PinnedRing, move_to
from .load.prefetch import CUDAPrefetcher, ThreadPrefetcher
from .load.process_prefetch import ProcessPrefetcher
from .load.stream import ParquetStream, ShardError, ShuffleBuffer, split_shards, tar_samples
from .load.thread_loader import ThreadLoader
from .load.transforms import (
    Normalize,
    RandomCrop,
    RandomHFlip,
    center_crop,
    normalize,
    random_crop,
    random_hflip,
    resize,
)

__version__ = "0.3.0"  # the one version number: pyproject.toml reads it; CHANGELOG.md says what changed

__all__ = [
    # loaders and datasets
    "BatchLoader",
    "ThreadLoader",
    "device_jpeg_loader",
    "RowDataset",
    "BatchRowDataset",
    "ImageFolder",
    # prefetchers and device moves
    "CUDAPrefetcher",
    "ThreadPrefetcher",
    "ProcessPrefetcher",
    "move_to",
    "PinnedRing",
    # batched transforms
    "Normalize",
    "RandomCrop",
    "RandomHFlip",
    "ResizeCenterCrop",
    "center_crop",
    "normalize",
    "random_crop",
    "random_hflip",
    "resize",
    # precomputed data
    "write_memmap",
    "load_memmap",
    # measurement
    "measure",
    "diagnose",
    "Diagnosis",
    # streaming (experimental)
    "serve",
    "write_shards",
    "ShuffleBuffer",
    "ParquetStream",
    "ShardError",
    "split_shards",
    "tar_samples",
]
