"""Write data sets to FFCV's `.beton` format and build the seed's FFCV Loaders (ffcv imported lazily).

Explained in notebooks/10_ffcv_otto.ipynb and notebooks/11_ffcv_cifar.ipynb.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from ..atomic import staged
from ..measure.threads import torch_threads

ORDERS = ("sequential", "random", "quasi_random")
MISSING = (
    "ffcv is not importable here ({error}); the FFCV parts are skipped. To add it: "
    "sudo apt-get install -y pkg-config libopencv-dev libturbojpeg0-dev && pip install ffcv"
)


def have_ffcv() -> bool:
    """Return True when `ffcv.loader` imports (ffcv plus its numba, opencv and libturbojpeg parts)."""
    try:
        require_ffcv()
    except ImportError:
        return False
    return True


def require_ffcv() -> ModuleType:
    """Import ffcv (its loader, fields, decoders, transforms), or raise ImportError saying how to install it.

    Importing ffcv sets torch's intra-op thread count to 1 (its Compiler's default): the caller's count is kept.
    """
    try:  # the import warns about tqdm's IProgress on stderr
        with torch_threads(None), contextlib.redirect_stderr(io.StringIO()):
            for sub in ("loader", "fields", "fields.decoders", "transforms", "writer"):
                importlib.import_module(f"ffcv.{sub}")
    except Exception as exc:  # a broken build raises anything from ImportError to numba errors
        raise ImportError(MISSING.format(error=f"{type(exc).__name__}: {exc}")) from exc
    return importlib.import_module("ffcv")


class Pairs:
    """An indexable of (x, y) pairs over two arrays, as DatasetWriter expects (picklable for its workers)."""

    def __init__(self, X: np.ndarray, y: np.ndarray) -> None:
        if len(X) != len(y):
            raise ValueError(f"X and y differ in length: {len(X)} vs {len(y)}")
        self.X, self.y = X, np.asarray(y, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.X)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.X[index], int(self.y[index])


def _write(path: str | Path, fields: dict[str, Any], data: Pairs, num_workers: int) -> Path:
    ffcv = require_ffcv()
    path = Path(path)
    with staged(path) as tmp:
        writer = ffcv.writer.DatasetWriter(str(tmp), fields, num_workers=num_workers)
        with contextlib.redirect_stderr(io.StringIO()):  # its tqdm bar prints a rate that changes every run
            writer.from_indexed_dataset(data)
    return path


def write_table_beton(path: str | Path, X: np.ndarray, y: np.ndarray, num_workers: int = 1) -> Path:
    """Write rows of a float32 table and int labels as `.beton` (NDArrayField + IntField), as for Otto.

    Explained in notebooks/10_ffcv_otto.ipynb.
    """
    ffcv = require_ffcv()
    X = np.ascontiguousarray(X, dtype=np.float32)
    fields = {"x": ffcv.fields.NDArrayField(shape=X.shape[1:], dtype=np.dtype("float32")), "y": ffcv.fields.IntField()}
    return _write(path, fields, Pairs(X, y), num_workers)


def write_image_beton(path: str | Path, images: np.ndarray, labels: np.ndarray, num_workers: int = 1) -> Path:
    """Write HWC uint8 RGB images and int labels as `.beton` (RGBImageField, raw pixels + IntField).

    Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    ffcv = require_ffcv()
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 (N, H, W, 3), got {images.dtype} {images.shape}")
    fields = {"image": ffcv.fields.RGBImageField(write_mode="raw"), "label": ffcv.fields.IntField()}
    return _write(path, fields, Pairs(images, labels), num_workers)


def _loader(ffcv: ModuleType, path: str | Path, **options: Any) -> Any:
    """Return FFCV's Loader; it sets torch's thread count to its num_workers, and the caller's count is kept."""
    with torch_threads(None):
        return ffcv.loader.Loader(str(path), **options)


def _order(name: str) -> Any:
    ffcv = require_ffcv()
    if name not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {name!r}")
    return getattr(ffcv.loader.OrderOption, name.upper())


def _label_pipeline(device: torch.device) -> list[Any]:
    ffcv = require_ffcv()
    t = ffcv.transforms
    return [ffcv.fields.decoders.IntDecoder(), t.ToTensor(), t.ToDevice(device, non_blocking=True), t.Squeeze()]


def table_loader(
    path: str | Path,
    batch_size: int = 1024,
    num_workers: int = 1,
    order: str = "random",
    device: torch.device | str = "cpu",
    seed: int = 0,
    drop_last: bool = False,
) -> Any:
    """Return the seed's FFCV Loader over a table `.beton`: yields (x float32 (B, F), y int64 (B,)).

    Explained in notebooks/10_ffcv_otto.ipynb.
    """
    ffcv = require_ffcv()
    device = torch.device(device)
    x_pipe = [
        ffcv.fields.decoders.NDArrayDecoder(),
        ffcv.transforms.ToTensor(),
        ffcv.transforms.ToDevice(device, non_blocking=True),
    ]
    return _loader(
        ffcv,
        path,
        batch_size=batch_size,
        num_workers=num_workers,
        order=_order(order),
        seed=seed,
        drop_last=drop_last,
        pipelines={"x": x_pipe, "y": _label_pipeline(device)},
    )


def image_loader(
    path: str | Path,
    batch_size: int = 128,
    num_workers: int = 1,
    order: str = "quasi_random",
    device: torch.device | str = "cpu",
    size: int = 32,
    ratio: float = 2 / 3,
    seed: int = 0,
    drop_last: bool = True,
) -> Any:
    """Return the seed's FFCV Loader over an image `.beton`: center crop `ratio`, resize to `size`, NCHW uint8.

    The crop of 2/3 of the side resized to 32 equals the DataLoader path's resize to 48 then center crop 32.
    Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    ffcv = require_ffcv()
    device = torch.device(device)
    t = ffcv.transforms
    image_pipe = [
        ffcv.fields.decoders.CenterCropRGBImageDecoder((size, size), ratio),
        t.ToTensor(),
        t.ToDevice(device, non_blocking=True),
        t.ToTorchImage(),
    ]
    return _loader(
        ffcv,
        path,
        batch_size=batch_size,
        num_workers=num_workers,
        order=_order(order),
        seed=seed,
        drop_last=drop_last,
        pipelines={"image": image_pipe, "label": _label_pipeline(device)},
    )


class Batches:
    """An FFCV Loader as the training loop takes it: each epoch a fresh iterator, one batch per step, closed at the end.

    FFCV decodes and collates every batch in its own thread with numba-compiled code that a notebook cannot show
    (ffcv's, not the project's); this loop is where its batches enter the project's code, so notebooks 10 and 11
    hand out FFCV's batches through it (their `make_loaders` cells) and show it: a change here
    (touch each batch, keep a copy of it) is what the notebook measures. It costs one generator step per batch.
    Explained in notebooks/10_ffcv_otto.ipynb.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        with torch_threads(None):  # FFCV sets torch's thread count to its num_workers here: the loop keeps its own
            batches = iter(self.loader)  # starts FFCV's reader thread for this epoch
        try:
            # one yield per batch (not `yield from`): every batch passes this line, where a change to it is timed
            for batch in batches:  # noqa: UP028  # each batch is a view into FFCV's buffers, reused a few batches later
                yield batch
        finally:
            batches.close()  # stops the reader thread when the loop leaves the epoch early


def loader_orders(
    path: str | Path, batch_size: int, epochs: int = 1, order: str = "quasi_random", seed: int = 0
) -> tuple[list[np.ndarray], np.ndarray]:
    """Return the sample order FFCV's own Loader yields per epoch over a table `.beton`, and each sample's page.

    The `.beton` is one `write_table_beton` wrote with each row's index in its first column, so the order is read
    from the batches themselves (x[:, 0]), not re-derived. The pages are the storage pages (`page_size` bytes,
    8 MiB by default) that hold each sample's data, from the file's allocation table: the pages QUASI_RANDOM
    shuffles and keeps 2 x batch_size of open. Explained in notebooks/04_fast_shuffle.ipynb.
    """
    require_ffcv()
    reader = importlib.import_module("ffcv.reader").Reader(str(path))
    table = reader.alloc_table
    pages = np.full(reader.num_samples, -1, dtype=np.int64)
    pages[table["sample_id"]] = table["ptr"] // reader.page_size
    loader = table_loader(path, batch_size, order=order, seed=seed)
    orders = [np.concatenate([x[:, 0].numpy().astype(np.int64) for x, _ in Batches(loader)]) for _ in range(epochs)]
    return orders, pages


def _numba_finalizer_noise(hook: Any) -> Any:
    """Wrap `sys.unraisablehook` to drop one known numba bug, and pass every other unraisable exception on.

    After FFCV's compiled pipelines, a garbage collection may run numba's dispatcher finalizer on an overload it
    has already forgotten (KeyError in `numba/core/dispatcher.py`, `finalizer`): harmless, but its traceback
    lands in whichever cell happens to collect. pyproject.toml's pytest settings ignore the same one.
    """

    def drop_or_pass(unraisable: Any) -> None:
        tb = unraisable.exc_traceback
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code if tb is not None else None
        if not (
            unraisable.exc_type is KeyError
            and code is not None
            and code.co_name == "finalizer"
            and code.co_filename.replace("\\", "/").endswith("numba/core/dispatcher.py")
        ):
            hook(unraisable)

    return drop_or_pass


def _install_numba_filter() -> None:
    import sys  # here, not at the top: the functions above keep the lines the notebooks show

    sys.unraisablehook = _numba_finalizer_noise(sys.unraisablehook)


_install_numba_filter()
