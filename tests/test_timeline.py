import pickle
from functools import partial

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from fastloops_helpers.load import move as devices
from fastloops_helpers.measure import timeline


def loader(num_workers, n=48, batch_size=8, **kw):
    data, collate = timeline.instrument(TensorDataset(torch.arange(n).float().unsqueeze(1), torch.arange(n)))
    return DataLoader(data, batch_size=batch_size, num_workers=num_workers, collate_fn=collate, **kw)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_every_batch_has_fetch_and_collate_from_a_worker_and_main_stages(num_workers):
    seen = []
    tl = timeline.record(loader(num_workers), step=lambda b: seen.append(b[1].tolist()))
    df = tl.frame()
    assert [i for b in seen for i in b] == list(range(48))  # the batches themselves arrive unchanged
    assert tl.samples == 48
    lanes = {"main: load"} if num_workers == 0 else {"worker 0", "worker 1"}
    work = df[df.stage.isin(["fetch", "collate"])]
    assert set(work.lane) == lanes
    for stage in ("fetch", "collate", "wait", "step"):
        assert sorted(df[df.stage == stage].batch) == list(range(6)), stage
    assert (df.end >= df.start).all() and (df.start >= 0).all()
    # per batch, the collate starts after the fetch ends, and the main loop gets it after both
    by = df[df.batch >= 0].pivot_table(index="batch", columns="stage", values=["start", "end"])
    assert (by["start"]["collate"] >= by["end"]["fetch"]).all()
    assert (by["end"]["wait"] >= by["end"]["collate"]).all()
    s = tl.summary()
    assert 0 <= s["wait_share"] <= 1 and s["samples"] == 48


def test_workers_share_the_work_round_robin():
    df = timeline.record(loader(2)).frame()
    fetch = df[df.stage == "fetch"].sort_values("batch")
    assert list(fetch.lane) == ["worker 0", "worker 1"] * 3


def test_overhead_is_bounded_per_batch_not_per_sample():
    # two events per batch, however large the batch, and a payload of a few hundred bytes
    tl = timeline.record(loader(0, n=512, batch_size=256))
    df = tl.frame()
    assert len(df[df.lane == "main: load"]) == 2 * 2
    batch = timeline.TimedCollate()([(torch.zeros(1), 0)] * 256)
    assert len(pickle.dumps(batch.events)) < 1000


def test_max_batches_and_appending_epochs():
    tl = timeline.record(loader(0), max_batches=2)
    tl = timeline.record(loader(0), timeline=tl)
    df = tl.frame()
    assert (df.stage == "start").sum() == 2 and (df.stage == "wait").sum() == 2 + 6


def test_pin_memory_hook_records_a_pin_event():
    batch = timeline.TimedCollate()([(torch.zeros(2), 1)])
    if not torch.cuda.is_available():
        pytest.skip("pinning needs an accelerator")
    pinned = batch.pin_memory()
    assert pinned.events[-1][:2] == ("main: pin thread", "pin")
    assert pinned.data[0].is_pinned()


def test_gantt_draws_one_lane_per_worker_and_main_stage():
    import matplotlib.pyplot as plt

    fig = timeline.gantt(timeline.record(loader(2), step=timeline.gpu_like_step(0.001)))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["worker 0", "worker 1", "main: loop"]
    plt.close(fig)


def test_parallelism_and_overlap_from_hand_made_events():
    E = timeline.Event
    tl = timeline.Timeline(
        events=[
            E("worker 0", "fetch", 0, 0.0, 2.0),
            E("worker 1", "fetch", 1, 1.0, 3.0),
            E("main: loop", "step", 0, 2.5, 4.5),
        ]
    )
    assert timeline.parallelism(tl) == pytest.approx(4.0 / 3.0)  # 4 s of work over 3 s covered
    assert timeline.overlap_share(tl) == pytest.approx(0.25)  # 0.5 s of the 2 s step saw a fetch


def test_thread_prefetcher_records_its_own_lane():
    from fastloops_helpers.load.prefetch import ThreadPrefetcher

    tl = timeline.record(ThreadPrefetcher(loader(0)), step=timeline.gpu_like_step(0.001))
    assert set(tl.frame().query("stage == 'fetch'").lane) == {"main: prefetch thread"}


def test_timed_batches_move_like_any_nested_batch():

    batch = timeline.TimedCollate()([(torch.zeros(2), 1), (torch.ones(2), 0)])
    moved = devices.move_to(batch, "cpu", non_blocking=True)
    assert isinstance(moved, timeline.TimedBatch) and moved.events == batch.events
    assert torch.equal(moved.data[0], batch.data[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_run_records_pin_and_copy_through_the_prefetcher():
    from fastloops_helpers.load.prefetch import CUDAPrefetcher

    tl = timeline.record(
        CUDAPrefetcher(loader(2, pin_memory=True), device="cuda", pin=False),
        device="cuda",
        step=lambda b: b[0].sum(),
        copy=partial(devices.move_to, device="cuda", non_blocking=True),
    )
    stages = set(tl.frame().stage)
    assert {"pin", "copy", "fetch", "collate", "wait", "step"} <= stages


def test_float_rows_hold_the_same_numbers_as_the_array():
    from fastloops_helpers.teach import worker_data

    rows = worker_data.make_rows(1, dim=8)
    floats, array = worker_data.FloatListRows(rows), worker_data.ArrayRows(rows)
    assert len(floats) == len(array) and torch.equal(floats[3], array[3])
