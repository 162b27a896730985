import copy
import json

import pytest
import torch

from fastloops_helpers.data import memmap
from fastloops_helpers.data.memmap import ImageData


class Tiny(torch.utils.data.Dataset):
    """Seven distinct uint8 'images' of one shape, labelled i % 3."""

    def __init__(self, n=7, shape=(3, 5, 4), dtype=torch.uint8, ragged=False):
        g = torch.Generator().manual_seed(0)
        self.items = [torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).to(dtype) for _ in range(n)]
        if ragged:
            self.items[-1] = self.items[-1][:, :-1]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i], i % 3


@pytest.mark.parametrize("backend", memmap.BACKENDS)
def test_write_then_load_round_trips_every_backend(tmp_path, backend, capsys):
    ds = Tiny()
    data = memmap.write_memmap(ds, tmp_path / backend, backend=backend, batch_size=3)
    assert f"writing {backend} memmap" in capsys.readouterr().err  # progress is shown
    again = memmap.load_memmap(tmp_path / backend)
    for d in (data, again):
        assert isinstance(d, ImageData) and d.batch_size == torch.Size([7])
        assert torch.equal(d.images, torch.stack(ds.items)) and d.labels.tolist() == [i % 3 for i in range(7)]
    batch = again[torch.tensor([5, 0, 2])]
    assert isinstance(batch, ImageData) and torch.equal(batch.images[0], ds.items[5])
    assert batch.labels.tolist() == [2, 0, 2]
    assert memmap.nbytes(tmp_path / backend) == 7 * 60 + 7 * 8


def test_precompute_reuses_a_current_copy_and_rewrites_a_stale_one(tmp_path):
    ds = Tiny()
    memmap.precompute(ds, tmp_path, key={"size": (5, 4)}, desc="first")
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    before = {p: p.stat().st_mtime_ns for p in files}
    data = memmap.precompute(ds, tmp_path, key={"size": (5, 4)})  # a tuple key matches its JSON list form
    assert torch.equal(data.images, torch.stack(ds.items))
    assert {p: p.stat().st_mtime_ns for p in files} == before
    memmap.precompute(Tiny(n=4), tmp_path, key={"size": (5, 4)})
    assert memmap.read_meta(tmp_path)["n"] == 4
    memmap.precompute(Tiny(n=4), tmp_path, backend="numpy", key={"size": (5, 4)})
    assert memmap.read_meta(tmp_path)["backend"] == "numpy" and len(memmap.load_memmap(tmp_path)) == 4


def test_missing_folder_or_metadata_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no memmap data set in .*write_memmap"):
        memmap.load_memmap(tmp_path / "nowhere")


@pytest.mark.parametrize("backend", memmap.BACKENDS)
def test_truncated_or_missing_files_are_clear_errors(tmp_path, backend):
    memmap.write_memmap(Tiny(), tmp_path, backend=backend)
    (tmp_path / memmap.FILES[backend][1]).unlink()
    with pytest.raises(FileNotFoundError, match="labels.* is missing"):
        memmap.load_memmap(tmp_path)
    images = tmp_path / memmap.FILES[backend][0]
    images.write_bytes(images.read_bytes()[:-10])
    with pytest.raises(ValueError, match="holds 410 bytes but .* says 7 items \\(420 bytes\\).*truncated"):
        memmap.load_memmap(tmp_path)


def test_metadata_that_disagrees_with_the_files_is_an_error(tmp_path):
    memmap.write_memmap(Tiny(), tmp_path, backend="torch")
    meta = json.loads((tmp_path / memmap.META).read_text())
    (tmp_path / memmap.META).write_text(json.dumps(dict(meta, n=8)))
    with pytest.raises(ValueError, match="says 8 items"):
        memmap.load_memmap(tmp_path)
    (tmp_path / memmap.META).write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        memmap.load_memmap(tmp_path)


def test_bad_inputs_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="backend must be one of numpy, torch, tensordict, got 'hdf5'"):
        memmap.write_memmap(Tiny(), tmp_path / "a", backend="hdf5")
    with pytest.raises(TypeError, match="uint8 tensor"):
        memmap.write_memmap(Tiny(dtype=torch.float32), tmp_path / "b")
    with pytest.raises(ValueError, match="image 6 has shape \\(3, 4, 4\\), the first had \\(3, 5, 4\\)"):
        memmap.write_memmap(Tiny(ragged=True), tmp_path / "c", batch_size=6)
    with pytest.raises(ValueError, match="empty"):
        memmap.write_memmap(Tiny(n=0), tmp_path / "d")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds no memmap written here"):
        memmap.write_memmap(Tiny(), tmp_path / "e")
    assert (tmp_path / "e" / "keep.txt").exists()


def test_loaded_data_is_mapped_not_read(tmp_path):
    memmap.write_memmap(Tiny(n=3), tmp_path, backend="tensordict")
    data = memmap.load_memmap(tmp_path)
    assert data.images.filename is not None  # a MemoryMappedTensor backed by the file, not a copy in RAM


def test_memmap_dataset_gathers_a_batch_and_indexes_one_item(tmp_path):
    data = memmap.write_memmap(Tiny(), tmp_path)
    ds = memmap.MemmapDataset(data)
    batch = ds.__getitems__([6, 1])
    assert isinstance(batch, ImageData) and batch.labels.tolist() == [0, 1]
    assert torch.equal(batch.images, data.images[[6, 1]])
    image, label = ds[3]
    assert len(ds) == 7 and torch.equal(image, data.images[3]) and int(label) == 0


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_image_data_batches_come_back_from_dataloader_workers(tmp_path, context):
    """The class is built on first use, in each process: pickle must find the same one by its name."""
    data = memmap.write_memmap(Tiny(), tmp_path, backend="numpy")
    loader = torch.utils.data.DataLoader(
        memmap.MemmapDataset(data),
        batch_size=3,
        num_workers=1,
        multiprocessing_context=context,
        collate_fn=copy.copy,
        timeout=60,  # a batch that cannot travel back is an error, not a hang
    )
    batches = list(loader)  # each an ImageData made in the worker by __getitems__, pickled back
    assert [type(b) for b in batches] == [ImageData] * 3 and ImageData is memmap.ImageData
    assert torch.equal(torch.cat([b.labels for b in batches]), data.labels)
    assert torch.equal(torch.cat([b.images for b in batches]), data.images)


def test_memmap_loaders_give_the_dataloader_batches(tmp_path):
    """The benchmark's two sides produce the same normalised float batches (val: bit for bit)."""
    from fastloops_helpers.data.jpeg_folder import ImageFolder, write_synthetic_imagefolder
    from fastloops_helpers.experiments import imagefolder as B
    from fastloops_helpers.load import transforms as T

    folder = write_synthetic_imagefolder(tmp_path / "if", 4, 5, size=260)
    for split in B.SPLITS:
        pre = B.sample_transform(split).precompute
        data = memmap.write_memmap(ImageFolder(folder / split, transform=pre), tmp_path / split)
        for workers, threads in ((0, 1), (1, 1), (0, 2)):
            batches = list(B.memmap_loader(data, split, batch_size=2, num_workers=workers, num_threads=threads))
            reference = list(B.dataloader(folder, split, batch_size=2, num_workers=0))
            assert [x.shape for x, _ in batches] == [x.shape for x, _ in reference]
            assert all(x.dtype == torch.float32 and x.shape[1:] == (3, B.CROP, B.CROP) for x, _ in batches)
            if split == "val":  # no randomness: the very same batches
                for (x, y), (rx, ry) in zip(batches, reference):
                    assert torch.equal(x, rx) and torch.equal(y, ry)
            else:  # random crops and flips: same labels in some order, values of normalised uint8 pixels
                labels = sorted(int(v) for _, y in batches for v in y)
                assert labels == sorted(int(v) for _, y in reference for v in y)
                low, high = (
                    T.normalize(torch.zeros(1, 3, 1, 1, dtype=torch.uint8)),
                    T.normalize(torch.full((1, 3, 1, 1), 255, dtype=torch.uint8)),
                )
                for x, _ in batches:
                    assert ((x >= low - 1e-6) & (x <= high + 1e-6)).all()
