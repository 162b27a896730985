"""The slides' own code, kept to be compared with the helpers: the FastDataloader, the pure-Python and numpy
loops, the slide's `move_to` (fixed) and its nested `xs`.

Teaching replicas: the production versions are `load.BatchLoader` and `load.devices.move_to`.
Explained in notebooks/01_the_question.ipynb, 03_custom_loader.ipynb and 06_device_moves.ipynb.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch


class SlideLoader:
    """The slide's FastDataloader: one `randperm` per epoch, then `data[indices]` for each slice of it.

    Explained in notebooks/03_custom_loader.ipynb.
    """

    def __init__(self, dataset: Any, batch_size: int, shuffle: bool = True) -> None:
        self.data, self.batch_size, self.shuffle = dataset, batch_size, shuffle

    def __iter__(self) -> Iterator[Any]:
        n = len(self.data)
        order = torch.randperm(n) if self.shuffle else torch.arange(n)
        for start in range(0, n, self.batch_size):
            yield self.data[order[start:start + self.batch_size]]


def python_epoch(n: int, batch_size: int) -> Callable[[], None]:
    """Return one epoch of the slide's pure-Python loop: `random.sample` of a list, then slices."""
    dataset = list(range(n))

    def epoch() -> None:
        order = random.sample(dataset, k=len(dataset))
        for start in range(0, len(order), batch_size):
            order[start:start + batch_size]
    return epoch


def numpy_epoch(n: int, batch_size: int, seed: int = 0) -> Callable[[], None]:
    """Return one epoch of the slide's numpy loop: `permutation`, `reshape(-1, batch_size)`, iterate rows."""
    dataset, rng = np.arange(n), np.random.default_rng(seed)

    def epoch() -> None:
        for _ in rng.permutation(dataset).reshape(-1, batch_size):
            pass
    return epoch


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
    return {"im": {"label": rand(1, side, side), "image": rand(3, side, side)},
            "cim": rand(3, side, side), "pim": [rand(3, side, side), rand(3, side, side)]}
