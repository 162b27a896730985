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
    from fastloops_helpers.load.transforms import ResizeCenterCrop

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
    from fastloops_helpers.load.transforms import ResizeCenterCrop

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


def test_load_only_takes_turns_and_counts_every_batch():
    from fastloops_helpers.experiments import cifar as exp

    calls = []

    class Loader:
        def __init__(self, name, batches):
            self.name, self.batches = name, batches

        def __iter__(self):
            calls.append(self.name)
            return iter([(torch.zeros(8, 3), torch.zeros(8))] * self.batches)

    load, rates = exp.load_only({"a": Loader("a", 4), "b": Loader("b", 2)}, 3, 8, torch.device("cpu"))
    assert calls[:2] == ["a", "b"] and sorted(calls[2:4]) == ["a", "b"] and len(calls) == 2 + 3 * 2
    assert [len(r) for r in rates.values()] == [3, 3] and min(min(r) for r in rates.values()) > 0
    assert set(load.index) == {"a", "b"} and (load["samples_per_s"] > 0).all()


def test_step_times_runs_each_loader_in_blocks_that_take_turns():
    from fastloops_helpers.experiments import cifar as exp

    starts = []

    class Loader:
        def __init__(self, name):
            self.name = name

        def __iter__(self):
            starts.append(self.name)
            return iter([(torch.zeros(8, 3), torch.zeros(8))] * 4)

    trained = []
    timed = exp.step_times(
        {"a": Loader("a"), "b": Loader("b")}, lambda: lambda x, y: trained.append(x), 6, torch.device("cpu")
    )
    assert sorted(starts) == ["a"] * 6 + ["b"] * 6  # a fresh iterator per block: nothing prepared in between
    assert len(trained) == 2 * 6 * (exp.STEP_BLOCKS.settle + exp.STEP_BLOCKS.timed)
    assert {k: len(v) for k, v in timed.per_round("steps").items()} == {"a": 6, "b": 6}
    assert len(timed.flat("waits")["a"]) == 6 * exp.STEP_BLOCKS.timed


def test_helpers_loader_serves_the_window_resize_of_every_image(tmp_path):
    from fastloops_helpers.data import memmap
    from fastloops_helpers.experiments import cifar as exp
    from fastloops_helpers.load.transforms import ResizeCenterCrop

    images = np.random.default_rng(0).integers(0, 256, (12, 32, 32, 3), dtype=np.uint8)
    labels = np.arange(12)  # each label names its image
    mm = memmap.write_memmap(cifar10.ImageDataset(images, labels, exp._uint8_hwc), tmp_path / "mm", backend="numpy")
    rc = ResizeCenterCrop(32, 48, 32)
    loader = exp.helpers_loader(mm, 4, torch.device("cpu"), rc, seed=0)
    seen = []
    for x, y in loader:
        assert x.shape == (4, 3, 32, 32) and x.dtype == torch.uint8
        want = rc(torch.from_numpy(images[y.numpy()]).permute(0, 3, 1, 2))
        assert torch.equal(x, want)
        seen += y.tolist()
    assert sorted(seen) == list(range(12))


def test_wrn_factory_builds_fresh_equal_models_of_the_given_size():
    from fastloops_helpers.experiments import cifar as exp

    factory = exp.wrn_factory(10, 1, torch.device("cpu"), seed=3)
    x = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    y = torch.tensor([1, 2])
    a, b = factory(), factory()
    first, second = float(a(x, y)), float(a(x, y))
    assert np.isfinite(first) and first != second  # a's first step changed its weights
    assert float(b(x, y)) == pytest.approx(first)  # a fresh step: the same seed, weights and first loss


class _Sleepy:
    """A loader of `batches` batches of 8 whose every batch takes `seconds` to hand out."""

    def __init__(self, batches, seconds):
        self.batches, self.seconds = batches, seconds

    def __iter__(self):
        import time

        for _ in range(self.batches):
            time.sleep(self.seconds)
            yield torch.zeros(8, 3), torch.zeros(8)


def test_load_only_adds_rounds_for_the_headline_pair_only_within_the_budget():
    from fastloops_helpers.experiments import cifar as exp

    cpu = torch.device("cpu")
    loaders = {"helpers": _Sleepy(2, 0.001), "FFCV": _Sleepy(2, 0.002), "DataLoader": _Sleepy(2, 0.004)}
    _, plain = exp.load_only(loaders, 3, 8, cpu)  # budget 1: exactly the rounds asked for
    assert [len(r) for r in plain.values()] == [3, 3, 3]
    _, wide = exp.load_only(loaders, 6, 8, cpu, budget=3.0, halfwidth=1e-9)  # never narrow enough: budget spent
    assert len({len(r) for r in wide.values()}) == 1 and len(wide["helpers"]) > 6  # every loader, same rounds
    _, narrow = exp.load_only(loaders, 6, 8, cpu, budget=3.0, halfwidth=10.0)  # narrow at once: no extra round
    assert [len(r) for r in narrow.values()] == [6, 6, 6]
    _, no_ffcv = exp.load_only({"helpers": loaders["helpers"]}, 2, 8, cpu, budget=3.0, halfwidth=1e-9)
    assert len(no_ffcv["helpers"]) == 2  # no FFCV here: no headline pair to add rounds for


def test_figures_are_medians_of_per_round_ratios_saved_with_their_intervals():
    import pandas as pd

    from fastloops_helpers import measure
    from fastloops_helpers.book import claims
    from fastloops_helpers.experiments import cifar as exp

    names = ["FFCV", "DataLoader", "helpers"]
    load = pd.DataFrame({"mean": [0.002, 0.02, 0.001], "samples_per_s": [1e4, 1e3, 2e4]}, index=names)
    step = pd.DataFrame({"median": [0.7, 0.8, 0.7], "mean": [0.7, 0.8, 0.7]}, index=names)
    rates = {
        "FFCV": [100.0, 110, 90, 100, 105, 95],
        "DataLoader": [10.0] * 6,
        "helpers": [120.0, 99, 130, 95, 110, 101],
    }
    steps = {"FFCV": [0.7] * 6, "DataLoader": [0.8, 0.7, 0.9, 0.8, 0.8, 0.7], "helpers": [0.7] * 6}
    out = exp.figures({"load": load, "step": step, "wait": load, "rates": rates, "steps": steps})
    helpers_over_ffcv = [h / f for h, f in zip(rates["helpers"], rates["FFCV"])]
    assert {k: out[k] for k in measure.interval_figures("helpers_over_ffcv_load", [1])} == measure.interval_figures(
        "helpers_over_ffcv_load", helpers_over_ffcv
    )
    assert out["helpers_over_ffcv_load_ci_low"] < 1 < out["helpers_over_ffcv_load_ci_high"]  # a tie, not "met"
    target = next(t for t in claims.TARGETS if t.figure == "helpers_over_ffcv_load")
    assert target.verdict(out) == claims.TIE
    for key in ("ffcv_over_dataloader_load", "helpers_over_dataloader_load", "dataloader_step_over_ffcv_step"):
        assert out[key + "_ci_low"] <= out[key] <= out[key + "_ci_high"], key
    without_ffcv = exp.figures(
        {
            "load": load.drop("FFCV"),
            "step": step.drop("FFCV"),
            "wait": load.drop("FFCV"),
            "rates": rates,
            "steps": steps,
        }
    )
    assert "helpers_over_ffcv_load" not in without_ffcv and "helpers_over_dataloader_load_ci_low" in without_ffcv
