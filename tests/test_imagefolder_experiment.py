"""experiments.imagefolder on a tiny synthetic folder: the loaders apply the batched transform, both sides agree.

Notebook 09's own sweep, rounds and stage costs are checked by asserts in its cells (run by nbval and the bench).
"""

import pytest
import torch

from fastloops_helpers.data import memmap
from fastloops_helpers.data.jpeg_folder import ImageFolder, write_synthetic_imagefolder
from fastloops_helpers.experiments import imagefolder as exp


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("imf") / "folder"
    write_synthetic_imagefolder(root, n_train=8, n_val=6, seed=0, size=120)
    out = {}
    for split in exp.SPLITS:
        ds = ImageFolder(root / split, transform=exp.sample_transform(split).precompute)
        out[split] = memmap.write_memmap(ds, root.parent / f"mm-{split}", backend="numpy")
    return exp.Prepared(root, out["train"], out["val"])


def test_val_memmap_loader_gives_the_dataloaders_batches(tiny):
    dl = list(exp.dataloader(tiny.folder, "val", 4, 0))
    for loader in (exp.memmap_loader(tiny.val, "val", 4), exp.memmap_loader(tiny.val, "val", 4, num_threads=2)):
        mm = list(loader)
        assert len(mm) == len(dl) == 2
        for (a, la), (b, lb) in zip(dl, mm):
            assert torch.equal(a, b) and torch.equal(la, lb)


@pytest.mark.parametrize("num_workers, num_threads", [(0, 1), (0, 2), (1, 1)])
def test_train_loaders_yield_normalised_crops_of_every_image(tiny, num_workers, num_threads):
    loader = exp.memmap_loader(tiny.train, "train", 3, num_workers, num_threads)
    batches = list(loader)
    labels = torch.cat([y for _, y in batches])
    assert sorted(labels.tolist()) == sorted(tiny.train.labels.tolist())  # every image once per epoch
    x = batches[0][0]
    assert x.shape[1:] == (3, exp.CROP, exp.CROP) and x.dtype == torch.float32 and x.min() < 0


def test_images_per_second_counts_images_of_pairs_and_tensorclass_batches(tiny):
    timed = exp.images_per_second(exp.memmap_loader(tiny.val, "val", 4), repeat=2, warmup=0)
    assert timed["images_per_s"] == pytest.approx(6 / timed["epoch_s"]) and timed["epoch_s_p95"] >= timed["epoch_s"]
    batch = memmap.ImageData(images=tiny.val.images[:3], labels=tiny.val.labels[:3], batch_size=[3])
    assert exp.batch_images(batch) == 3 and exp.batch_images((tiny.val.images[:2], tiny.val.labels[:2])) == 2
