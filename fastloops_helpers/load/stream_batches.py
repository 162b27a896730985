"""A stream's batches: JPEG bytes decoded on a thread pool, with timeline hooks for a source that has no
`__getitem__` to wrap.

- `decode_jpeg(data, px)`: one JPEG to a px x px RGB array, decoded at a reduced DCT scale where it can be.
- `Recorder`: events from any thread (a shard fetch, a decode), handed to the batch that follows them.
- `Batches(samples, batch_size, px, threads)`: batches of decoded images (or of raw bytes, `decode=False`).

`load.stream` re-exports all three. Explained in notebooks/16_when_data_no_longer_fits.ipynb.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any

import numpy as np
import torch

Sample = dict[str, Any]


def decode_jpeg(data: bytes, px: int) -> np.ndarray:
    """Decode JPEG bytes to a px x px RGB uint8 array (HWC): DCT-scaled decode (draft), then a resize."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        img.draft("RGB", (px, px))  # libjpeg decodes at 1/2, 1/4 or 1/8 scale when that is still >= px
        return np.array(img.convert("RGB").resize((px, px), Image.Resampling.BILINEAR))


class Recorder:
    """Timeline hooks for a stream: events from any thread, handed to the batch that follows them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, float, float]] = []
        self.lock = threading.Lock()

    def add(self, lane: str, stage: str, start: float, end: float) -> None:
        """Record one event."""
        with self.lock:
            self.events.append((lane, stage, start, end))

    def take(self) -> list[tuple[str, str, float, float]]:
        """Return the events recorded since the last call."""
        with self.lock:
            events, self.events = self.events, []
        return events

    def timed(self, fn: Callable[[str], Any], stage: str = "fetch") -> Callable[[str], Any]:
        """Wrap `fn` (e.g. a shard fetch) so each call is an event on its thread's lane."""
        from ..measure.clock import now

        def call(arg: str) -> Any:
            start = now()
            try:
                return fn(arg)
            finally:
                self.add(
                    threading.current_thread().name.replace("ThreadPoolExecutor-", "fetch thread "), stage, start, now()
                )

        return call


class Batches:
    """Batches of a sample source: (uint8 images N x 3 x px x px, labels), the JPEGs decoded on `threads` threads.

    `decode=False` yields (JPEG bytes per sample, labels): the reading alone. `limit` stops after that many
    samples. With a `recorder`, each batch comes as a `timeline.TimedBatch` carrying the events since the last.
    Explained in notebooks/16_when_data_no_longer_fits.ipynb.
    """

    def __init__(
        self,
        samples: Iterable[Sample],
        batch_size: int,
        px: int,
        threads: int = 1,
        decode: bool = True,
        limit: int | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.samples, self.batch_size, self.px, self.threads = samples, batch_size, px, threads
        self.decode, self.limit, self.recorder = decode, limit, recorder

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.samples) if self.limit is None else islice(self.samples, self.limit)
        with ThreadPoolExecutor(self.threads, thread_name_prefix="decode") as pool:
            while chunk := list(islice(it, self.batch_size)):
                yield self._batch(chunk, pool)

    def _batch(self, chunk: list[Sample], pool: ThreadPoolExecutor) -> Any:
        from ..measure.clock import now

        start = now()
        labels = torch.tensor([int(s["cls"]) for s in chunk])
        if self.decode:
            images = list(pool.map(lambda s: decode_jpeg(s["jpg"], self.px), chunk))
            data = (torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2), labels)
        else:
            data = (torch.tensor([len(s["jpg"]) for s in chunk]), labels)
        if self.recorder is None:
            return data
        from ..measure.timeline import TimedBatch

        return TimedBatch(data, self.recorder.take() + [("main: decode", "collate", start, now())])
