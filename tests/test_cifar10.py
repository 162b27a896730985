import os
import pickle

import numpy as np
import pytest
import torch

from fastloops_helpers.data import cifar10


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cifar")
    cifar10.generate_cifar10(root, train_size=50, test_size=12, seed=1)
    return root


def test_generator_writes_the_python_batches(root):
    folder = root / cifar10.FOLDER
    assert sorted(p.name for p in folder.iterdir()) == sorted([*cifar10.TRAIN_FILES, "test_batch", "batches.meta"])
    with (folder / "data_batch_1").open("rb") as f:
        batch = pickle.load(f, encoding="bytes")  # trusted: we just wrote it
    assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape == (10, 3072)
    assert len(batch[b"labels"]) == 10 and all(0 <= v <= 9 for v in batch[b"labels"])


def test_reader_returns_hwc_images_in_the_planar_layout(root):
    images, labels = cifar10.read_cifar10(root, train=True)
    assert images.shape == (50, 32, 32, 3) and images.dtype == np.uint8 and labels.dtype == np.int64
    with (root / cifar10.FOLDER / "data_batch_1").open("rb") as f:
        raw = pickle.load(f, encoding="bytes")[b"data"]
    # first 1024 bytes are the red plane, row-major: pixel (row 0, col 5) red is raw[0, 5]
    assert images[0, 0, 5, 0] == raw[0, 5] and images[0, 1, 0, 1] == raw[0, 1024 + 32]
    test_images, test_labels = cifar10.read_cifar10(root / cifar10.FOLDER, train=False)
    assert test_images.shape == (12, 32, 32, 3) and len(test_labels) == 12


def test_generated_classes_are_learnable():
    rng = np.random.default_rng(0)
    X, y = cifar10.synthetic_images(2000, rng)
    Xt, yt = cifar10.synthetic_images(500, rng)
    means = np.stack([X[y == c].reshape(-1, 3072 // 3, 3).mean(1).mean(0) for c in range(10)])
    colour = Xt.reshape(len(Xt), -1, 3).mean(1)
    pred = ((colour[:, None] - means[None]) ** 2).sum(-1).argmin(1)
    assert (pred == yt).mean() > 0.3  # colour alone beats chance (0.1) by far; stripes add the rest


class Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("payload", [Evil(), {b"data": Evil(), b"labels": []}, {b"x": eval}])
def test_reader_refuses_pickles_that_would_run_code(tmp_path, payload, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(
        ValueError, match=r"refusing to unpickle (posix|os|nt)\.system|refusing to unpickle __builtin__\.eval"
    ):
        cifar10.read_batch(path)
    assert not (tmp_path / "pwned").exists()


def test_reader_refuses_other_codecs_and_wrong_shapes(tmp_path):
    import _codecs

    class Rot:
        def __reduce__(self):
            return (_codecs.encode, ("abc", "rot13"))

    (tmp_path / "a").write_bytes(pickle.dumps({b"data": Rot()}, protocol=2))
    with pytest.raises(ValueError, match="only latin1"):
        cifar10.read_batch(tmp_path / "a")
    (tmp_path / "b").write_bytes(pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, protocol=2))
    with pytest.raises(ValueError, match=r"uint8 array \(N, 3072\)"):
        cifar10.read_batch(tmp_path / "b")
    (tmp_path / "c").write_bytes(pickle.dumps([1, 2], protocol=2))
    with pytest.raises(ValueError, match="not a CIFAR-10 batch"):
        cifar10.read_batch(tmp_path / "c")


def test_missing_files_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="lacks data_batch_1.*generate_cifar10"):
        cifar10.read_cifar10(tmp_path)


def test_pillow_transform_matches_the_seed_shapes(root):
    images, labels = cifar10.read_cifar10(root)
    ds = cifar10.ImageDataset(images, labels, cifar10.PillowResizeCrop(48, 32))
    x, y = ds[3]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1 and y == labels[3]
    flat = np.full((32, 32, 3), 77, np.uint8)
    assert torch.allclose(cifar10.PillowResizeCrop()(flat), torch.full((3, 32, 32), 77 / 255))


def test_batched_resize_crop_equals_upsample_then_crop():
    from fastloops_helpers.load.crop_window import ResizeCenterCrop

    x = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    ref = torch.nn.functional.interpolate(x.float(), size=(48, 48), mode="bilinear", align_corners=False)
    got = ResizeCenterCrop(32, 48, 32)(x)
    assert got.dtype == torch.uint8 and got.shape == (4, 3, 32, 32)
    assert (got.float() - ref[..., 8:40, 8:40].round()).abs().max() <= 1
    # and it serves the same pictures as the per-sample Pillow path, up to the two libraries' rounding
    images = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    pil = torch.stack([cifar10.PillowResizeCrop()(im) for im in images]) * 255
    batched = ResizeCenterCrop()(torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()).float()
    assert (batched - pil).abs().mean() < 3


@pytest.mark.parametrize("side,resize,crop", [(32, 48, 32), (32, 40, 32), (64, 48, 32), (31, 47, 30), (224, 256, 224)])
def test_resize_crop_reads_only_the_window_and_samples_the_full_resize(side, resize, crop):
    from fastloops_helpers.load.crop_window import ResizeCenterCrop

    x = torch.randint(0, 256, (2, 3, side, side), dtype=torch.uint8)
    top = int(round((resize - crop) / 2))
    ref = torch.nn.functional.interpolate(x.float(), size=(resize, resize), mode="bilinear", align_corners=False)
    ref = ref[..., top : top + crop, top : top + crop]
    rc = ResizeCenterCrop(side, resize, crop)
    assert torch.allclose(rc(x.float()), ref, atol=1e-3)  # float path: the same sample positions
    assert (rc(x).float() - ref.round()).abs().max() <= 1  # uint8 kernel: rounding only
    assert torch.equal(rc(x[0]), rc(x)[0])
    if (side, resize, crop) == (32, 48, 32):
        assert rc.stop - rc.start == 23  # the crop reads 23 of the 32 rows, not all of them
