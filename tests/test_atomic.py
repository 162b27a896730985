"""Every writer writes aside and renames: an interrupted rewrite leaves the previous complete copy loadable."""

import pytest
import torch

from fastloops_helpers.atomic import atomic_write_text, staged
from fastloops_helpers.data import memmap


class Images(torch.utils.data.Dataset):
    """`n` uint8 'images' filled with `fill`; item `broken_at` raises, as a corrupt JPEG would."""

    def __init__(self, n=6, fill=1, broken_at=None):
        self.n, self.fill, self.broken_at = n, fill, broken_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.broken_at:
            raise OSError(f"image {i} is truncated")
        return torch.full((3, 4, 4), self.fill, dtype=torch.uint8), i


@pytest.mark.parametrize("backend", memmap.BACKENDS)
def test_a_failed_memmap_rewrite_keeps_the_previous_copy(tmp_path, backend):
    root = tmp_path / "set"
    memmap.write_memmap(Images(fill=1), root, backend=backend, batch_size=2)
    with pytest.raises(OSError, match="image 4 is truncated"):
        memmap.write_memmap(Images(fill=2, broken_at=4), root, backend=backend, batch_size=2)
    again = memmap.load_memmap(root)
    assert again.images.unique().tolist() == [1] and len(again) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]  # no staged leftovers


def test_a_completed_rewrite_replaces_the_copy(tmp_path):
    root = tmp_path / "set"
    memmap.write_memmap(Images(fill=1), root, backend="numpy")
    memmap.write_memmap(Images(n=3, fill=7), root, backend="numpy")
    again = memmap.load_memmap(root)
    assert len(again) == 3 and again.images.unique().tolist() == [7]


def test_staged_file_is_invisible_until_complete(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_text(path, "old")
    with pytest.raises(KeyboardInterrupt):
        with staged(path) as tmp:
            tmp.write_text("half")
            assert path.read_text() == "old"
            raise KeyboardInterrupt
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
