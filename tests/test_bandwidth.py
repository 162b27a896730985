"""The copy-bandwidth experiment (notebook 00): sizes, repeats and threads are arguments; threads are restored."""

import pytest
import torch

from fastloops_helpers import measure
from fastloops_helpers.experiments import bandwidth
from fastloops_helpers.measure import capabilities


def test_compare_measures_each_size_and_library_and_records_the_knobs():
    result = bandwidth.compare([0.25, 1], repeat=2, threads=1)
    assert [(r["size_mb"], r["library"]) for r in result.rows] == [
        (0.25, "torch"),
        (0.25, "numpy"),
        (1, "torch"),
        (1, "numpy"),
    ]
    assert all(r["gb_per_s"] > 0 for r in result.rows)
    assert set(result.figures) == {"copy_gb_per_s_ram", "copy_gb_per_s_cache"}
    assert result.knobs == {"sizes_mb": [0.25, 1], "threads": 1, "repeat": 2} and result.repeats == 2


def test_the_thread_count_is_set_for_the_copy_and_restored():
    before = torch.get_num_threads()
    with measure.torch_threads(1) as inside:
        assert inside == 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before
    with measure.torch_threads(None) as inside:  # None keeps the count, and restores it whatever the block does
        assert inside == before
        torch.set_num_threads(1)
    assert torch.get_num_threads() == before
    bandwidth.copy_bandwidth(2**20, "torch", repeat=2, threads=1)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads must be >= 1"):
        bandwidth.copy_bandwidth(2**20, "torch", repeat=2, threads=0)


def test_checking_ffcv_leaves_torch_threads_alone():
    before = torch.get_num_threads()
    capabilities.check_ffcv()  # importing ffcv sets torch's threads to 1
    assert torch.get_num_threads() == before


def test_compare_times_the_copies_it_is_given():
    calls = []

    def numpy_copy(src, dst):  # notebook 00 passes its cell's functions: those are what is timed
        calls.append(len(src))
        bandwidth.numpy_copy(src, dst)

    result = bandwidth.compare([0.25], repeat=1, threads=1, copies={"numpy": numpy_copy})
    assert [r["library"] for r in result.rows] == ["numpy"]  # the libraries are those given
    assert calls and set(calls) == {2**18 // 4}  # a float32 buffer of 0.25 MiB, copied by the function given
    moved, fn = bandwidth.copier(8, "torch")
    assert moved == 16 and fn.func is bandwidth.torch_copy  # without copies: the package's, read + write counted
