import subprocess
import sys

import numpy as np
import pytest
import torch

from fastloops_helpers.data import ffcv_io

pytestmark = pytest.mark.skipif(not ffcv_io.have_ffcv(), reason="ffcv is not importable here")


def _rows(t):
    return sorted(map(tuple, np.asarray(t).reshape(len(t), -1).tolist()))


@pytest.mark.parametrize("order", ["random", "quasi_random"])  # the seed's two orders
def test_table_round_trip_yields_what_was_written(tmp_path, order):
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 9, (300, 7)).astype(np.float32), rng.integers(0, 9, 300)
    path = ffcv_io.write_table_beton(tmp_path / "t.beton", X, y)
    loader = ffcv_io.table_loader(path, batch_size=64, order=order, drop_last=False)
    xs, ys = [], []
    for xb, yb in loader:
        assert xb.dtype == torch.float32 and xb.shape[1:] == (7,) and yb.dtype == torch.int64 and yb.ndim == 1
        xs.append(xb.clone())  # FFCV reuses its buffers between batches
        ys.append(yb.clone())
    got = np.concatenate([torch.cat(xs).numpy(), torch.cat(ys).numpy()[:, None]], 1)
    assert _rows(got) == _rows(np.concatenate([X, y[:, None]], 1))


def test_image_round_trip_and_center_crop(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    images[:, 8:24, 8:24] = (np.arange(40, dtype=np.uint8) * 5)[:, None, None, None]  # a flat centre per image
    labels = np.arange(40) % 10
    path = ffcv_io.write_image_beton(tmp_path / "c.beton", images, labels)
    seen = {}
    for xb, yb in ffcv_io.image_loader(path, batch_size=8, size=8, ratio=0.25, order="random"):
        assert xb.shape == (8, 3, 8, 8) and xb.dtype == torch.uint8
        for x, y in zip(xb, yb):
            seen[int(x[0, 4, 4])] = int(y)
    # the 8x8 centre crop lies inside the flat square, so each image's value identifies it
    assert seen == {i * 5: i % 10 for i in range(40)}


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(ValueError, match="uint8 \\(N, H, W, 3\\)"):
        ffcv_io.write_image_beton(tmp_path / "x.beton", np.zeros((2, 3, 32, 32), np.uint8), np.zeros(2))
    with pytest.raises(ValueError, match="differ in length"):
        ffcv_io.write_table_beton(tmp_path / "y.beton", np.zeros((3, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="order must be one of"):
        ffcv_io.table_loader(tmp_path / "y.beton", order="shuffled")


def test_missing_ffcv_message_says_how_to_add_it():
    assert "pip install ffcv" in ffcv_io.MISSING and "libturbojpeg" in ffcv_io.MISSING


def test_batches_hand_out_the_loaders_batches_and_close_its_thread_early(tmp_path):
    X, y = np.arange(60, dtype=np.float32).reshape(30, 2), np.arange(30) % 3
    path = ffcv_io.write_table_beton(tmp_path / "b.beton", X, y)
    loader = ffcv_io.table_loader(path, batch_size=8, order="sequential", drop_last=True)
    batches = ffcv_io.Batches(loader)
    assert len(batches) == len(loader) == 3
    for _ in range(2):  # a fresh iterator each epoch
        got = [xb.clone() for xb, _ in batches]
        assert torch.equal(torch.cat(got), torch.from_numpy(X[:24]))
    it = iter(batches)
    next(it)
    reader = it.gi_frame.f_locals["batches"]  # FFCV's epoch iterator inside the generator
    it.close()  # the loop leaves early
    assert reader.terminate_event.is_set()  # FFCV's close() stops its reader thread with this event


def test_loader_orders_read_ffcvs_own_quasi_random_order_and_the_storage_pages(tmp_path):
    n, floats = 1024, 4096  # 16 KiB rows: 512 per 8 MiB page, 2 pages
    X = np.zeros((n, floats), np.float32)
    X[:, 0] = np.arange(n)
    path = ffcv_io.write_table_beton(tmp_path / "q.beton", X, np.arange(n) % 10)
    orders, pages = ffcv_io.loader_orders(path, batch_size=1, epochs=2, seed=0)
    assert [sorted(o.tolist()) for o in orders] == [list(range(n))] * 2  # each epoch a permutation
    assert not np.array_equal(orders[0], orders[1])  # a new order per epoch, not the file's order
    np.testing.assert_array_equal(pages - pages.min(), np.arange(n) // 512)  # runs of 512 rows per page
    # batch_size 1 keeps 2 pages open: both are open from the start, so the first 256 samples mix both pages
    assert len(np.unique(pages[orders[0][:256]])) == 2


def test_only_numbas_finalizer_keyerror_is_dropped_from_unraisable_exceptions():
    from types import SimpleNamespace

    from fastloops_helpers.data.ffcv_io import _numba_finalizer_noise

    seen = []
    hook = _numba_finalizer_noise(seen.append)

    def raised_in(filename, name, exc):
        namespace = {}
        exec(compile(f"def {name}():\n    raise exc\n", filename, "exec"), {"exc": exc}, namespace)
        try:
            namespace[name]()
        except Exception as e:
            return SimpleNamespace(exc_type=type(e), exc_value=e, exc_traceback=e.__traceback__, object=None)

    hook(raised_in("/site-packages/numba/core/dispatcher.py", "finalizer", KeyError("overload")))
    assert seen == []
    for other in [
        raised_in("/site-packages/numba/core/dispatcher.py", "finalizer", ValueError("x")),
        raised_in("/site-packages/numba/core/dispatcher.py", "other", KeyError("x")),
        raised_in("/project/mine.py", "finalizer", KeyError("x")),
    ]:
        hook(other)
    assert len(seen) == 3


def test_importing_ffcv_making_its_loaders_and_running_their_epochs_keep_the_loops_thread_count(tmp_path):
    # a fresh interpreter: this one imported ffcv when the module was collected
    code = f"""
import numpy as np, torch
torch.set_num_threads(3)
from fastloops_helpers.data import ffcv_io
assert ffcv_io.have_ffcv()  # the import alone would set 1
after_import = torch.get_num_threads()
path = ffcv_io.write_table_beton({str(tmp_path / "t.beton")!r}, np.zeros((64, 2), np.float32), np.zeros(64))
for _ in ffcv_io.Batches(ffcv_io.table_loader(path, 8, num_workers=2)):  # FFCV alone would set 2
    during = torch.get_num_threads()
print(after_import, during, torch.get_num_threads())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["3", "3", "3"]
