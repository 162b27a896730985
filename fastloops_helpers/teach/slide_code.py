"""The slides' own code that more than one notebook uses: the loop over a loader and the custom FastDataloader.

Teaching replicas: the production version is `load.batch_loader.BatchLoader`. Notebooks 01 and 03 render both with
`show_code` and time these objects; the slide's four opening loops live in notebook 01's cells only (`bench loops`
executes that notebook), and the slide's `move_to` and its nested `xs` in notebook 06's. Explained in
notebooks/01_the_question.ipynb and 03_custom_loader.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


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
