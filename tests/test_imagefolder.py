import numpy as np
import pytest
import torch
from PIL import Image

from fastloops_helpers import config
from fastloops_helpers.data import jpeg_folder as imagefolder
from fastloops_helpers.data.jpeg_folder import ImageFolder, pil_loader, write_synthetic_imagefolder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_synthetic_imagefolder(tmp_path_factory.mktemp("if") / "set", 6, 4, seed=3, size=64)


def _files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def test_layout_counts_and_labels(tiny):
    train, val = ImageFolder(tiny / "train"), ImageFolder(tiny / "val")
    assert train.classes == ["ants", "bees"] and train.class_to_idx == {"ants": 0, "bees": 1}
    assert len(train) == 6 and len(val) == 4
    assert train.targets == [0, 0, 0, 1, 1, 1]
    assert all(f"/{train.classes[label]}/" in path for path, label in train.samples)


def test_images_are_rgb_jpegs_of_varied_size_around_the_target(tiny):
    ds = ImageFolder(tiny / "train")
    sizes = set()
    for path, _ in ds.samples:
        with Image.open(path) as img:
            assert img.format == "JPEG" and img.mode == "RGB"
            sizes.add(img.size)
            assert 0.5 * 64 <= max(img.size) <= 1.5 * 64
    assert len(sizes) > 1


def test_images_are_textured_not_flat(tiny):
    image, _ = ImageFolder(tiny / "val")[0]
    arr = np.asarray(image, dtype=np.float32)
    assert arr.std() > 20  # colours vary across the image
    assert np.abs(np.diff(arr, axis=1)).mean() > 3  # and from pixel to pixel (texture, noise)


def test_same_seed_same_bytes_other_seed_other_bytes(tiny, tmp_path):
    again = write_synthetic_imagefolder(tmp_path / "again", 6, 4, seed=3, size=64)
    other = write_synthetic_imagefolder(tmp_path / "other", 6, 4, seed=4, size=64)
    assert _files(again) == _files(tiny)
    for rel in _files(tiny):
        assert (again / rel).read_bytes() == (tiny / rel).read_bytes()
    assert (other / "train/ants/0_00000.jpg").read_bytes() != (tiny / "train/ants/0_00000.jpg").read_bytes()


def test_a_complete_copy_is_not_rewritten(tiny):
    before = {rel: (tiny / rel).stat().st_mtime_ns for rel in _files(tiny)}
    assert write_synthetic_imagefolder(tiny, 6, 4, seed=3, size=64) == tiny
    assert {rel: (tiny / rel).stat().st_mtime_ns for rel in _files(tiny)} == before


def test_other_parameters_regenerate_a_generated_copy(tmp_path):
    root = write_synthetic_imagefolder(tmp_path / "s", 2, 2, size=32)
    write_synthetic_imagefolder(root, 4, 2, size=32)
    assert len(ImageFolder(root / "train")) == 4
    assert not list(tmp_path.glob("s.tmp-*"))


def test_refuses_to_write_into_a_foreign_folder(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not written by write_synthetic_imagefolder"):
        write_synthetic_imagefolder(tmp_path, 2, 2, size=32)
    assert (tmp_path / "mine.txt").exists()


def test_odd_modes_are_stored_and_read_as_rgb(tmp_path):
    root = write_synthetic_imagefolder(tmp_path / "odd", 8, 2, size=48, odd_modes=4)
    ds = ImageFolder(root / "train")
    stored = {}
    for path, _ in ds.samples:
        with Image.open(path) as img:
            stored[img.mode] = path
    assert {"L", "CMYK", "P", "RGBA", "RGB"} <= set(stored)
    for mode, path in stored.items():
        rgb = pil_loader(path)
        assert rgb.mode == "RGB", mode
        assert rgb.size == Image.open(path).size


def test_alpha_is_composited_on_white(tmp_path):
    rgba = Image.new("RGBA", (4, 2), (255, 0, 0, 255))
    rgba.putpixel((0, 0), (0, 0, 0, 0))  # fully transparent black
    rgba.save(tmp_path / "a.png")
    rgb = np.asarray(pil_loader(tmp_path / "a.png"))
    assert tuple(rgb[0, 0]) == (255, 255, 255) and tuple(rgb[1, 1]) == (255, 0, 0)


def test_transform_and_dataloader(tiny):
    to_tensor = lambda img: torch.from_numpy(np.array(img)).permute(2, 0, 1)[:, :16, :16]  # noqa: E731
    ds = ImageFolder(tiny / "train", transform=to_tensor)
    image, label = ds[4]
    assert image.dtype == torch.uint8 and image.shape == (3, 16, 16) and label == 1
    images, labels = next(iter(torch.utils.data.DataLoader(ds, batch_size=6)))
    assert images.shape == (6, 3, 16, 16) and labels.tolist() == ds.targets


def test_missing_empty_and_imageless_folders_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist.*write_synthetic_imagefolder"):
        ImageFolder(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="no class subfolders"):
        ImageFolder(tmp_path)
    (tmp_path / "cats").mkdir()
    (tmp_path / "cats" / "notes.txt").write_text("no images here")
    with pytest.raises(FileNotFoundError, match=r"\['cats'\] but no images"):
        ImageFolder(tmp_path)


def test_too_few_images_per_class_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="n_train=1"):
        write_synthetic_imagefolder(tmp_path / "x", 1, 2)


def test_default_set_follows_the_scale_table(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_DATA", str(tmp_path))
    monkeypatch.setitem(config.SIZES, "imagefolder.train", (4, 4, 4))
    monkeypatch.setitem(config.SIZES, "imagefolder.val", (2, 2, 2))
    monkeypatch.setitem(config.SIZES, "imagefolder.px", (40, 40, 40))
    root = imagefolder.synthetic_imagefolder("smoke")
    assert root.parent == tmp_path and "40px" in root.name
    assert len(ImageFolder(root / "train")) == 4 and len(ImageFolder(root / "val")) == 2


def test_sizes_given_explicitly_win_over_the_scale_table(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_DATA", str(tmp_path))
    monkeypatch.setitem(config.SIZES, "imagefolder.px", (40, 40, 40))
    root = imagefolder.synthetic_imagefolder(train=4, val=2, px=36)  # train and val given: only px from a caller
    assert root.name == "imagefolder-4-2-36px"
    assert len(ImageFolder(root / "train")) == 4 and len(ImageFolder(root / "val")) == 2
