"""fast_collate: the same pixels as per-sample ToTensor + default_collate, in uint8, from any image type."""

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, default_collate

from fastloops_helpers.load.collate import fast_collate
from fastloops_helpers.load.transforms import normalize


def _images(n: int = 5, h: int = 6, w: int = 4) -> torch.Tensor:
    return torch.randint(0, 256, (n, h, w, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def test_same_pixels_as_per_sample_permute_and_default_collate():
    hwc = _images()
    images, labels = fast_collate([(hwc[i], i % 2) for i in range(len(hwc))])
    expected = default_collate([hwc[i].permute(2, 0, 1) for i in range(len(hwc))])
    assert images.dtype == torch.uint8 and images.is_contiguous()
    assert torch.equal(images, expected)
    assert labels.dtype == torch.int64 and labels.tolist() == [0, 1, 0, 1, 0]


def test_normalising_the_batch_equals_normalising_each_sample():
    hwc = _images()
    images, _ = fast_collate([(hwc[i], 0) for i in range(len(hwc))])
    per_sample = default_collate([normalize(hwc[i].permute(2, 0, 1)) for i in range(len(hwc))])
    assert torch.allclose(normalize(images), per_sample, atol=1e-6)


def test_pil_numpy_and_grayscale_images():
    hwc = _images(2).numpy()
    pil = [(Image.fromarray(hwc[0]), 3), (hwc[1], torch.tensor(4))]
    images, labels = fast_collate(pil)
    assert torch.equal(images, torch.from_numpy(hwc).permute(0, 3, 1, 2)) and labels.tolist() == [3, 4]
    gray, _ = fast_collate([(hwc[0, :, :, 0], 0)])
    assert gray.shape == (1, 1, 6, 4) and torch.equal(gray[0, 0], torch.from_numpy(hwc[0, :, :, 0]))


def test_bad_batches_name_the_problem():
    with pytest.raises(ValueError, match="empty"):
        fast_collate([])
    hwc = _images(1)
    with pytest.raises(ValueError, match="sample 1 has shape"):
        fast_collate([(hwc[0], 0), (np.zeros((5, 4, 3), np.uint8), 1)])


def test_works_as_a_dataloader_collate_fn_in_workers():
    hwc = _images(8)
    data = [(hwc[i], i) for i in range(8)]
    loader = DataLoader(data, batch_size=4, num_workers=2, collate_fn=fast_collate)
    images, labels = next(iter(loader))
    assert torch.equal(images, hwc[:4].permute(0, 3, 1, 2)) and labels.tolist() == [0, 1, 2, 3]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_pinned_uint8_batch_normalised_on_cuda_matches_the_cpu():
    hwc = _images()
    images, _ = fast_collate([(hwc[i], 0) for i in range(len(hwc))])
    on_gpu = normalize(images.pin_memory().to("cuda", non_blocking=True))
    assert on_gpu.device.type == "cuda" and torch.allclose(on_gpu.cpu(), normalize(images), atol=1e-5)
