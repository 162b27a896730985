"""Precompute a data set once into memory-mapped files (numpy memmap, torch storage, tensordict), reload for free.

Every sample is decoded and given its deterministic transform (resize, center crop) once; the uint8 result and
the labels go to files that the OS pages in on demand, so later epochs read batches with one copy and no
decoding, and the process never holds the whole data set in its own memory. Every backend returns an
`ImageData` tensorclass, so the data sets need tensordict (the `trees` extra); the module imports it on first
use, and `import fastloops_helpers` works without it.
Explained in notebooks/09_precompute_memmap.ipynb.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from ..atomic import staged
from ..extras import require
from ..load import rows
from ..measure.display import progress

BACKENDS = ("numpy", "torch", "tensordict")
META = "fastloops-memmap.json"  # written last: a folder without it holds no complete data set
FILES = {
    "numpy": ("images.u8", "labels.i64"),
    "torch": ("images.u8", "labels.i64"),
    "tensordict": ("_tensordict/images.memmap", "_tensordict/labels.memmap"),
}


if TYPE_CHECKING:  # what mypy sees of the tensorclass that _image_data() builds

    class ImageData:
        images: Tensor
        labels: Tensor

        def __init__(self, *, images: Tensor, labels: Tensor, batch_size: list[int]) -> None: ...


_BUILD = threading.Lock()  # two loader threads asking first must not build two classes


def _image_data() -> type[ImageData]:
    """Return the ImageData tensorclass, importing tensordict (the `trees` extra) the first time."""
    with _BUILD:  # one class per process, kept as this module's attribute: pickle looks an instance's class up there
        if "ImageData" not in globals():
            globals()["ImageData"] = _build_image_data()
    return globals()["ImageData"]


def _build_image_data() -> type[ImageData]:
    tensorclass = require("tensordict", "trees").tensorclass

    class ImageData:
        """A batch or a whole data set of uint8 images (N, C, H, W) and int64 labels (N,).

        Indexing with a list or tensor of indices (or `__getitems__`) returns an ImageData of that batch.
        Explained in notebooks/09_precompute_memmap.ipynb.
        """

        images: Tensor
        labels: Tensor

    ImageData.__qualname__ = "ImageData"  # where pickle (fork or spawn) looks it up: this module's attribute
    return tensorclass(ImageData)


def __getattr__(name: str) -> Any:
    """Build `ImageData` on first access (PEP 562), so importing this module needs no tensordict."""
    if name == "ImageData":
        return _image_data()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------------------------------------ writing
def _create_numpy(root: Path, n: int, shape: tuple[int, ...]) -> tuple[Tensor, Tensor, Callable[[], None]]:
    images = np.memmap(root / FILES["numpy"][0], dtype=np.uint8, mode="w+", shape=(n, *shape))
    labels = np.memmap(root / FILES["numpy"][1], dtype=np.int64, mode="w+", shape=(n,))

    def flush() -> None:
        images.flush()
        labels.flush()

    return torch.from_numpy(images), torch.from_numpy(labels), flush


def _create_torch(root: Path, n: int, shape: tuple[int, ...]) -> tuple[Tensor, Tensor, Callable[[], None]]:
    # shared=True maps the file MAP_SHARED: writes to the tensor are writes to the file
    images = torch.from_file(
        str(root / FILES["torch"][0]), shared=True, size=n * math.prod(shape), dtype=torch.uint8
    ).view(n, *shape)
    labels = torch.from_file(str(root / FILES["torch"][1]), shared=True, size=n, dtype=torch.int64)
    return images, labels, lambda: None


def _create_tensordict(root: Path, n: int, shape: tuple[int, ...]) -> tuple[Tensor, Tensor, Callable[[], None]]:
    # an expanded zero template costs no memory; memmap_like turns it into empty files of the full size
    template = _image_data()(
        images=torch.zeros((1, *shape), dtype=torch.uint8).expand(n, *shape),
        labels=torch.zeros(1, dtype=torch.int64).expand(n),
        batch_size=[n],
    )
    data = template.memmap_like(prefix=str(root))  # type: ignore[attr-defined]
    return data.images, data.labels, lambda: None


_CREATE = {"numpy": _create_numpy, "torch": _create_torch, "tensordict": _create_tensordict}


def write_memmap(
    dataset: Any,
    root: str | Path,
    backend: str = "tensordict",
    batch_size: int = 32,
    num_workers: int = 0,
    key: Mapping[str, Any] | None = None,
    desc: str = "",
) -> ImageData:
    """Write every (uint8 image tensor, label) of `dataset` to memory-mapped files under `root`; return them mapped.

    All images must share one shape (precompute a fixed-size resize or crop). `num_workers` decodes in
    parallel; `key` (any JSON) is stored so that `precompute` can tell whether a copy is still current.
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    _check_backend(backend)
    _image_data()  # without tensordict, say so before decoding anything
    n = len(dataset)
    if n == 0:
        raise ValueError("the dataset is empty: nothing to write")
    first, _ = dataset[0]
    if not isinstance(first, Tensor) or first.dtype != torch.uint8:
        raise TypeError(
            f"dataset items must be (uint8 tensor, label); got a {type(first).__name__} "
            f"{getattr(first, 'dtype', '')}: give the dataset a transform that returns uint8 tensors"
        )
    shape = tuple(first.shape)
    root = _writable(Path(root))
    with staged(root) as tmp:  # the previous complete copy stays loadable until this one is whole
        tmp.mkdir()
        _fill(dataset, tmp, backend, shape, batch_size, num_workers, desc or f"writing {backend} memmap")
        meta = {"backend": backend, "n": n, "shape": list(shape), "key": dict(key or {})}
        (tmp / META).write_text(json.dumps(meta, indent=1))  # the marker last
    return load_memmap(root)


def _fill(
    dataset: Any, folder: Path, backend: str, shape: tuple[int, ...], batch_size: int, num_workers: int, desc: str
) -> None:
    n = len(dataset)
    images, labels, flush = _CREATE[backend](folder, n, shape)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
    start = 0
    with progress(None, desc=desc, total=n) as bar:  # type: ignore[arg-type, attr-defined]
        for x, y in loader:
            if tuple(x.shape[1:]) != shape:
                raise ValueError(
                    f"image {start} has shape {tuple(x.shape[1:])}, the first had {shape}: "
                    f"every image must have the same size (resize or crop in the transform)"
                )
            images[start : start + len(x)] = x
            labels[start : start + len(x)] = y
            start += len(x)
            bar.update(len(x))
    flush()


def _writable(root: Path) -> Path:
    """Return `root`, refusing a non-empty folder that this module did not write."""
    if root.exists() and any(root.iterdir()):
        if not (root / META).exists() and not any((root / f).exists() for fs in FILES.values() for f in fs):
            raise FileExistsError(f"{str(root)!r} is not empty and holds no memmap written here: pick a new folder")
    return root


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


# ------------------------------------------------------------------------------------------------ reading
def read_meta(root: str | Path) -> dict[str, Any]:
    """Return the metadata of the memmap data set in `root`, with a clear error if there is none."""
    path = Path(root) / META
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no memmap data set in {str(root)!r} ({META} is missing): write one with write_memmap(dataset, root)"
        ) from None
    except ValueError as exc:
        raise ValueError(f"{str(path)!r} is not valid JSON ({exc}): delete {str(root)!r} and write it again") from None


def _check_files(root: Path, meta: Mapping[str, Any]) -> None:
    n, backend = meta["n"], meta["backend"]
    _check_backend(backend)
    expected = (n * math.prod(meta["shape"]), n * 8)  # uint8 images, int64 labels
    for name, nbytes in zip(FILES[backend], expected):
        path = root / name
        if not path.exists():
            raise FileNotFoundError(
                f"{str(path)!r} is missing but {META} lists it: delete {str(root)!r} and write the data set again"
            )
        if path.stat().st_size != nbytes:
            raise ValueError(
                f"{str(path)!r} holds {path.stat().st_size} bytes but {META} says {n} items "
                f"({nbytes} bytes): the file is truncated or from another run; write it again"
            )


def load_memmap(root: str | Path) -> ImageData:
    """Map the data set in `root` (any backend) without reading it: pages load when a batch touches them.

    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    root = Path(root)
    meta = read_meta(root)
    _check_files(root, meta)
    n, shape, backend = meta["n"], tuple(meta["shape"]), meta["backend"]
    if backend == "tensordict":
        data = _image_data().load_memmap(str(root))  # type: ignore[attr-defined]
        if tuple(data.images.shape) != (n, *shape):
            raise ValueError(
                f"tensordict metadata in {str(root)!r} says {tuple(data.images.shape)}, "
                f"{META} says {(n, *shape)}: write the data set again"
            )
        return data
    if backend == "numpy":
        # mode "c" (copy-on-write) gives torch a writable view; nothing is ever written back to the file
        images = torch.from_numpy(np.memmap(root / FILES[backend][0], np.uint8, mode="c", shape=(n, *shape)))
        labels = torch.from_numpy(np.memmap(root / FILES[backend][1], np.int64, mode="c", shape=(n,)))
    else:
        images = torch.from_file(
            str(root / FILES[backend][0]), shared=False, size=n * math.prod(shape), dtype=torch.uint8
        ).view(n, *shape)
        labels = torch.from_file(str(root / FILES[backend][1]), shared=False, size=n, dtype=torch.int64)
    return _image_data()(images=images, labels=labels, batch_size=[n])


def precompute(
    dataset: Any, root: str | Path, backend: str = "tensordict", key: Mapping[str, Any] | None = None, **write_kw: Any
) -> ImageData:
    """Return the memmap in `root` if it holds `dataset` (same length, backend and `key`), else write it first.

    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    try:
        meta = read_meta(root)
        wanted = json.loads(json.dumps(dict(key or {})))  # as stored: tuples become lists
        current = (meta["backend"], meta["n"], meta["key"]) == (backend, len(dataset), wanted)
        if current:
            return load_memmap(root)
    except (FileNotFoundError, ValueError, KeyError):
        pass  # missing, truncated or stale: write it again
    return write_memmap(dataset, root, backend=backend, key=key, **write_kw)


class MemmapDataset(torch.utils.data.Dataset):
    """A map-style Dataset over an ImageData whose `__getitems__` gathers a whole batch with one fast call.

    DataLoader (with workers) then fetches each batch with one `np.take` per field instead of N `__getitem__`
    calls; pair it with a `collate_fn` that accepts the ImageData batch. Tensor-index gathers on a tensorclass
    (`data[idx]`) use advanced indexing, several times slower on a CPU.
    Explained in notebooks/09_precompute_memmap.ipynb.
    """

    def __init__(self, data: ImageData) -> None:
        self.fields = {"images": data.images, "labels": data.labels}

    def __len__(self) -> int:
        return len(self.fields["labels"])

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        return self.fields["images"][index], self.fields["labels"][index]

    def __getitems__(self, indices: list[int]) -> ImageData:
        index = torch.as_tensor(indices)
        batch = rows.take(self.fields, index)
        return _image_data()(images=batch["images"], labels=batch["labels"], batch_size=[len(index)])


def nbytes(root: str | Path) -> int:
    """Return the bytes on disk of the data set in `root` (images + labels)."""
    meta = read_meta(root)
    return sum((Path(root) / f).stat().st_size for f in FILES[meta["backend"]])
