"""diagnose(loader, step): verdicts on known loops, the MNIST shape quiet or beside a busy process, clean-up, errors."""

import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from fastloops_book.instruments import warp
from fastloops_helpers import Diagnosis, diagnose
from fastloops_helpers.doctor import BUSY, LoopError, advice, diagnosis, timed_loop
from fastloops_helpers.doctor.timed_loop import batch_size
from fastloops_helpers.measure import clock, processes


class SleepyLoader:
    """Yield `n` batches of 8 samples, each after sleeping `seconds` (a loader whose cost is known)."""

    def __init__(self, seconds: float, n: int = 40) -> None:
        self.seconds, self.n = seconds, n

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.seconds)
            yield torch.full((8, 2), float(i))


class SleepyDataset(Dataset):
    """Per-sample `__getitem__` that sleeps: a decode-like cost per sample, in a worker or in the main process."""

    def __init__(self, n: int = 48, seconds: float = 0.0, fail_at: int | None = None) -> None:
        self.n, self.seconds, self.fail_at = n, seconds, fail_at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.fail_at:
            raise ValueError(f"sample {i} is corrupt")
        time.sleep(self.seconds)
        return torch.full((2,), float(i))


def left_running():
    """Return this process's live children, multiprocessing's forkserver and resource tracker aside.

    Those two live as long as pytest once a test has started them (ProcessPrefetcher does, in a process that has
    used CUDA): they are no worker that diagnose left running.
    """
    own = processes.helpers()
    return [c for c in psutil.Process().children(recursive=True) if c.pid not in own]


def sleep_step(seconds):
    return lambda batch: time.sleep(seconds)


@pytest.fixture
def quiet(monkeypatch):
    """Read the other processes as idle: for tests of the verdict's thresholds (the neighbour rule has its own)."""
    monkeypatch.setattr(processes, "neighbours", lambda before, after: processes.Neighbours(0.0))


def test_a_loader_sleeping_20ms_with_a_2ms_step_is_input_bound(quiet):
    # predicted: wait 20 / (20 + 2) = 0.91 of the wall time, headspace 22 / 2 = 11x; tolerance: > 0.7 and > 3
    d = diagnose(SleepyLoader(0.020), sleep_step(0.002), batches=15, warmup=2, replay=8)
    assert d.verdict == "input-bound"
    assert d.wait_share > 0.7 and d.headspace > 3
    assert d.batches == 15 and d.samples == 15 * 8
    assert abs(d.wait_share + d.step_share - 1) < 0.1  # the rest is the loop's own overhead


def test_an_instant_loader_with_a_20ms_step_is_compute_bound(quiet):
    d = diagnose(SleepyLoader(0.0), sleep_step(0.020), batches=15, warmup=2, replay=8)
    assert d.verdict == "compute-bound"
    assert d.wait_share < 0.2
    assert d.recommendations and d.recommendations[0].notebook == "05"


def test_the_replay_runs_the_same_step_on_the_same_batches():
    seen = []
    d = diagnose(SleepyLoader(0.0, n=20), lambda b: seen.append(int(b[0, 0])), batches=10, warmup=3, replay=4, repeat=2)
    # live batches 0..6 fill the cache (3..6), a replay pass runs; 7..10, another pass; 11, 12 end the loop
    assert seen == [*range(7), 3, 4, 5, 6, *range(7, 11), 3, 4, 5, 6, 11, 12]
    assert d.batches == 10


def _slowed_run(others: processes.Neighbours):
    """A loop whose step took 20 ms per batch in the loop (1 s batches, waits 0.5 s) while `others` ran."""
    rows = [
        {"begin": i, "end": i + 1, "batch": 1, "wait": 0.5, "copy": 0.0, "step": 0.02, "samples": 8, "first": i == 0}
        for i in range(6)
    ]
    return timed_loop.Run(sleep_step(0), 6, 1, 2, rows=rows, cached=[torch.zeros(8, 2)] * 2, neighbours=others)


def test_a_step_slowed_in_the_loop_is_inconclusive_only_beside_a_busy_neighbour():
    neighbour = processes.Neighbours(1.0, (("python", 4242, 0.97),))
    d = diagnosis._diagnosis(_slowed_run(neighbour), [], replay_s=0.002)
    assert d.live_over_replay_step == pytest.approx(20) and not d.recommendations
    assert d.verdict == f"{BUSY}: python (pid 4242) took 97% of a core" and d.others_cores == 1.0
    # the same figures on a quiet machine: the loop slowed its own step (loading took its caches)
    quiet = diagnosis._diagnosis(_slowed_run(processes.Neighbours(0.05)), [], 0.002)
    assert quiet.verdict == "input-bound"
    # a neighbour that slowed the loop and the replay alike, with cores to spare, leaves a verdict
    alike = diagnosis._diagnosis(_slowed_run(neighbour), [], replay_s=0.04)
    assert not alike.verdict.startswith(BUSY)
    crowded = processes.Neighbours(1.0, (("python", 4242, 0.97),), spare_cores=0.1)  # no core spare: busy
    assert diagnosis._diagnosis(_slowed_run(crowded), [], 0.04).verdict.startswith(BUSY)


@pytest.mark.parametrize("seed", [1, 2])
def test_warped_the_step_in_the_loop_and_alone_keep_their_ratio_and_the_wait_moves(monkeypatch, quiet, seed):
    monkeypatch.setattr(warp, "SEED", seed)  # as FASTLOOPS_WARP does for the notebooks' compared cells
    monkeypatch.setattr(clock, "_scaling", warp.scale)
    f = timed_loop._factors()
    assert {f["wait"] / f["step"], f["copy"] / f["step"]} <= {warp.STEP**e for e in (-2, -1, 1, 2)}
    d = diagnose(SleepyLoader(0.010, n=20), sleep_step(0.010), batches=12, warmup=2, replay=4)
    assert 0.5 < d.live_over_replay_step < 2  # the same contender in the loop and alone: one factor
    real_wait = d.stages_ms["wait"] / 1e3  # the timeline keeps the clock's stamps: its wait is unwarped
    assert d.figures.batch_s == pytest.approx(real_wait * f["wait"] + d.figures.step_s, rel=0.5)  # the wait moved


class Digits(Dataset):
    """The shape of PyTorch's MNIST example: 28x28 uint8 images, a PIL image and a new tensor per item."""

    def __init__(self, n: int = 1024) -> None:
        rng = np.random.default_rng(0)
        self.images, self.labels = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        image = np.asarray(Image.fromarray(self.images[i], mode="L"), dtype=np.float32)
        return (torch.from_numpy(image / 255).unsqueeze(0) - 0.1307) / 0.3081, int(self.labels[i])


def mnist_loop():
    """Return a DataLoader(batch_size=64) without workers over `Digits`, and a tiny MLP's training step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(batch[0]), batch[1]).backward()
        opt.step()

    return DataLoader(Digits(), batch_size=64, shuffle=True), step


def _told_apart(d):
    """Assert the MNIST shape's verdict: input-bound, or inconclusive only beside other processes it names."""
    if d.verdict.startswith(BUSY):
        assert d.others_cores >= diagnosis.NEIGHBOUR_CORES and d.neighbours and d.neighbours in d.verdict
    else:
        assert d.verdict == "input-bound", d


def test_the_mnist_shape_reads_input_bound_on_a_quiet_machine():
    d = diagnose(*mnist_loop(), batches=16, warmup=2, replay=8)
    _told_apart(d)
    if d.others_cores < diagnosis.NEIGHBOUR_CORES:  # quiet: whatever slowed the step in the loop was the loop
        assert d.verdict == "input-bound"


def test_the_mnist_shape_beside_a_busy_process_names_it_when_inconclusive():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # running before diagnose starts: a neighbour, not one of the loop's workers
        d = diagnose(*mnist_loop(), batches=16, warmup=2, replay=8)
        name = psutil.Process(busy.pid).name()
    finally:
        busy.kill()
        busy.wait()
    _told_apart(d)
    assert d.others_cores >= 0.3  # the busy process took most of a core, and it is not the loop's
    if d.verdict != "input-bound":
        assert f"pid {busy.pid}" in d.verdict or name in d.verdict


class BurningDataset(SleepyDataset):
    """A sample that costs CPU (a worker that would be named if the loop's own workers counted as others)."""

    def __getitem__(self, i: int) -> torch.Tensor:
        sum(range(20_000))
        return torch.full((2,), float(i))


def test_a_busy_process_is_named_and_the_loops_own_workers_are_not():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    workers = set()
    try:
        time.sleep(0.2)
        before = processes.reading()
        earlier = {p.pid for p in psutil.Process().children()}  # the busy one, and any an earlier test left
        for _ in range(3):
            for _ in DataLoader(BurningDataset(n=128), batch_size=8, num_workers=2):  # new workers every epoch
                workers |= {p.pid for p in psutil.Process().children()} - earlier
        after = processes.reading(since=before)
    finally:
        busy.kill()
        busy.wait()
    seen, mine = processes.neighbours(before, after), workers | {psutil.Process().pid}
    named = {pid: cores for _, pid, cores in seen.busiest}
    assert workers and not set(named) & mine and not set(after.others) & mine
    share = (after.others[busy.pid][1] - before.others[busy.pid][1]) / (after.at - before.at)
    assert share > 0 and seen.cores >= share  # the busy process counts among the others
    # named, or (on a machine busy with more than this test) as busy as the three named at most
    assert f"pid {busy.pid}" in str(seen) or share <= min(named.values()) + 0.05


def test_the_others_cores_are_the_machines_less_the_loops_but_never_less_than_the_others_seen():
    def reading(at: float, machine_s: float, own_s: float, busy_s: float) -> processes.CpuReading:
        return processes.CpuReading(at, machine_s, own_s, {7: ("python", busy_s), 8: ("sshd", 1.0)})

    before = reading(0.0, 100.0, 10.0, 5.0)
    # a hypervisor stole time: the machine's ticks show 1.7 cores worked, the loop measured 1.0 and the busy one 0.9
    stolen = processes.neighbours(before, reading(1.0, 101.7, 11.0, 5.9))
    assert stolen.cores == pytest.approx(0.9) and stolen.busiest == (("python", 7, pytest.approx(0.9)),)
    # a process that ran and ended within the window shows only in the machine's figure
    unseen = processes.neighbours(before, reading(1.0, 102.0, 11.0, 5.2))
    assert unseen.cores == pytest.approx(1.0) and unseen.busiest == (("python", 7, pytest.approx(0.2)),)


def test_a_forkserver_started_before_is_neither_a_worker_left_running_nor_a_neighbour():
    # as on a GPU machine, where ProcessPrefetcher's tests (CUDA initialised) start a forkserver that stays
    from fastloops_helpers import ProcessPrefetcher

    assert len(list(ProcessPrefetcher(SleepyLoader(0.0, n=3), device="cpu", start_method="forkserver"))) == 3
    server = processes.helpers()
    assert server and server <= {c.pid for c in psutil.Process().children(recursive=True)}
    before = processes.reading()
    assert not server & set(before.others)  # this process's own, from any reading
    loader = DataLoader(SleepyDataset(seconds=0.001), batch_size=8, num_workers=2)
    diagnose(loader, sleep_step(0.001), batches=4, warmup=1)
    assert left_running() == [] and processes.helpers() == server  # the workers ended, the server stays
    assert not server & set(processes.reading(since=before).others)


def test_epochs_restart_when_the_loader_runs_out():
    d = diagnose(DataLoader(SleepyDataset(n=24), batch_size=8), sleep_step(0.0), batches=7, warmup=1)
    assert d.batches == 7
    assert (d.timeline.frame().stage == "start").sum() == 3  # 8 batches from 3-batch epochs: 3 iter() calls


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_dataloader_gets_a_worker_timeline_and_no_worker_is_left_running(num_workers):
    threads = threading.active_count()
    loader = DataLoader(SleepyDataset(seconds=0.001), batch_size=8, num_workers=num_workers)
    d = diagnose(loader, sleep_step(0.001), batches=4, warmup=1)
    df = d.timeline.frame()
    lanes = {"main: load"} if num_workers == 0 else {"worker 0", "worker 1"}
    assert set(df[df.stage == "fetch"].lane) == lanes
    assert {"fetch", "collate", "wait", "step"} <= set(d.stages_ms)
    assert left_running() == []
    assert threading.active_count() == threads
    assert d.pss_mb["main"] > 0 and (d.pss_mb["workers"] > 0) == (num_workers > 0)


def test_persistent_workers_of_the_instrumented_copy_are_stopped():
    loader = DataLoader(SleepyDataset(), batch_size=8, num_workers=2, persistent_workers=True)
    diagnose(loader, sleep_step(0.0), batches=8, warmup=1)
    assert left_running() == []
    assert loader._iterator is None  # the caller's loader was never started


def test_a_thread_prefetcher_is_closed():
    from fastloops_helpers import ThreadPrefetcher

    threads = threading.active_count()
    diagnose(ThreadPrefetcher(SleepyLoader(0.0, n=50)), sleep_step(0.0), batches=5, warmup=1)
    assert threading.active_count() == threads


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_loader_that_raises_names_the_batch(num_workers):
    loader = DataLoader(SleepyDataset(fail_at=21), batch_size=8, num_workers=num_workers)  # sample 21: batch 2
    with pytest.raises(LoopError, match=r"(?s)raised ValueError on batch 2\b.*sample 21 is corrupt"):
        diagnose(loader, sleep_step(0.0), batches=5, warmup=1)
    assert left_running() == []


def test_a_step_that_raises_names_the_batch():
    def step(batch):
        if batch[0, 0] == 4:
            raise RuntimeError("shape mismatch")

    with pytest.raises(LoopError, match="step raised RuntimeError on batch 4: shape mismatch"):
        diagnose(SleepyLoader(0.0), step, batches=8, warmup=0)


def test_too_few_batches_and_bad_arguments_are_explained():
    with pytest.raises(ValueError, match="yielded 2 batches, not more than warmup=3"):
        diagnose(iter(SleepyLoader(0.0, n=2)), sleep_step(0.0), batches=5, warmup=3)
    with pytest.raises(ValueError, match="batches >= 1"):
        diagnose(SleepyLoader(0.0), sleep_step(0.0), batches=0)


def test_table_advice_repr_and_plot():
    d = diagnose(DataLoader(SleepyDataset(seconds=0.0005), batch_size=8), sleep_step(0.001), batches=5, warmup=1)
    assert isinstance(d, Diagnosis)
    assert {"samples/s", "wait share", "headspace (x)", "PSS total (MB)"} <= set(d.table().index)
    assert list(d.advice().columns) == ["knob", "expected gain (x)", "because", "notebook"]
    assert repr(d).startswith(f"Diagnosis({d.verdict}: waits ") and "\n" not in repr(d)
    fig = d.plot()
    assert len(fig.axes) == 2


def test_verdict_thresholds():
    assert advice.verdict(0.6, 1.5) == "input-bound"
    assert advice.verdict(0.3, 2.5) == "input-bound"
    assert advice.verdict(0.05, 1.1) == "compute-bound"
    assert advice.verdict(0.05, 1.4) == "balanced"
    assert advice.verdict(0.3, 1.4) == "balanced"


def _figures(**kw):
    base = dict(
        batch_s=0.022,
        step_s=0.002,
        wait_share=0.9,
        headspace=11.0,
        batch_size=8,
        first_batch_s=0.02,
        p50_s=0.022,
        is_dataloader=True,
        num_workers=0,
        persistent_workers=False,
        has_getitems=False,
        epoch_batches=10,
        cores=4,
    )
    return advice.Figures(**{**base, **kw})


def test_recommendations_follow_the_measured_figures_and_are_ranked():
    in_memory = advice.recommend(_figures(load_s=0.02, fetch_per_sample_s=5e-6))
    knobs = [r.knob for r in in_memory]
    assert knobs[0].startswith("fetch whole batches") and any(k.startswith("num_workers=4") for k in knobs)
    assert [r.gain for r in in_memory] == sorted((r.gain for r in in_memory), reverse=True)
    assert all(r.gain <= 11.0 for r in in_memory)  # never more than free loading
    decode = advice.recommend(_figures(load_s=0.02, fetch_per_sample_s=2.5e-3))
    assert decode[0].notebook == "09, 14" and not any(r.knob.startswith("fetch whole") for r in decode)
    slow_start = advice.recommend(
        _figures(num_workers=4, first_batch_s=0.5, wait_share=0.05, headspace=1.1, step_s=0.02, fetch_per_sample_s=None)
    )
    assert [r.knob for r in slow_start] == ["persistent_workers=True"]
    pageable = advice.recommend(
        _figures(
            cuda_step=True,
            pageable=True,
            transfer_s=0.005,
            wait_share=0.0,
            headspace=1.0,
            step_s=0.022,
            fetch_per_sample_s=None,
        )
    )
    assert pageable[0].notebook == "06, 07" and pageable[0].gain == pytest.approx(0.022 / 0.017)
    long_copy = advice.recommend(  # a copy longer than half the batch: the overlapped copy becomes the floor
        _figures(
            cuda_step=True,
            pageable=True,
            transfer_s=0.015,
            wait_share=0.0,
            headspace=1.0,
            step_s=0.022,
            fetch_per_sample_s=None,
        )
    )
    assert long_copy[0].gain == pytest.approx(0.022 / 0.015)  # not 0.022 / 0.007: the copy still takes its time


def test_batch_size_reads_the_leading_dimension():
    assert batch_size((torch.zeros(5, 3), torch.zeros(5))) == 5
    assert batch_size({"x": [1, 2, 3]}) == 1  # a list of python numbers: leaves are the numbers
    assert batch_size([torch.zeros(7)]) == 7


ROWS, ROW_FLOATS, BATCH = 256, 32_768, 32  # 128 KiB rows, 4 MiB batches: the copy is a visible part of a batch


def _pinning_gain(d):
    """Return the pinning advice's gain, after checking the rule's arithmetic: batch / max(batch - copy, copy)."""
    pin = [r for r in advice.recommend(d.figures) if r.notebook == "06, 07"]
    assert d.figures.cuda_step and d.figures.pageable and pin, d.recommendations
    f = d.figures
    expected = f.batch_s / max(f.batch_s - f.transfer_s, f.transfer_s)
    assert pin[0].gain == pytest.approx(expected) and pin[0].gain >= advice.MIN_GAIN
    return pin[0].gain


def test_pageable_batches_of_several_mb_beside_a_simulated_gpu_are_told_to_pin(monkeypatch, quiet):
    copy_s = BATCH * ROW_FLOATS * 4 / 1e9  # the copy of a batch at 1 GB/s: a slow pageable PCIe link
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(diagnosis, "measure", lambda fn, repeat, warmup, device: [copy_s] * repeat)
    loader = DataLoader(torch.randn(ROWS, ROW_FLOATS), batch_size=BATCH)
    d = diagnose(loader, sleep_step(0.008), batches=6, warmup=1, replay=4)  # the step stands in for a GPU's
    assert d.figures.transfer_s == copy_s and _pinning_gain(d) > 1.1  # 4 ms of copy in a batch of 8 ms and more
    assert any(r.notebook == "06, 07" for r in d.recommendations)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_step_on_pageable_batches_is_told_to_pin(quiet):
    w = torch.randn(ROW_FLOATS, 256, device="cuda")
    loader = DataLoader(torch.randn(ROWS, ROW_FLOATS), batch_size=BATCH)
    d = diagnose(loader, lambda b: b.to("cuda") @ w, batches=6, warmup=1, replay=4)
    assert d.figures.transfer_s > 0 and _pinning_gain(d)
    assert any(r.notebook == "06, 07" for r in d.recommendations)
