"""JPEGs decoded where the step runs (`load/device_decode.py`, `decoders.batch_decoder`): the CPU seam.

On a CPU, Pillow stands in for nvJPEG behind the same contract, so the pipeline's order, labels and pixels can be
checked against the per-sample CPU path here; on a CUDA machine the last test decodes with nvJPEG itself.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from fastloops_helpers import ThreadLoader
from fastloops_helpers.data import decoders
from fastloops_helpers.data.device_decode import DecodeResizeCrop, device_jpeg_loader, read_bytes
from fastloops_helpers.data.jpeg_folder import ImageFolder, write_synthetic_imagefolder
from fastloops_helpers.load import transforms as T


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_synthetic_imagefolder(tmp_path_factory.mktemp("jpegs") / "set", 14, 2, size=160) / "train"


def per_sample(img):
    """The CPU path: Pillow's decode (ImageFolder's loader), then the same resize and centre crop, per sample."""
    return T.center_crop(T.resize(T.to_tensor(img), 256), 224)


def test_the_cpu_path_of_the_batch_decoder_gives_pillows_pixels_as_chw_tensors():
    blobs = decoders.encode_jpegs(3, 40)
    images = decoders.batch_decoder("cpu")([torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs])
    pillow = decoders.CANDIDATES["Pillow"]()
    assert [tuple(x.shape) for x in images] == [(3, 40, 40)] * 3 and all(x.dtype == torch.uint8 for x in images)
    assert all(np.array_equal(x.permute(1, 2, 0).numpy(), pillow(b)) for x, b in zip(images, blobs))


def test_decoding_on_a_gpu_without_torchvision_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision.io", None)  # an import of it raises ImportError
    with pytest.raises(RuntimeError, match="needs torchvision built for this torch"):
        decoders.batch_decoder("cuda")


def test_the_pipeline_gives_each_sample_once_per_epoch_with_the_cpu_paths_pixels(folder):
    reference = ThreadLoader(ImageFolder(folder, transform=per_sample), 4, threads=3, shuffle=True, seed=5)
    pipeline = device_jpeg_loader(folder, 4, "cpu", threads=3, shuffle=True, seed=5)
    by_index = [per_sample(img) for img, _ in ImageFolder(folder)]
    orders = []
    for _ in range(2):  # two epochs: a new order each, every sample once in each
        seen = []
        for (x, y), (rx, ry) in zip(pipeline, reference, strict=True):
            assert x.dtype == torch.uint8 and x.shape[1:] == (3, 224, 224)
            assert torch.equal(x, rx) and torch.equal(y, ry)  # the same pixels and labels as the CPU path
            seen += [next(i for i, ref in enumerate(by_index) if torch.equal(img, ref)) for img in x]
        assert sorted(seen) == list(range(len(by_index)))
        orders.append(seen)
    assert orders[0] != orders[1]


def test_the_collate_reads_bytes_and_puts_the_batch_on_its_device(folder):
    ds = ImageFolder(folder, loader=read_bytes)
    (blob, label), collate = ds[0], DecodeResizeCrop("cpu", resize=64, crop=48)
    assert blob.dtype == torch.uint8 and blob.dim() == 1 and bytes(blob[:2].tolist()) == b"\xff\xd8"  # a JPEG
    images, labels = collate([ds[0], ds[len(ds) - 1]])
    assert images.shape == (2, 3, 48, 48) and labels.tolist() == [label, ds.targets[-1]]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (nvJPEG)")
def test_nvjpeg_decodes_within_jpeg_tolerance_of_pillow(folder):
    pipeline = device_jpeg_loader(folder, 4, "cuda", threads=3, seed=5)
    reference = ThreadLoader(ImageFolder(folder, transform=per_sample), 4, threads=3, seed=5)
    for (x, y), (rx, ry) in zip(pipeline, reference, strict=True):
        assert x.device.type == "cuda" and torch.equal(y.cpu(), ry)
        diff = (x.cpu().short() - rx.short()).abs()
        assert diff.float().mean() < 1.0 and diff.max() <= 32  # notebook 08's tolerance between decoders
