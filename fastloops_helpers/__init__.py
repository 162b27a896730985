"""Loaders, samplers, prefetchers and measurement tools behind the fastloops notebooks.

The public API: what an engineer takes into a real training loop. Everything else lives in the packages by
pipeline stage (`data`, `load`), the measurement harness (`measure`), the slides' replicas (`teach`) and the
notebooks' experiments (`experiments`).
"""

from . import measure
from .data.memmap import load_memmap, write_memmap
from .load.batch_loader import BatchLoader
from .load.move import move_to
from .load.prefetch import CUDAPrefetcher, ThreadPrefetcher
from .load.transforms import Normalize, RandomCrop, RandomHFlip, center_crop, normalize, random_crop, random_hflip, resize
from .measure.input_bound import Diagnosis, diagnose
from .load.thread_loader import ThreadLoader

__version__ = "0.2.0"

__all__ = ["BatchLoader", "CUDAPrefetcher", "ThreadPrefetcher", "move_to", "write_memmap", "load_memmap", "measure",
           "Normalize", "RandomCrop", "RandomHFlip", "center_crop", "normalize", "random_crop", "random_hflip", "resize"]
__all__ += ["diagnose", "Diagnosis"]
__all__ += ["ThreadLoader"]
