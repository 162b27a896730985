import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from fastloops_helpers.data import broken
from fastloops_helpers.data.jpeg_folder import write_synthetic_imagefolder
from fastloops_helpers.teach import worker_data


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = write_synthetic_imagefolder(tmp_path_factory.mktemp("img") / "set", 6, 2, size=48)
    good = sorted((root / "train" / "ants").glob("*.jpg"))[0]
    paths = broken.plant_broken(root / "train" / "bees", good)
    return root / "train", {p.name for p in paths}


@pytest.mark.parametrize("num_workers", [0, 2])
def test_drops_exactly_the_planted_files_and_names_them(planted, num_workers, capsys):
    root, names = planted
    ds = broken.SafeImageFolder(root, transform=worker_data.ResizeToTensor(16))
    loader = DataLoader(ds, batch_size=3, num_workers=num_workers, collate_fn=broken.collate_drop_broken)
    report = broken.BrokenReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batches = list(report.watch(loader))
    assert sum(len(y) for _, y in batches) == 6  # every good image, none twice
    assert sorted(p.split("/")[-1] for p in report.dropped) == sorted(names)
    # 9 files sort as 3 ants, 3 good bees, then the 3 broken ones: the last batch is all broken
    assert report.empty_batches == 1 and report.batches == 2
    out = capsys.readouterr().out
    assert "dropped 3 broken sample(s): broken_empty.jpg, broken_text.jpg, broken_truncated.jpg" in out
    assert "1 all-broken batch(es) skipped" in out


def test_dataset_warns_with_the_file_name(planted):
    root, _ = planted
    ds = broken.SafeImageFolder(root)
    index = [i for i, (p, _) in enumerate(ds.samples) if p.endswith("broken_truncated.jpg")][0]
    with pytest.warns(UserWarning, match=r"broken sample .*broken_truncated\.jpg: OSError"):
        sample = ds[index]
    assert isinstance(sample, broken.Broken)


def test_collate_handles_all_broken_and_clean_batches():
    batch, dropped = broken.collate_drop_broken([broken.Broken("a.jpg", "x"), broken.Broken("b.jpg", "y")])
    assert batch is None and dropped == ["a.jpg", "b.jpg"]
    batch, dropped = broken.collate_drop_broken([(torch.ones(2), 1), (torch.zeros(2), 0)])
    assert dropped == [] and batch[0].shape == (2, 2) and batch[1].tolist() == [1, 0]
    report = broken.BrokenReport(verbose=False)
    assert list(report.watch([(batch, [])])) == [batch] and report.report() == "epoch done: no broken samples"


def test_worker_memory_datasets_agree_and_memmap_reopens(tmp_path):
    rows = worker_data.make_rows(1, dim=8)
    path = tmp_path / "rows.f32"
    rows.tofile(path)
    sets = [worker_data.ListRows(rows), worker_data.ArrayRows(rows), worker_data.MemmapRows(path, 8)]
    for ds in sets:
        assert len(ds) == len(rows) and np.array_equal(ds[5].numpy(), rows[5])
    import pickle

    assert len(pickle.dumps(sets[2])) < 1000  # ships the path, not the data
    result = worker_data.worker_memory(sets[1], num_workers=0, batch_size=1024)
    assert result["workers_uss_mb"] == 0 and result["total_pss_mb"] > 0


def test_owned_rng_repeats_across_workers_and_seed_worker_fixes_it():
    assert worker_data.duplicated_draws(worker_data.NoisyIndex(16), 2) == 8
    assert worker_data.duplicated_draws(worker_data.NoisyIndex(16), 2, worker_data.seed_worker) == 0
    assert worker_data.duplicated_draws(worker_data.GlobalNoisyIndex(16), 2) == 0


def test_the_seeds_collate_drops_none_silently_and_returns_none_when_all_are_broken():
    image = torch.zeros(3, 2, 2, dtype=torch.uint8)
    images, labels = worker_data.collate_drop_none([(image, 0), (None, 1), (image, 2)])
    assert images.shape == (2, 3, 2, 2) and labels.tolist() == [0, 2]
    assert worker_data.collate_drop_none([(None, 0), (None, 1)]) is None
