"""The slide's grouped shuffle and FFCV's quasi-random order, replicated to be compared with the helpers'
grouped permutation, and a measure of batch mixing.

Teaching replicas: the production order is `load.order.grouped_permutation`. Explained in
notebooks/04_fast_shuffle.ipynb.
"""

from __future__ import annotations

import numpy as np
import torch

from ..load.order import _check


def slide_grouped_permutation(n: int, group_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """The slide's fast shuffle as it reads: shuffle the order of the groups, then the indices inside each group.

    One `randperm` per group, so it still draws n random numbers, but every shuffle stays inside a small group
    that fits in the cache. Explained in notebooks/04_fast_shuffle.ipynb.
    """
    groups = torch.arange(n).split(group_size)
    order = torch.randperm(len(groups), generator=generator).tolist()
    return torch.cat([groups[g][torch.randperm(len(groups[g]), generator=generator)] for g in order])


def quasi_random_permutation(
    n: int, page_size: int, buffer_size: int, generator: np.random.Generator | None = None
) -> np.ndarray:
    """Return FFCV's QUASI_RANDOM traversal order over `n` samples stored in pages of `page_size`.

    FFCV reads a .beton file page by page. Its quasi-random order shuffles the samples inside every
    page and the order of the pages, then keeps up to `buffer_size` pages open (FFCV uses
    2 * batch_size) and draws each next sample from an open page chosen uniformly at random, in that
    page's shuffled order; an exhausted page is closed and the next page in the shuffled page order is
    opened. Here pages are consecutive index ranges, as in a .beton written in index order. This is a
    re-implementation from the description of ffcv/traversal_order/quasi_random.py (ffcv 1.0).
    Explained in notebooks/04_fast_shuffle.ipynb.
    """
    _check(n, page_size)
    if buffer_size < 1:
        raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
    rng = generator if generator is not None else np.random.default_rng()
    starts = np.arange(0, n, page_size)
    # start is a numpy integer, which mypy cannot order against an int; min() returns an integer either way
    pages = [start + rng.permutation(min(page_size, n - start)) for start in starts]  # type: ignore[call-overload]
    page_order = list(rng.permutation(len(pages))[::-1])  # popped from the end
    picks = rng.random(n)
    open_pages: list[np.ndarray] = []
    consumed: list[int] = []
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        while page_order and len(open_pages) < buffer_size:
            open_pages.append(pages[page_order.pop()])
            consumed.append(0)
        j = int(picks[i] * len(open_pages))
        out[i] = open_pages[j][consumed[j]]
        consumed[j] += 1
        if consumed[j] == len(open_pages[j]):  # close it: move the last open page into its slot
            open_pages[j], consumed[j] = open_pages[-1], consumed[-1]
            open_pages.pop()
            consumed.pop()
    return out


def batch_class_entropy(
    labels: np.ndarray | torch.Tensor, order: np.ndarray | torch.Tensor, batch_size: int, num_classes: int | None = None
) -> float:
    """Return the mean entropy (bits) of the class mix of the full batches that `order` makes.

    A well-shuffled order gives close to log2(num_classes) when batches are large; a batch drawn from
    one class gives 0. Explained in notebooks/04_fast_shuffle.ipynb.
    """
    labels = np.asarray(labels)
    order = np.asarray(order)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    num_batches = len(order) // batch_size
    if num_batches == 0:
        raise ValueError(f"order has {len(order)} items, fewer than one batch of {batch_size}")
    num_classes = int(labels.max()) + 1 if num_classes is None else num_classes
    batched = labels[order[: num_batches * batch_size]].reshape(num_batches, batch_size)
    offsets = (np.arange(num_batches) * num_classes)[:, None]
    counts = np.bincount((batched + offsets).ravel(), minlength=num_batches * num_classes)
    p = counts.reshape(num_batches, num_classes) / batch_size
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)
    return float(h.mean())
