"""ImageFolder: a Pillow reader of `root/<class>/*.jpg` and a seeded synthetic generator of the same layout.

The synthetic set has the shape of the tensordict tutorial's ants/bees subset of ImageNet (2 classes,
244 train and 153 val JPEGs of varied sizes around 500 px at full scale). Any real ImageFolder can replace it.
Explained in notebooks/09_precompute_memmap.ipynb.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

from .. import config
from ..atomic import marker_holds, staged
from ..measure.display import progress

EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
MARKER = ".fastloops-imagefolder.json"  # written last: its presence means a complete copy
ASPECTS = (4 / 3, 3 / 4, 1.0, 3 / 2, 2 / 3)  # photo-like shapes: landscape, portrait, square


# --------------------------------------------------------------------------------------------- the reader
def pil_loader(path: str | Path) -> Image.Image:
    """Decode an image file with Pillow and convert it to RGB (grayscale, CMYK, palette and alpha too)."""
    with Image.open(path) as img:
        if img.mode in ("RGBA", "LA") or (img.mode == "P" and "transparency" in img.info):
            # composite on white, as a viewer would, instead of letting transparent pixels turn black
            rgba = img.convert("RGBA")
            white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            return Image.alpha_composite(white, rgba).convert("RGB")
        return img.convert("RGB")


def find_classes(root: str | Path) -> list[str]:
    """Return the sorted names of the class folders under `root`, with a clear error if there are none."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(
            f"image folder {str(root)!r} does not exist: pass a folder laid out as ROOT/<class>/<image>.jpg, "
            f"or make one with write_synthetic_imagefolder()"
        )
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise FileNotFoundError(
            f"image folder {str(root)!r} has no class subfolders: expected ROOT/<class>/<image>.jpg"
        )
    return classes


def make_samples(root: str | Path, classes: Sequence[str]) -> list[tuple[str, int]]:
    """Return (path, label) for every image under `root/<class>/`, sorted by class then file name."""
    samples = []
    for label, name in enumerate(classes):
        files = sorted(p for p in (Path(root) / name).rglob("*") if p.suffix.lower() in EXTENSIONS and p.is_file())
        samples += [(str(p), label) for p in files]
    if not samples:
        raise FileNotFoundError(
            f"image folder {str(root)!r} has class folders {list(classes)} but no images "
            f"with an extension in {EXTENSIONS}"
        )
    return samples


class ImageFolder(torch.utils.data.Dataset):
    """Read `root/<class>/<image>` as (image, label) pairs, like torchvision's ImageFolder without torchvision.

    Parameters
    ----------
    root : the folder holding one subfolder per class (labels follow the sorted class names).
    transform : applied to the decoded image (a PIL RGB image) before it is returned; None returns the image.
    loader : decodes one path; the default decodes with Pillow and converts every mode to RGB.

    Explained in notebooks/09_precompute_memmap.ipynb.
    """

    def __init__(
        self, root: str | Path, transform: Callable[[Any], Any] | None = None, loader: Callable[[str], Any] = pil_loader
    ) -> None:
        self.root = Path(root)
        self.classes = find_classes(self.root)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.samples = make_samples(self.root, self.classes)
        self.targets = [label for _, label in self.samples]
        self.transform, self.loader = transform, loader

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        path, label = self.samples[index]
        image = self.loader(path)
        if self.transform is not None:
            image = self.transform(image)
        return image, label

    def __repr__(self) -> str:
        return f"ImageFolder(root={str(self.root)!r}, {len(self)} images, classes={self.classes})"


# ------------------------------------------------------------------------------------------ the generator
def synthetic_image(rng: np.random.Generator, width: int, height: int, label: int) -> Image.Image:
    """Draw one photo-like RGB image: a smooth colour field, shapes, stripes and sensor noise."""
    cells = rng.integers(3, 9, size=2)
    field = rng.integers(0, 256, (*cells, 3), dtype=np.uint8)
    img = Image.fromarray(field).resize((width, height), Image.BICUBIC)  # type: ignore[attr-defined]
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(6, 16))):
        x0, x1 = sorted(rng.integers(0, width, 2))
        y0, y1 = sorted(rng.integers(0, height, 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        # the label changes which shapes dominate, so a model could tell the classes apart
        if rng.random() < (0.7 if label % 2 == 0 else 0.3):
            draw.ellipse((x0, y0, x1 + 1, y1 + 1), fill=colour)
        else:
            draw.line((x0, y0, x1, y1), fill=colour, width=int(rng.integers(2, 12)))
    arr = np.asarray(img, dtype=np.float32)
    angle, period = rng.uniform(0, np.pi), rng.uniform(3, 12)
    xs = np.arange(width, dtype=np.float32) * np.float32(np.cos(angle) * 2 * np.pi / period)
    ys = np.arange(height, dtype=np.float32) * np.float32(np.sin(angle) * 2 * np.pi / period)
    stripes = np.sin(ys[:, None] + xs[None, :])
    arr += rng.uniform(5, 20) * stripes[..., None]  # fine texture: what makes real photos cost to decode
    arr += rng.uniform(4, 10) * rng.standard_normal(arr.shape, dtype=np.float32)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def _odd_mode(img: Image.Image, k: int) -> tuple[Image.Image, str]:
    """Return `img` in one of the modes the reader must convert, and the file suffix to store it with."""
    kind = k % 4
    if kind == 0:
        return img.convert("L"), ".jpg"  # grayscale JPEG
    if kind == 1:
        return img.convert("CMYK"), ".jpg"  # CMYK JPEG (Adobe)
    if kind == 2:
        return img.convert("P", palette=Image.ADAPTIVE, colors=64), ".png"  # type: ignore[attr-defined]  # palette PNG
    rgba = img.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(img.size))
    return rgba, ".png"  # alpha-bearing PNG


def _image_size(rng: np.random.Generator, size: int, jitter: float) -> tuple[int, int]:
    """Return a (width, height) whose longer side is about `size` px and whose aspect is photo-like."""
    longer = size * rng.uniform(1 - jitter, 1 + jitter)
    aspect = ASPECTS[int(rng.integers(len(ASPECTS)))]
    width, height = (longer, longer / aspect) if aspect >= 1 else (longer * aspect, longer)
    return max(int(round(width)), 8), max(int(round(height)), 8)


def _write_split(
    folder: Path,
    n: int,
    classes: Sequence[str],
    seed: int,
    split: int,
    size: int,
    jitter: float,
    quality: int,
    odd_modes: int,
    bar: Any,
) -> None:
    for i in range(n):
        label = i % len(classes)  # balanced classes, interleaved
        rng = np.random.default_rng([seed, split, i])  # one stream per image: files do not depend on n
        width, height = _image_size(rng, size, jitter)
        img, suffix = synthetic_image(rng, width, height, label), ".jpg"
        if i < odd_modes:
            img, suffix = _odd_mode(img, i)
        out = folder / classes[label] / f"{split}_{i:05d}{suffix}"
        out.parent.mkdir(parents=True, exist_ok=True)
        img.save(out, quality=quality) if suffix == ".jpg" else img.save(out)
        bar.update(1)


def write_synthetic_imagefolder(
    root: str | Path,
    n_train: int,
    n_val: int,
    seed: int = 0,
    classes: Sequence[str] = ("ants", "bees"),
    size: int = 500,
    size_jitter: float = 0.25,
    quality: int = 90,
    odd_modes: int = 0,
) -> Path:
    """Write seeded photo-like JPEGs to root/train/<class>/ and root/val/<class>/; skip if already complete.

    `size` is the typical longer side in px (each image varies by +-`size_jitter`); `odd_modes` > 0 makes the
    first that many images of each split grayscale, CMYK, palette or alpha-bearing (to test the reader).
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    root = Path(root)
    _check_target(root, n_train, n_val, classes)
    params = {
        "n_train": n_train,
        "n_val": n_val,
        "seed": seed,
        "classes": list(classes),
        "size": size,
        "size_jitter": size_jitter,
        "quality": quality,
        "odd_modes": odd_modes,
        "version": 1,
    }
    if marker_holds(root / MARKER, params):
        return root
    with staged(root) as tmp:  # readers never see half a folder; an older copy stays until this one is whole
        with progress(range(n_train + n_val), desc=f"writing {root.name}") as bar:  # type: ignore[attr-defined]
            _write_split(tmp / "train", n_train, classes, seed, 0, size, size_jitter, quality, odd_modes, bar)
            _write_split(tmp / "val", n_val, classes, seed, 1, size, size_jitter, quality, odd_modes, bar)
        (tmp / MARKER).write_text(json.dumps(params, indent=1))  # the marker last
    return root


def _check_target(root: Path, n_train: int, n_val: int, classes: Sequence[str]) -> None:
    """Refuse a split with no image of some class, and a folder of files this writer did not write (it replaces)."""
    if n_train < len(classes) or n_val < len(classes):
        raise ValueError(
            f"need at least one image per class in each split: n_train={n_train}, n_val={n_val}, {len(classes)} classes"
        )
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise FileExistsError(
            f"{str(root)!r} exists and was not written by write_synthetic_imagefolder: pass an empty or new folder"
        )


def synthetic_imagefolder(
    scale: str | None = None, *, train: int | None = None, val: int | None = None, px: int | None = None
) -> Path:
    """Return a synthetic ImageFolder of `train` and `val` images of about `px` px in the data folder, writing it once.

    A size left out comes from the scale table (`imagefolder.*` at `scale`, or the active scale).
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    table = config.sizes("imagefolder", scale) if None in (train, val, px) else {}
    train = table["train"] if train is None else train
    val = table["val"] if val is None else val
    px = table["px"] if px is None else px
    root = config.data_dir() / f"imagefolder-{train}-{val}-{px}px"
    return write_synthetic_imagefolder(root, train, val, seed=0, size=px)
