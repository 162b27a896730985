"""ThreadLoader: order, sharding, seeded augmentation, errors naming the sample, clean shutdown."""

import gc
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastloops_helpers import ThreadLoader
from fastloops_helpers.load.batch_loader import BatchLoader


class Rows:
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError("broken image")
        return torch.tensor(i)


class Augmented(Rows):
    def __getitem__(self, i, generator=None):
        return torch.tensor(i) * 1000 + torch.randint(0, 1000, (), generator=generator)


def loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ThreadLoader")]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 40),
    batch_size=st.integers(1, 9),
    threads=st.integers(1, 4),
    drop_last=st.booleans(),
    world_size=st.integers(1, 3),
    shuffle=st.booleans(),
    prefetch=st.integers(1, 3),
)
def test_same_batches_as_batchloader(n, batch_size, threads, drop_last, world_size, shuffle, prefetch):
    ranks = []
    for rank in range(world_size):
        kw = dict(shuffle=shuffle, seed=3, drop_last=drop_last, rank=rank, world_size=world_size)
        tl = ThreadLoader(Rows(n), batch_size, threads=threads, prefetch=prefetch, **kw)
        ref = BatchLoader(torch.arange(n), batch_size, **kw)
        got = [b.tolist() for b in tl]
        assert got == [b.tolist() for b in ref]
        assert len(got) == len(tl)
        ranks.append([i for b in got for i in b])
    if world_size == 1 and not drop_last:
        assert sorted(ranks[0]) == list(range(n))  # every sample exactly once


def test_epochs_differ_and_set_epoch_replays():
    tl = ThreadLoader(Rows(30), 5, threads=3, shuffle=True, seed=1)
    first, second = [b.tolist() for b in tl], [b.tolist() for b in tl]
    assert first != second
    tl.set_epoch(0)
    assert [b.tolist() for b in tl] == first


def test_seeded_augmentation_matches_one_thread():
    one = [b.tolist() for b in ThreadLoader(Augmented(50), 7, threads=1, shuffle=True, seed=5)]
    many = [b.tolist() for b in ThreadLoader(Augmented(50), 7, threads=4, shuffle=True, seed=5)]
    assert one == many
    draws = [v % 1000 for b in one for v in b]
    assert len(set(draws)) > 30  # the samples' generators are independent, not one shared seed


def test_error_names_the_sample():
    with pytest.raises(RuntimeError, match="sample 13 failed: ValueError: broken image"):
        for _ in ThreadLoader(Rows(40, fail_at=13), 4, threads=3):
            pass
    gc.collect()
    assert loader_threads() == []


def test_no_thread_left_after_break_and_close():
    tl = ThreadLoader(Rows(1000), 4, threads=4)
    for _ in tl:
        assert loader_threads()
        break
    assert loader_threads() == []
    it = iter(tl)
    next(it)
    tl.close()
    assert loader_threads() == []
    it = iter(tl)
    next(it)
    del it, tl
    gc.collect()
    assert loader_threads() == []


def test_thread_figures_compare_memory_with_every_start_method_and_predict_free_threading():
    from fastloops_helpers.experiments import threads as exp

    rows = [
        {
            "pipeline": "DataLoader, 1 workers (fork)",
            "img_per_s": 100.0,
            "cpu_s_per_img": 0.02,
            "pss_mb": 500.0,
            "added_pss_mb": 100.0,
        },
        {
            "pipeline": "DataLoader, 2 workers (fork)",
            "img_per_s": 150.0,
            "cpu_s_per_img": 0.02,
            "pss_mb": 600.0,
            "added_pss_mb": 200.0,
        },
        {
            "pipeline": "ThreadLoader, 4 threads",
            "img_per_s": 180.0,
            "cpu_s_per_img": 0.01,
            "pss_mb": 450.0,
            "added_pss_mb": 40.0,
        },
    ]
    starts = [
        {"start_method": m, "first_batch_s": s, "pickled_bytes": 10, "pss_mb": p}
        for m, s, p in (("fork", 0.1, 600.0), ("forkserver", 2.0, 1500.0))
    ]
    # six rounds: the ThreadLoader 1.2x the DataLoader in every round, 0.9x of two cores' limit
    rates = {
        "ThreadLoader, 4 threads": [180.0, 120.0, 180.0, 180.0, 120.0, 180.0],
        "DataLoader, 2 workers (fork)": [150.0, 100.0, 150.0, 150.0, 100.0, 150.0],
        exp.ONE_THREAD: [100.0, 200 / 3, 100.0, 100.0, 200 / 3, 100.0],
    }
    assert exp.best_dataloader(rows) == "DataLoader, 2 workers (fork)"
    f = exp.figures(rows, rates, starts, {"Pillow": 1.8}, cores=2)
    assert f["helpers_threads_over_dataloader_best"] == pytest.approx(1.2)
    assert f["helpers_threads_over_dataloader_best_ci_low"] == pytest.approx(1.2)  # every round agrees
    assert f["helpers_threads_over_limit"] == pytest.approx(0.9) and f["limit_img_per_s"] == 200.0
    assert f["threadloader_img_per_s"] == 180.0 and f["dataloader_best_img_per_s"] == 150.0
    assert f["helpers_threads_pss_over_dataloader_best"] == 450 / 600
    assert f["helpers_threads_added_pss_over_dataloader_best"] == 40 / 200 and f["pss_baseline_mb"] == 410
    assert f["dataloader_added_pss_for_half_total_mb"] == 410 + 2 * 40  # then (410 + 40) / (410 + 490) = 0.5
    assert f["helpers_threads_pss_over_dataloader_forkserver"] == 450 / 1500
    assert f["first_batch_s_forkserver"] == 2.0 and "helpers_threads_over_spdl" not in f
    ft = exp.free_threaded_prediction(limit=200.0, measured=160.0)
    lo, hi = sorted(exp.FREE_THREADED_PENALTY)
    assert ft["low_img_per_s"] == 200 * (1 - hi) and ft["high_img_per_s"] == 200 * (1 - lo)
    assert ft["gain_high"] == ft["high_img_per_s"] / 160


def test_head_to_head_times_every_contender_once_per_round_and_gives_per_round_ratios():
    from fastloops_helpers.experiments import threads as exp

    ds = Rows(12)
    configs = {
        "DataLoader, 0 workers (fork)": lambda: torch.utils.data.DataLoader(ds, 4),
        "DataLoader, 1 workers (fork)": lambda: torch.utils.data.DataLoader(ds, 4, num_workers=1),
        "ThreadLoader, 2 threads": lambda: ThreadLoader(ds, 4, threads=2),
    }
    rates = exp.head_to_head(configs, "DataLoader, 0 workers (fork)", ds, limit_images=4, rounds=6)
    assert set(rates) == {"ThreadLoader, 2 threads", "DataLoader, 0 workers (fork)", exp.ONE_THREAD}
    assert all(len(r) == 6 and min(r) > 0 for r in rates.values())
    ratios = exp.round_ratios(rates, cores=2)
    assert set(ratios) == {"helpers_threads_over_dataloader_best", "helpers_threads_over_limit"}
    tl, dl = rates["ThreadLoader, 2 threads"], rates["DataLoader, 0 workers (fork)"]
    assert ratios["helpers_threads_over_dataloader_best"] == [t / d for t, d in zip(tl, dl)]


def test_epoch_stats_counts_the_workers_memory_as_added_and_waits_for_them_to_exit():
    import psutil

    from fastloops_helpers.experiments import threads as exp

    data = torch.utils.data.TensorDataset(torch.arange(64.0), torch.arange(64))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    s = exp.epoch_stats(lambda: torch.utils.data.DataLoader(data, 8, num_workers=2, persistent_workers=True), 1)
    assert s["added_pss_mb"] > 5  # two worker processes hold pages of their own
    assert 0 < s["added_pss_mb"] < s["pss_mb"]
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []


def test_default_prefetch_keeps_every_thread_busy_with_two_batches_at_least():
    assert ThreadLoader(range(100), 32, threads=4).prefetch == 2  # 64 samples queued for 4 threads
    assert ThreadLoader(range(100), 1, threads=4).prefetch == 8  # one-sample batches: 2 per thread
    assert ThreadLoader(range(100), 3, threads=4).prefetch == 3


def test_configurations_use_the_threads_and_workers_they_are_given():
    """The notebook's `n_threads` and `n_workers` reach every pipeline: nothing re-reads the sizes table."""
    from fastloops_helpers.experiments import threads as exp

    configs = exp.configurations(Rows(12), 4, threads=3, workers=1)
    assert [n for n in configs if n.startswith("DataLoader")] == [
        "DataLoader, 0 workers (fork)",
        "DataLoader, 1 workers (fork)",
    ]
    assert configs["DataLoader, 1 workers (fork)"]().num_workers == 1
    tl = configs["ThreadLoader, 3 threads"]()
    assert tl.threads == 3 and [b.tolist() for b in tl] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert all("3 threads" in n or "1 processes" in n for n in configs if n.startswith(("SPDL", "torchdata")))


def test_startup_times_the_start_function_it_is_given():
    """Notebook 14 passes its own cell's `start_workers`: what startup times is that function, per start method."""
    import time

    from fastloops_helpers.experiments import threads as exp

    calls = []

    def start(ds, batch_size, workers, method):
        calls.append((len(ds), batch_size, workers, method))
        time.sleep(0.05)
        return iter([torch.zeros(batch_size)])

    rows = exp.startup(Rows(6), 3, 1, methods=("fork", "spawn"), start=start)
    assert calls == [(6, 3, 1, "fork"), (6, 3, 1, "spawn")]
    assert [r["start_method"] for r in rows] == ["fork", "spawn"]
    assert all(r["first_batch_s"] >= 0.05 and r["workers"] == 1 for r in rows)


def test_start_workers_returns_the_running_iterator_after_the_first_batch():
    from fastloops_helpers.experiments import threads as exp

    it = exp.start_workers(Rows(6), 4, 0, None)  # no workers: the batches come from this process
    assert [b.tolist() for b in it] == [[4, 5]]  # the first batch was taken already
