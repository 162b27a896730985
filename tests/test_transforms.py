import numpy as np
import pytest
import torch
from PIL import Image

from fastloops_helpers.load import transforms as T

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _batch(n=6, h=20, w=24, dtype=torch.uint8, device="cpu"):
    x = torch.randint(0, 256, (n, 3, h, w), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    return x.to(dtype=dtype, device=device)


def _reference_normalize(img, mean, std, unit):
    """The per-sample definition: ToTensor's division, then Normalize, channel by channel."""
    out = torch.empty(img.shape, dtype=torch.float64)
    for c in range(img.shape[0]):
        out[c] = (img[c].double() / unit - mean[c]) / std[c]
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_normalize_matches_the_per_sample_definition(device, dtype):
    x = _batch(dtype=dtype, device=device)
    if dtype == torch.float32:
        x = x / 255
    out = T.normalize(x)
    assert out.dtype == torch.float32 and out.device.type == device and out.shape == x.shape
    unit = 255.0 if dtype == torch.uint8 else 1.0
    for i in range(len(x)):
        ref = _reference_normalize(x[i].cpu(), T.IMAGENET_MEAN, T.IMAGENET_STD, unit)
        torch.testing.assert_close(out[i].cpu().double(), ref, atol=1e-5, rtol=1e-6)
    torch.testing.assert_close(T.Normalize()(x[0]), out[0])  # one (C, H, W) image works too


def test_normalize_rejects_wrong_channels_and_shapes():
    with pytest.raises(ValueError, match="one value per channel \\(3\\), got 2 and 2"):
        T.normalize(_batch(), mean=(0.5, 0.5), std=(0.5, 0.5))
    with pytest.raises(ValueError, match="got shape \\(4, 4\\)"):
        T.normalize(torch.zeros(4, 4))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_random_crop_and_flip_match_a_per_sample_loop(device, dtype):
    x, size = _batch(n=32, dtype=dtype, device=device), 11
    out = T.random_crop(x, size, hflip_p=0.5, generator=torch.Generator().manual_seed(7))
    # the reference draws the same numbers in the same order, then slices one sample at a time
    g = torch.Generator().manual_seed(7)
    tops, lefts = T.crop_offsets(len(x), x.shape[2], x.shape[3], size, g)
    flips = torch.rand(len(x), generator=g) < 0.5
    for i in range(len(x)):
        ref = x[i, :, tops[i] : tops[i] + size, lefts[i] : lefts[i] + size]
        assert torch.equal(out[i], ref.flip(-1) if flips[i] else ref), i
    assert out.shape == (32, 3, size, size) and out.dtype == dtype
    assert len(set(zip(tops.tolist(), lefts.tolist()))) > 10  # offsets differ per sample
    assert 0 < int(flips.sum()) < 32


def test_random_crop_of_one_image_and_the_module():
    x = _batch()[0]
    out = T.RandomCrop(8, generator=torch.Generator().manual_seed(1))(x)
    tops, lefts = T.crop_offsets(1, 20, 24, 8, torch.Generator().manual_seed(1))
    assert torch.equal(out, x[:, tops[0] : tops[0] + 8, lefts[0] : lefts[0] + 8])
    with pytest.raises(ValueError, match="crop size 21 is larger than the image \\(20 x 24\\)"):
        T.random_crop(x, 21)


def test_full_size_crop_is_the_identity():
    x = _batch(h=10, w=10)
    assert torch.equal(T.random_crop(x, 10), x)


@pytest.mark.parametrize("device", DEVICES)
def test_random_hflip_flips_each_sample_independently(device):
    x = _batch(n=64, device=device)
    out = T.RandomHFlip(0.5, generator=torch.Generator().manual_seed(3))(x)
    flipped = [torch.equal(out[i], x[i].flip(-1)) for i in range(len(x))]
    kept = [torch.equal(out[i], x[i]) for i in range(len(x))]
    assert all(f or k for f, k in zip(flipped, kept))
    assert 10 < sum(flipped) < 54
    assert torch.equal(T.random_hflip(x, p=0.0), x) and torch.equal(T.random_hflip(x, p=1.0), x.flip(-1))
    assert torch.equal(T.random_hflip(x[0], p=1.0), x[0].flip(-1))


def test_center_crop_rounds_like_torchvision():
    x = torch.arange(7 * 9).view(1, 1, 7, 9)
    out = T.center_crop(x, 4)
    assert torch.equal(out, x[..., 2:6, 2:6])  # round(1.5) = 2, round(2.5) = 2
    with pytest.raises(ValueError, match="crop size 8 is larger"):
        T.center_crop(x, 8)


@pytest.mark.parametrize("device", DEVICES)
def test_resize_shapes_dtypes_and_agreement_with_pillow(device):
    rng = np.random.default_rng(0)
    arr = np.asarray(Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((80, 60)))
    x = torch.from_numpy(arr.copy()).permute(2, 0, 1).to(device)
    small = T.resize(x, 30)
    assert small.shape == (3, 30, 40) and small.dtype == torch.uint8
    assert T.resize(x.unsqueeze(0).float(), (16, 16)).shape == (1, 3, 16, 16)
    ref = T.to_tensor(T.pil_resize(Image.fromarray(arr), 30))
    assert ref.shape == small.shape
    assert (small.cpu().float() - ref.float()).abs().mean() < 2.0  # both are antialiased bilinear


def test_to_tensor_and_pil_resize():
    img = Image.new("RGB", (10, 4), (1, 2, 3))
    t = T.to_tensor(img)
    assert t.shape == (3, 4, 10) and t.dtype == torch.uint8 and t[:, 0, 0].tolist() == [1, 2, 3]
    assert T.pil_resize(img, 8).size == (20, 8) and T.pil_resize(img, (5, 6)).size == (6, 5)


def _photo(w=300, h=260, seed=0):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


def test_val_sample_transform_is_precompute_then_normalize():
    tf, img = T.ValSampleTransform(resize=64, crop=56), _photo()
    pre = tf.precompute(img)
    assert pre.dtype == torch.uint8 and pre.shape == (3, 56, 56)
    assert torch.equal(tf(img), T.normalize(pre)) and torch.equal(tf.per_epoch(pre), T.normalize(pre))
    resized = np.asarray(img.resize((73, 64), Image.BILINEAR))  # shorter side 64, aspect kept
    ref = _reference_normalize(
        torch.from_numpy(resized.copy()).permute(2, 0, 1)[:, 4:60, 8:64], T.IMAGENET_MEAN, T.IMAGENET_STD, 255.0
    )
    torch.testing.assert_close(tf(img).double(), ref, atol=1e-5, rtol=1e-6)


def test_train_sample_transform_equals_the_batched_path_for_the_same_draws():
    tf, img = T.TrainSampleTransform(resize=64, crop=56), _photo()
    pre = tf.precompute(img)
    assert pre.shape == (3, 64, 64)
    torch.manual_seed(5)
    one = tf(img)
    torch.manual_seed(5)
    batched = T.normalize(T.random_crop(pre.unsqueeze(0), 56, hflip_p=0.5))[0]
    assert one.shape == (3, 56, 56) and one.dtype == torch.float32
    assert torch.equal(one, batched)
    torch.manual_seed(5)
    assert torch.equal(tf.per_epoch(pre), one)  # __call__ is precompute, then the per-epoch part


def test_the_gpu_gather_path_equals_the_cpu_copy_path():
    x = _batch(n=16)
    g = torch.Generator().manual_seed(2)
    tops, lefts = T.crop_offsets(16, 20, 24, 9, g)
    flips = torch.rand(16, generator=g) < 0.5
    assert torch.equal(T._crop_gather(x, tops, lefts, 9, flips), T._crop_copy(x, tops, lefts, 9, flips))


# ------------------------------------------------------- the fused, threaded pipeline


@pytest.mark.parametrize("num_threads", [1, 3])
def test_crop_flip_normalize_equals_crop_then_normalize_for_the_same_draws(num_threads):
    x, size = _batch(n=7, h=20, w=24), 11
    fused = T.CropFlipNormalize(size, 0.5, num_threads=num_threads, generator=torch.Generator().manual_seed(3))(x)
    ref = T.normalize(T.random_crop(x, size, 0.5, generator=torch.Generator().manual_seed(3)))
    assert fused.shape == (7, 3, size, size) and fused.dtype == torch.float32
    assert torch.equal(fused, ref)


def test_crop_flip_normalize_without_crop_is_normalize_and_takes_one_image():
    x = _batch(n=5)
    assert torch.equal(T.CropFlipNormalize(num_threads=2)(x), T.normalize(x))
    assert torch.equal(T.CropFlipNormalize()(x[0]), T.normalize(x[0]))
    with pytest.raises(ValueError, match="num_threads must be >= 1, got 0"):
        T.CropFlipNormalize(num_threads=0)


def test_on_images_takes_dicts_pairs_and_objects():
    from fastloops_helpers.data.memmap import ImageData

    x, y = _batch(n=4), torch.arange(4)
    double = T.OnImages(lambda images: images * 2)
    for batch in ({"images": x, "labels": y}, (x, y), ImageData(images=x, labels=y, batch_size=[4])):
        images, labels = double(batch)
        assert torch.equal(images, x * 2) and torch.equal(labels, y)
