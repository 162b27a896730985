import numpy as np
import pytest
import torch

from fastloops_helpers.data import decoders, storage


def test_storage_reads_the_whole_file_both_ways(tmp_path):
    path = storage.write_file(tmp_path / "f.bin", 9)  # not a multiple of the 4 MiB chunk
    assert path.stat().st_size == 9 * 2**20
    assert storage.read_cached(path) > 0
    assert storage.read_cached(path, repeat=1, chunk=1 << 16) > 0  # many smaller reads of the same bytes
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        storage.read_cached(path, chunk=0)
    rate, method = storage.read_cold(path)
    assert rate > 0 and method in (
        "O_DIRECT",
        "posix_fadvise(DONTNEED), then a plain read",
        "page cache (no way to bypass it here)",
    )


def test_every_found_decoder_returns_rgb_close_to_pillow():
    found, missing = decoders.find_decoders()
    assert "Pillow" in found and set(found) | set(missing) == set(decoders.CANDIDATES)
    blob = decoders.encode_jpegs(1, 40)[0]
    ref = found["Pillow"](blob)
    assert ref.shape == (40, 40, 3) and ref.dtype == np.uint8
    for name, decode in found.items():
        mean, worst = decoders.agreement(ref, np.asarray(decode(blob)))
        assert mean < 1.0 and worst <= 32, name
    assert decoders.images_per_second(found["Pillow"], [blob], repeat=1) > 0


def test_agreement_rejects_different_shapes():
    with pytest.raises(ValueError, match="decoded shapes differ"):
        decoders.agreement(np.zeros((2, 2, 3), np.uint8), np.zeros((2, 3, 3), np.uint8))


def test_numpy_torch_sharing_as_the_seed_says():
    a = np.zeros(3, np.float32)
    shared, copied = torch.from_numpy(a), torch.tensor(a)
    a[0] = 5
    assert shared[0] == 5 and copied[0] == 0


def test_a_slowed_decoder_factory_slows_the_decoder_it_returns():
    """Each factory returns a named function, not a lambda: notebook 08's liveness check slows what it times."""
    import time

    from fastloops_book.instruments import slowdown

    blob = decoders.encode_jpegs(1, 16)[0]
    original = decoders._pillow.__code__
    try:
        slowdown.slow(decoders._pillow, seconds=0.05)
        decode = decoders.find_decoders()[0]["Pillow"]
        start = time.perf_counter()
        assert decode(blob).shape == (16, 16, 3)
        assert time.perf_counter() - start >= 0.05
    finally:
        decoders._pillow.__code__ = original
