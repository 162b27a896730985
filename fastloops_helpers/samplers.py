"""Fast permutations for shuffling an index: grouped (the slide's trick) and FFCV-style quasi-random.

Explained in notebooks/04_fast_shuffle.ipynb.
"""

from __future__ import annotations

import numpy as np
import torch

VARIANTS = 16  # distinct inner shuffles shared by the groups: more is more random, costs variants * group_size draws


def _check(n: int, group_size: int) -> None:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")


def _gen_device(generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else torch.device("cpu")


def _randperm(n: int, generator: torch.Generator | None) -> torch.Tensor:
    return torch.randperm(n, generator=generator, device=_gen_device(generator))


def grouped_permutation(n: int, group_size: int, generator: torch.Generator | None = None, *,
                        device: torch.device | str | None = None, variants: int = VARIANTS) -> torch.Tensor:
    """Return a random int64 permutation of range(n) built from shuffled groups of `group_size` indices.

    The index is cut into consecutive groups; the order of the groups is shuffled, and inside every
    group the indices are reordered by one of `variants` random permutations of range(group_size),
    picked at random per group. Only about n / group_size + variants * group_size random numbers are
    drawn, against n for a full shuffle, and the rest is one gather and one add over the output, which
    run at memory speed. A last partial group (n not a multiple of `group_size`) is shuffled on its
    own and placed at a random slot among the groups. Batches drawn from the result mix at most a few
    groups, so keep `group_size` well below (dataset length / number of classes) on sorted data.
    Explained in notebooks/04_fast_shuffle.ipynb.
    """
    _check(n, group_size)
    if variants < 1:
        raise ValueError(f"variants must be >= 1, got {variants}")
    device = torch.device(device) if device is not None else _gen_device(generator)
    full, rest = divmod(n, group_size)
    out = torch.empty(n, dtype=torch.int64, device=device)
    order = _randperm(full, generator).to(device)
    slot = int(torch.randint(0, full + 1, (1,), generator=generator, device=_gen_device(generator))) if rest else full
    start = slot * group_size
    if rest:
        out[start:start + rest] = _randperm(rest, generator).to(device) + full * group_size
    if full:
        k = min(variants, full)
        table = torch.stack([_randperm(group_size, generator) for _ in range(k)]).to(device)
        pick = torch.randint(0, k, (full,), generator=generator, device=_gen_device(generator)).to(device)
        _fill_groups(out[:start], order[:slot], pick[:slot], table)
        _fill_groups(out[start + rest:], order[slot:], pick[slot:], table)
    return out


def _fill_groups(out: torch.Tensor, groups: torch.Tensor, pick: torch.Tensor, table: torch.Tensor) -> None:
    """Write group g's indices, reordered by inner shuffle table[pick], into each row of `out`."""
    if groups.numel() == 0:
        return
    group_size = table.shape[1]
    rows = out.view(groups.numel(), group_size)
    torch.index_select(table, 0, pick, out=rows)
    rows += (groups * group_size).unsqueeze(1)


def quasi_random_permutation(n: int, page_size: int, buffer_size: int,
                             generator: np.random.Generator | None = None) -> np.ndarray:
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
    pages = [start + rng.permutation(min(page_size, n - start)) for start in starts]
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


def batch_class_entropy(labels: np.ndarray | torch.Tensor, order: np.ndarray | torch.Tensor,
                        batch_size: int, num_classes: int | None = None) -> float:
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
    batched = labels[order[:num_batches * batch_size]].reshape(num_batches, batch_size)
    offsets = (np.arange(num_batches) * num_classes)[:, None]
    counts = np.bincount((batched + offsets).ravel(), minlength=num_batches * num_classes)
    p = counts.reshape(num_batches, num_classes) / batch_size
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)
    return float(h.mean())
