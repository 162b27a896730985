"""The one thread-count guard: run a block with a given number of torch intra-op threads, then restore it.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the block with `threads` torch intra-op threads (None: as they are), then restore the count.

    Yields the count the block runs with. Whatever the block does to the count (an import that sets it, a
    loader that changes it), the count before the block is what stays after it.
    """
    before = torch.get_num_threads()
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1 (or None to keep {before}), got {threads}")
    torch.set_num_threads(threads or before)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
