import numpy as np
import pytest

from fastloops_helpers.data import ffcv_io
from fastloops_helpers.experiments import shuffle

pytestmark = pytest.mark.skipif(not ffcv_io.have_ffcv(), reason="ffcv is not importable here")


def test_ffcv_order_rows_compare_ffcvs_order_with_the_replica_on_the_same_pages(tmp_path):
    n = 2048  # 16 KiB rows: 512 per 8 MiB page, 4 pages
    path, labels = shuffle.write_sorted_beton(tmp_path / "s.beton", n, 16 * 2**10, classes=4)
    np.testing.assert_array_equal(labels, np.repeat(np.arange(4), 512))  # sorted in blocks
    written = path.stat().st_mtime_ns
    assert shuffle.write_sorted_beton(path, n, 16 * 2**10, classes=4)[0].stat().st_mtime_ns == written  # kept
    rows = {r["order"]: r for r in shuffle.ffcv_order_rows(path, labels, [1], epochs=1)}
    assert set(rows) == {"FFCV Loader, QUASI_RANDOM", "replica", "full shuffle"}
    assert all(r["page_size"] == 512 and r["open_pages"] == 2 and r["pages_per_batch"] == 1 for r in rows.values())
    # 2 of the 4 pages open: the first quarter (512 samples) reads 2 pages, in FFCV's order as in the replica's
    assert rows["FFCV Loader, QUASI_RANDOM"]["pages_in_first_quarter"] == 2
    assert rows["replica"]["pages_in_first_quarter"] == 2
    assert rows["full shuffle"]["pages_in_first_quarter"] == 4
