"""CIFAR-10: read the python batches safely, or generate a seeded synthetic set in the same files.

The real `cifar-10-batches-py/` folder holds `data_batch_1`..`data_batch_5` (10,000 images each),
`test_batch` and `batches.meta`, each a pickled dict: `b"data"` a uint8 array (N, 3072) of R, G, B
planes of 32x32 images, `b"labels"` a list of ints 0..9. Explained in notebooks/11_ffcv_cifar.ipynb.
"""

from __future__ import annotations

import codecs
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from .. import config
from ..atomic import staged

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
LABEL_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
FOLDER = "cifar-10-batches-py"


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r} (only latin1)")
    return codecs.encode(text, "latin1")


def _allowed() -> dict[tuple[str, str], Any]:
    reconstruct = np.ndarray.__reduce__(np.zeros(1))[0]  # numpy's own _reconstruct, whatever module it lives in
    return {
        ("numpy.core.multiarray", "_reconstruct"): reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1_encode,
    }  # how protocol-2 pickles from Python 3 store bytes


class SafeUnpickler(pickle.Unpickler):
    """Unpickle only what a CIFAR-10 batch holds: dicts, lists, str/bytes, ints and numpy arrays.

    Any other global (os.system, builtins.eval, a class) is refused before it can run.
    Explained in notebooks/11_ffcv_cifar.ipynb.
    """

    def find_class(self, module: str, name: str) -> Any:
        """Return an allowed global, refuse everything else."""
        try:
            return _allowed()[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing to unpickle {module}.{name}: a CIFAR-10 batch holds only dicts, lists, bytes, ints "
                f"and numpy arrays; this file is not one (or it is malicious)"
            ) from None


def read_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one batch file into images (N, 32, 32, 3) uint8 and labels (N,) int64, refusing foreign pickles."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            batch = SafeUnpickler(f, encoding="bytes").load()
    except pickle.UnpicklingError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise ValueError(
            f"{path}: not a CIFAR-10 batch (want a dict with b'data' and b'labels', got {type(batch).__name__})"
        )
    data, labels = batch[b"data"], np.asarray(batch[b"labels"], dtype=np.int64)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(
            f"{path}: b'data' must be a uint8 array (N, 3072), got "
            f"{getattr(data, 'dtype', type(data).__name__)} {getattr(data, 'shape', '')}"
        )
    if labels.shape != (len(data),) or labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
        raise ValueError(f"{path}: b'labels' must be {len(data)} ints in 0..9")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels


def read_cifar10(root: str | Path, train: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Read the train (5 batches) or test split of a `cifar-10-batches-py` folder as HWC uint8 + int64.

    Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    root = Path(root)
    folder = root / FOLDER if (root / FOLDER).is_dir() else root
    names = TRAIN_FILES if train else (TEST_FILE,)
    missing = [n for n in names if not (folder / n).exists()]
    if missing:
        raise FileNotFoundError(
            f"{folder} lacks {', '.join(missing)}: point root at the extracted "
            f"cifar-10-python.tar.gz, or call generate_cifar10(root)"
        )
    parts = [read_batch(folder / n) for n in names]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def synthetic_images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw `n` learnable 32x32 RGB images: a class colour and a class stripe direction, jittered and noisy."""
    labels = rng.integers(0, 10, size=n)
    palette = np.random.default_rng(1234).uniform(40, 215, size=(10, 3))  # fixed: classes mean the same everywhere
    angle = np.arange(10) * np.pi / 10
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32)
    theta = angle[labels] + rng.normal(0, 0.15, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    wave = np.sin((np.cos(theta)[:, None, None] * xx + np.sin(theta)[:, None, None] * yy) * 0.6 + phase[:, None, None])
    colour = palette[labels] + rng.normal(0, 25, size=(n, 3))
    img = colour[:, None, None, :] + 45 * wave[..., None] + rng.normal(0, 20, size=(n, 32, 32, 3))
    return np.clip(img, 0, 255).astype(np.uint8), labels.astype(np.int64)


def _write_batch(path: Path, images: np.ndarray, labels: np.ndarray, label: str) -> None:
    data = np.ascontiguousarray(images.transpose(0, 3, 1, 2).reshape(len(images), 3072))
    batch = {
        b"batch_label": label.encode(),
        b"labels": labels.tolist(),
        b"data": data,
        b"filenames": [f"synthetic_{i:05d}.png".encode() for i in range(len(images))],
    }
    with path.open("wb") as f:
        pickle.dump(batch, f, protocol=2)  # the real files are Python 2 pickles (protocol 2)


def generate_cifar10(root: str | Path, train_size: int = 50_000, test_size: int = 10_000, seed: int = 0) -> Path:
    """Write a synthetic `cifar-10-batches-py` folder under `root` (5 train batches, test, meta); return it.

    Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    if train_size < 5 or test_size < 1:
        raise ValueError(f"need train_size >= 5 (five batches) and test_size >= 1, got {train_size}, {test_size}")
    with staged(Path(root) / FOLDER) as folder:  # an older copy stays readable until this one is whole
        folder.mkdir()
        _write_all(folder, train_size, test_size, seed)
    return Path(root) / FOLDER


def _write_all(folder: Path, train_size: int, test_size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    bounds = np.linspace(0, train_size, 6).astype(int)
    for i, name in enumerate(TRAIN_FILES):
        _write_batch(folder / name, *synthetic_images(bounds[i + 1] - bounds[i], rng), f"training batch {i + 1} of 5")
    _write_batch(folder / TEST_FILE, *synthetic_images(test_size, rng), "testing batch 1 of 1")
    meta = {b"num_cases_per_batch": int(bounds[1]), b"label_names": [n.encode() for n in LABEL_NAMES], b"num_vis": 3072}
    with (folder / "batches.meta").open("wb") as f:
        pickle.dump(meta, f, protocol=2)


def load_cifar10(
    train_size: int | None = None, test_size: int | None = None, seed: int = 0, root: str | Path | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return train images, train labels, test images, test labels (HWC uint8, int64) from `root` or a cache.

    Without `root`, a synthetic set of the scale's size is generated once under data/.
    Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    if root is None:
        train_size = config.size("cifar.train") if train_size is None else train_size
        test_size = config.size("cifar.test") if test_size is None else test_size
        root = config.data_dir() / f"cifar10-synthetic-{train_size}-{test_size}-s{seed}"
        if not (root / FOLDER / "batches.meta").exists():
            generate_cifar10(root, train_size, test_size, seed)
    return (*read_cifar10(root, train=True), *read_cifar10(root, train=False))


class PillowResizeCrop:
    """The seed's per-sample transform with Pillow: resize to `resize`, center-crop `crop`, to a float CHW tensor.

    Explained in notebooks/11_ffcv_cifar.ipynb.
    """

    def __init__(self, resize: int = 48, crop: int = 32) -> None:
        self.resize, self.crop = resize, crop

    def __call__(self, image: np.ndarray) -> torch.Tensor:
        """Transform one HWC uint8 image."""
        # Pillow sets Image.BILINEAR (= Image.Resampling.BILINEAR) at import time; notebook 11 shows this spelling
        img = Image.fromarray(image).resize((self.resize, self.resize), Image.BILINEAR)  # type: ignore[attr-defined]
        left = (self.resize - self.crop) // 2
        img = img.crop((left, left, left + self.crop, left + self.crop))
        return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float().div_(255)


class ImageDataset(torch.utils.data.Dataset):
    """A map-style dataset of HWC uint8 images and labels, one Pillow-transformed sample per `__getitem__`.

    Lives in the package so DataLoader workers can import it under any start method.
    Explained in notebooks/11_ffcv_cifar.ipynb.
    """

    def __init__(
        self, images: np.ndarray, labels: np.ndarray, transform: Callable[[np.ndarray], Any] | None = None
    ) -> None:
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        image = self.images[index]
        return (self.transform(image) if self.transform else image), int(self.labels[index])
