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
    f = exp.figures(rows, rates, starts, {"gil_share": 0.25}, cores=2)
    assert f["gil_share"] == 0.25  # the GIL prediction's figures are saved beside the rest
    assert f["helpers_threads_speedup"] == pytest.approx(1.8)  # 180 / 100 and 120 / (200 / 3) in every round
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
    assert set(ratios) == {
        "helpers_threads_over_dataloader_best",
        "helpers_threads_over_limit",
        "helpers_threads_speedup",
    }
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


def test_gil_shares_invert_amdahls_law_per_round():
    from fastloops_helpers.experiments import threads as exp

    # s = 0.25: 2 threads speed up 1 / (0.25 + 0.75 / 2) = 1.6x where 2 processes speed up 2x; o = 0.25
    rates = {"2 processes": [200.0, 100.0], "2 threads": [160.0, 80.0], "DataLoader, 2 workers": [160.0, 50.0]}
    shares = exp.gil_shares(rates)
    assert shares["gil_share"] == pytest.approx([0.25, 0.25])
    assert shares["dataloader_overhead"] == pytest.approx([0.25, 1.0])
    assert exp.amdahl(0.25, 2) == pytest.approx(1.6)
    assert exp.amdahl(0.25, 10**9) == pytest.approx(4.0)  # the cap: 1 / s
    assert exp.amdahl(-0.1, 4) == 4.0  # a share below 0 (noise) is read as 0: no loss
    four = {"4 processes": [400.0], "4 threads": [100 / (0.25 + 0.75 / 4)], "DataLoader, 4 workers": [320.0]}
    assert exp.gil_shares(four, n=4)["gil_share"] == pytest.approx([0.25])  # processes / threads = 1 + 3 s


def test_crossover_is_where_processes_overhead_meets_the_threads_gil_loss():
    from fastloops_helpers.experiments import threads as exp

    s, o = 0.1, 0.3
    c = exp.crossover_cores(s, o)
    assert c == pytest.approx(4.0)
    assert c / (1 + o) == pytest.approx(exp.amdahl(s, c))  # both speed up alike at the crossover
    assert 8 / (1 + o) > exp.amdahl(s, 8) and 2 / (1 + o) < exp.amdahl(s, 2)
    assert exp.crossover_cores(0.0, o) == float("inf") and exp.crossover_cores(s, -0.2) == 1.0


def test_gil_prediction_maps_the_share_interval_through_each_formula():
    from fastloops_helpers.experiments import threads as exp

    shares = {"gil_share": [0.1, 0.2, 0.2, 0.2, 0.2, 0.4], "dataloader_overhead": [0.3] * 6}
    p = exp.gil_prediction(shares, cores=16)
    assert p["gil_share"] == 0.2 and (p["gil_share_ci_low"], p["gil_share_ci_high"]) == (0.1, 0.4)
    assert p["threads_cap_speedup"] == pytest.approx(5.0)
    assert (p["threads_cap_speedup_ci_low"], p["threads_cap_speedup_ci_high"]) == pytest.approx((2.5, 10.0))
    assert p["threads_predicted_speedup"] == pytest.approx(exp.amdahl(0.2, 16))
    assert p["threads_predicted_speedup_ci_low"] == pytest.approx(exp.amdahl(0.4, 16))
    assert p["processes_overtake_cores"] == pytest.approx(2.5)  # 1 + 0.3 / 0.2
    assert p["processes_overtake_cores_ci_high"] == pytest.approx(4.0)  # 1 + 0.3 / 0.1
    noisy = exp.gil_prediction({"gil_share": [-0.1, 0.0, 0.0, 0.05, 0.05, 0.1], "dataloader_overhead": [0.3] * 6}, 2)
    assert noisy["threads_cap_speedup_ci_high"] == float("inf")  # a share that may be 0 leaves the cap open


def test_gil_rounds_time_threads_processes_and_the_dataloader_on_the_same_samples():
    from fastloops_helpers.experiments import threads as exp

    rates = exp.gil_rounds(Rows(24), images=12, rounds=2)
    assert set(rates) == {exp.ONE_THREAD, "2 threads", "2 processes", "DataLoader, 2 workers"}
    assert all(len(r) == 2 and min(r) > 0 for r in rates.values())
    assert set(exp.gil_shares(rates)) == {"gil_share", "dataloader_overhead"}
