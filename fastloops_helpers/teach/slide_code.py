"""The slides' own code, kept to be compared with the helpers: the four opening loops (pure Python, DataLoader,
tf.data, numpy) and the loop over a loader, the custom FastDataloader, the slide's `move_to` (fixed) and its
nested `xs`.

Teaching replicas: the production versions are `load.BatchLoader` and `load.move.move_to`. Each object's source
is a `#@save` cell (the loops: notebook 01; FastDataloader: notebook 03; `slide_xs`, `slide_move_to`: notebook 06);
those notebooks time their cells' objects, and the benchmarks time these. Explained in
notebooks/01_the_question.ipynb, 03_custom_loader.ipynb and 06_device_moves.ipynb.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader


def python_epoch(n: int, batch_size: int) -> Callable[[], int]:
    """Return one epoch of the slide's pure-Python loop (`random.sample` of a list, then slices); it counts batches."""
    dataset = list(range(n))

    def epoch() -> int:
        batches = 0
        order = random.sample(dataset, k=len(dataset))
        for start in range(0, len(order), batch_size):
            order[start : start + batch_size]
            batches += 1
        return batches

    return epoch


def slide_dataloader(n: int, batch_size: int, num_workers: int) -> DataLoader:
    """Return the slide's DataLoader over `torch.arange(n)`; with workers, prefetch_factor=16 and persistent."""
    extra = dict(prefetch_factor=16, persistent_workers=True) if num_workers else {}
    return DataLoader(
        torch.arange(n),  # type: ignore[arg-type]  # as on the slide: a tensor is a map-style dataset (len, getitem)
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
        **extra,  # type: ignore[arg-type]  # mypy infers dict[str, int] for {int, bool}; kept as notebook 01 shows it
    )


def tf_data_pipeline(n: int, batch_size: int) -> Any:
    """Return the slide's tf.data pipeline (shuffle buffer of n, batch, prefetch), or None without TensorFlow."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    dataset = tf.data.Dataset.range(n)
    return (
        dataset.shuffle(buffer_size=dataset.cardinality(), reshuffle_each_iteration=True)
        .batch(batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )


def numpy_epoch(n: int, batch_size: int, seed: int = 0) -> Callable[[], int]:
    """Return one epoch of the slide's numpy loop (`permutation`, `reshape(-1, batch_size)`); it counts batches."""
    dataset, rng = np.arange(n), np.random.default_rng(seed)

    def epoch() -> int:
        batches = 0
        for _ in rng.permutation(dataset).reshape(-1, batch_size):
            batches += 1
        return batches

    return epoch


def loader_epoch(loader: Any) -> Callable[[], int]:
    """Return one epoch of the slide's loop over a loader (`for batch in loader`); it counts batches."""

    def epoch() -> int:
        batches = 0
        for _ in loader:
            batches += 1
        return batches

    return epoch


class FastDataloader:
    """The slide's custom loader: one permutation per epoch, then `data[indices]` for each slice of it.

    Written as on the slide (iterator protocol, no type hints). Explained in notebooks/03_custom_loader.ipynb.
    """

    def __init__(self, dataset, batch_size, shuffle=True):
        self.data, self.batch_size, self.shuffle = dataset, batch_size, shuffle

    def __iter__(self):
        n = len(self.data)
        self.order = torch.randperm(n) if self.shuffle else torch.arange(n)
        self.cursor = 0
        return self

    def __next__(self):
        if self.cursor >= len(self.data):
            raise StopIteration
        batch = self.order[self.cursor : self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return self.data[batch]


def slide_move_to(obj: Any, device: torch.device | str) -> Any:
    """Move tensors in dicts, lists and tuples to `device`: the slide's function, fixed (reference for 06).

    Explained in notebooks/06_device_moves.ipynb.
    """
    if torch.is_tensor(obj):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: slide_move_to(v, device) for k, v in obj.items()}
    if isinstance(obj, list):
        return [slide_move_to(v, device) for v in obj]
    if isinstance(obj, tuple):
        return tuple(slide_move_to(v, device) for v in obj)
    raise TypeError(f"slide_move_to cannot move a {type(obj).__name__}: only tensors, dicts, lists and tuples")


def slide_xs(side: int = 224, seed: int = 0) -> dict[str, Any]:
    """Return the slide's nested `xs` (images of `side` x `side`), seeded.

    Explained in notebooks/06_device_moves.ipynb.
    """
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    return {
        "im": {"label": rand(1, side, side), "image": rand(3, side, side)},
        "cim": rand(3, side, side),
        "pim": [rand(3, side, side), rand(3, side, side)],
    }
