import gc
import os

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from fastloops_helpers.load.process_prefetch import ProcessPrefetcher, start_method_for
from fastloops_helpers.measure import processes

CPU = "cpu"


def batches(n=7, size=4):
    """A generator loader: batch i holds the numbers i*size .. i*size+size-1, and a label and a name."""
    for i in range(n):
        x = torch.arange(i * size, (i + 1) * size, dtype=torch.float32)
        yield {"x": x.reshape(-1, 1), "y": (x % 3).long(), "name": f"b{i}", "i": i}


class Batches:
    """Iterable that restarts each epoch (a generator cannot be iterated twice). Defined in a module, it pickles:
    every loader of these tests does, so that they run under the forkserver a CUDA process starts its child from."""

    def __init__(self, n=7, size=4, fail_at=None):
        self.n, self.size, self.fail_at = n, size, fail_at

    def __iter__(self):
        for i, b in enumerate(batches(self.n, self.size)):
            if i == self.fail_at:
                raise ValueError(f"broken batch {i}")
            yield b

    def __len__(self):
        return self.n


def children():
    """Return the live processes this process started and left behind, multiprocessing's own helpers aside.

    Once CUDA is initialised (on a GPU machine, by an earlier test) the prefetcher starts its child from a
    forkserver, which lives, with its resource tracker, as long as pytest does: the test that first starts it
    must not read them as a child left behind.
    """
    own = processes.helpers()
    return [
        c
        for c in psutil.Process().children(recursive=True)
        if c.pid not in own and c.is_running() and c.status() != psutil.STATUS_ZOMBIE
    ]


@pytest.mark.parametrize("slots", [False, True])
def test_keeps_order_and_content(slots):
    got = list(ProcessPrefetcher(Batches(), depth=2, device=CPU, slots=slots))
    want = list(batches())
    assert [b["i"] for b in got] == list(range(7)) and [b["name"] for b in got] == [b["name"] for b in want]
    for g, w in zip(got, want):
        assert torch.equal(g["x"], w["x"]) and torch.equal(g["y"], w["y"])
    assert not children()


def test_slots_copy_out_so_earlier_batches_stay_intact():
    got = list(ProcessPrefetcher(Batches(n=9), depth=2, device=CPU, slots=True))  # 9 batches through 2 slots
    assert [int(b["x"][0, 0]) for b in got] == [4 * i for i in range(9)]


def test_a_smaller_last_batch_and_a_misfit_batch_travel_correctly():
    loader = [torch.ones(4, 2), torch.full((2, 2), 2.0), torch.full((6, 2), 3.0), torch.zeros(3, 5)]
    got = list(ProcessPrefetcher(loader, depth=2, device=CPU, slots=True))
    assert [tuple(t.shape) for t in got] == [(4, 2), (2, 2), (6, 2), (3, 5)]
    assert all(torch.equal(g, w) for g, w in zip(got, loader))


def test_works_over_a_dataloader_with_workers():
    ds = TensorDataset(torch.arange(40.0).reshape(20, 2))
    loader = DataLoader(ds, batch_size=3, num_workers=2)
    got = torch.cat([b[0] for b in ProcessPrefetcher(loader, device=CPU)])
    assert torch.equal(got, ds.tensors[0])
    assert not children()


@pytest.mark.parametrize("slots", [False, True])
def test_propagates_the_loaders_exception_after_the_batches_before_it(slots):
    seen = []
    with pytest.raises(ValueError, match="broken batch 3") as err:
        for b in ProcessPrefetcher(Batches(fail_at=3), device=CPU, slots=slots):
            seen.append(b["i"])
    assert seen == [0, 1, 2]
    assert "ProcessPrefetcher's process after 3 batch" in "".join(err.value.__notes__)
    assert not children()


def test_a_child_that_dies_is_reported_with_its_exit_code():
    with pytest.raises(RuntimeError, match="exited with code 7"):
        list(ProcessPrefetcher(DiesAfterOne(), device=CPU))
    assert not children()


def test_break_leaves_no_process_behind():
    for b in ProcessPrefetcher(Batches(n=50), device=CPU):
        if b["i"] == 2:
            break
    assert not children()


def test_close_stops_the_child_of_a_running_iteration():
    pf = ProcessPrefetcher(Batches(n=50), device=CPU, slots=True)
    it = iter(pf)
    assert next(it)["i"] == 0
    assert len(children()) == 1
    pf.close()
    assert not children()
    with pytest.raises(StopIteration):
        next(it)


def test_iterates_again_for_a_second_epoch_and_has_a_length():
    pf = ProcessPrefetcher(Batches(n=3), device=CPU)
    assert len(pf) == 3
    assert [b["i"] for b in pf] == [b["i"] for b in pf] == [0, 1, 2]


def test_rejects_a_depth_below_one():
    with pytest.raises(ValueError, match="depth must be >= 1, got 0"):
        ProcessPrefetcher([], depth=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_batches_arrive_on_the_device_equal_to_the_loaders():
    got = list(ProcessPrefetcher(Batches(n=9), depth=2, device="cuda"))
    want = list(batches(9))
    assert all(g["x"].is_cuda and torch.equal(g["x"].cpu(), w["x"]) for g, w in zip(got, want))
    assert not children()


def test_a_second_epoch_after_the_parent_used_intra_op_threads_does_not_hang():
    # regression: the child inherited a dead OpenMP pool and waited on it in share_memory_ (fixed by one thread)
    big = [torch.randn(64, 3, 64, 64) for _ in range(4)]
    pf = ProcessPrefetcher(big, depth=2, device=CPU, slots=True)
    for _ in range(2):
        assert sum(int(torch.equal(g, w)) for g, w in zip(pf, big)) == 4  # the clones use the parent's threads
    assert not children()


class AbortsElsewhere:
    """Cyclic garbage whose finaliser aborts the process it runs in unless that is its creator's, as freeing an
    inherited CUDA tensor does in a forked child (exit code -6)."""

    def __init__(self):
        self.pid, self.cycle = os.getpid(), self

    def __del__(self):
        if os.getpid() != self.pid:
            os.abort()


class Collecting(Batches):
    """Batches whose iteration runs the garbage collector, as a queue's feeder thread may at any allocation; it
    first drops what it was told to drop (objects the child inherited)."""

    def __init__(self, n=3, drop=None):
        super().__init__(n=n)
        self.drop = drop if drop is not None else []

    def __iter__(self):
        self.drop.clear()
        for b in super().__iter__():
            gc.collect()
            yield b


class DiesAfterOne(Batches):
    """A loader whose process ends abruptly after its first batch."""

    def __iter__(self):
        yield from batches(1)
        os._exit(7)


def _with_collector_off(loader, **kwargs):
    """Iterate a ProcessPrefetcher with automatic collection off, so garbage made before it is still there."""
    gc.disable()
    try:
        return [b["i"] for b in ProcessPrefetcher(loader, device=kwargs.pop("device", CPU), **kwargs)]
    finally:
        gc.enable()


def test_the_parents_garbage_is_not_collected_in_the_forked_child():
    AbortsElsewhere()  # garbage now, collected by the next full collection: in the child it would abort it
    assert _with_collector_off(Collecting(), start_method="fork") == [0, 1, 2]
    assert not children()


def test_what_the_child_inherited_and_releases_is_not_collected_there():
    keep = [AbortsElsewhere()]  # alive in the parent; the child drops it, leaving a cycle its collector could free
    assert _with_collector_off(Collecting(drop=keep), start_method="fork") == [0, 1, 2]
    assert len(keep) == 1 and not children()


def test_once_cuda_is_initialised_the_child_starts_from_a_fresh_process(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert start_method_for(None) is None and start_method_for("spawn") == "spawn"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert start_method_for(None) == "forkserver" and start_method_for("fork") == "fork"
    assert [b["i"] for b in ProcessPrefetcher(Batches(n=3), device=CPU)] == [0, 1, 2]
    with pytest.raises(TypeError, match="the loader must pickle.*define its dataset"):
        list(ProcessPrefetcher(batches(3), device=CPU))  # a generator cannot be sent to a fresh process


def test_a_dataloader_with_workers_runs_in_the_fresh_process_of_a_cuda_process(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # as on a GPU, once a model is on it
    ds = TensorDataset(torch.arange(40.0).reshape(20, 2))
    got = torch.cat([b[0] for b in ProcessPrefetcher(DataLoader(ds, batch_size=3, num_workers=2), device=CPU)])
    assert torch.equal(got, ds.tensors[0]) and not children()


def test_a_fresh_process_reports_the_loaders_exception_and_its_own_death():
    with pytest.raises(ValueError, match="broken batch 1") as err:
        list(ProcessPrefetcher(Batches(fail_at=1), device=CPU, start_method="forkserver"))
    assert "ProcessPrefetcher's process after 1 batch" in "".join(err.value.__notes__)
    with pytest.raises(RuntimeError, match="exited with code 7"):
        list(ProcessPrefetcher(DiesAfterOne(), device=CPU, start_method="forkserver"))
    assert not children()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("start_method", [None, "fork"])
def test_after_cuda_was_used_and_left_garbage_batches_still_arrive(start_method):
    x = torch.ones(1024, device="cuda")
    x.record_stream(torch.cuda.Stream())  # freeing it then records an event: a CUDA call, fatal in a forked child
    cycle = [x, AbortsElsewhere()]
    cycle.append(cycle)
    del x, cycle  # CUDA garbage, as a training step leaves
    got = _with_collector_off(Collecting(n=5), device="cuda", depth=2, start_method=start_method)
    assert got == [0, 1, 2, 3, 4] and not children()
