"""measure.steps: each loader waits as it would alone, in blocks that still take turns."""

import statistics
import time

import pytest
import torch

from fastloops_helpers.measure import Timer
from fastloops_helpers.measure import steps as steps_module
from fastloops_helpers.measure.steps import Blocks, compare_steps, producers

STEP_S = 0.010  # the simulated step: shorter than the slow loader's batch (32 samples x 1 ms)


class SlowRows(torch.utils.data.Dataset):
    """A Dataset that sleeps 1 ms per sample: a batch of 32 takes over 32 ms in its worker."""

    def __len__(self) -> int:
        return 32 * 40

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.001)
        return torch.zeros(4), 0


def sleep_step(x, y) -> None:
    time.sleep(STEP_S)


def waits_alone(loader, timed: int = 12, skip: int = 2) -> list[float]:
    """The loader alone in a plain training loop: the wait for each batch after the first `skip`."""
    batches, waits = iter(loader), []
    for i in range(skip + timed):
        with Timer() as wait:
            batch = next(batches)
        sleep_step(*batch)
        if i >= skip:
            waits.append(wait.seconds)
    del batches  # shuts its worker down
    return waits


def test_a_slow_one_worker_loader_waits_beside_an_instant_one_as_it_waits_alone():
    slow = torch.utils.data.DataLoader(SlowRows(), batch_size=32, num_workers=1)
    instant = [(torch.zeros(32, 4), torch.zeros(32))] * 40
    alone, beside = [], []
    for _ in range(3):  # alone and beside take turns too: a busy machine slows both alike
        alone += waits_alone(slow, timed=6)
        times = compare_steps({"slow": slow, "instant": instant}, lambda: sleep_step, rounds=2, blocks=Blocks(1, 3))
        beside += times.flat("waits")["slow"]
    alone_s, beside_s = statistics.median(alone), statistics.median(beside)
    assert alone_s > STEP_S  # the loader is slower than the step: alone, the loop waits for it
    assert abs(beside_s / alone_s - 1) <= 0.15, f"waits {beside_s * 1e3:.1f} ms beside, {alone_s * 1e3:.1f} ms alone"


def test_blocks_take_turns_with_fresh_iterators_closed_before_the_next_block():
    events = []

    class Loader:
        def __init__(self, name):
            self.name = name

        def __iter__(self):
            events.append(("start", self.name))
            try:
                for i in range(10):
                    yield torch.tensor(i), torch.tensor(0)
            finally:
                events.append(("closed", self.name))

    times = compare_steps({"a": Loader("a"), "b": Loader("b")}, lambda: lambda x, y: None, 4, Blocks(2, 3))
    assert [len(r) for r in times.steps["a"]] == [3] * 4 and len(times.flat("waits")["b"]) == 12
    assert [kind for kind, _ in events] == ["start", "closed"] * 8
    assert all(events[i + 1] == ("closed", events[i][1]) for i in range(0, 16, 2))  # closed before the next starts
    assert sorted(n for kind, n in events if kind == "start") == ["a"] * 4 + ["b"] * 4


def test_every_loader_gets_its_own_step_and_each_batch_passes_through_it():
    seen = []

    def factory():
        mine = []
        seen.append(mine)
        return lambda x, y: mine.append(int(x))

    compare_steps({"a": [(torch.tensor(i), 0) for i in range(5)]}, factory, 2, Blocks(settle=2, timed=None))
    assert seen == [[0, 1, 2, 3, 4] * 2]  # timed=None runs to the end of the epoch


def test_a_rounds_wait_share_is_its_waits_over_its_steps():
    times = steps_module.StepTimes({"a": [[1.0, 1.0], [0.0, 0.0]]}, {"a": [[2.0, 8.0], [2.0, 2.0]]}, {"a": [0.0, 0.0]})
    assert times.shares() == {"a": [0.2, 0.0]}  # the GPU idle 2 s of 10, not the mean of per-step shares (0.3125)


def test_per_round_and_flat_keep_the_rounds_apart():
    times = compare_steps({"a": [(0, 0)] * 6, "b": [(0, 0)] * 6}, lambda: lambda x, y: None, 3, Blocks(1, 2))
    assert {k: len(v) for k, v in times.per_round("waits").items()} == {"a": 3, "b": 3}
    assert times.per_round("steps", max)["a"] == [max(r) for r in times.steps["a"]]
    assert all(w <= s for w, s in zip(times.flat("waits")["a"], times.flat("steps")["a"]))
    with pytest.raises(ValueError, match="'steps' or 'waits'"):
        times.flat("wait")


def test_a_dataloader_with_workers_is_timed_over_whole_bursts():
    rows = torch.utils.data.TensorDataset(torch.zeros(64, 2), torch.zeros(64))
    two = torch.utils.data.DataLoader(rows, batch_size=4, num_workers=2)
    assert producers(two) == 2 and producers(torch.utils.data.DataLoader(rows)) == 1 and producers([1]) == 1
    times = compare_steps({"two": two}, lambda: lambda x, y: None, 1, Blocks(1, 3))
    assert [len(r) for r in times.steps["two"]] == [4]  # 3 timed steps rounded up to two bursts of 2


def test_what_cannot_be_compared_is_named():
    with pytest.raises(ValueError, match="'it' is an iterator"):
        compare_steps({"it": iter([(0, 0)])}, lambda: lambda x, y: None, 1)
    with pytest.raises(ValueError, match="'short' ran out after 3 batches"):
        compare_steps({"short": [(0, 0)] * 3}, lambda: lambda x, y: None, 1, Blocks(2, 2))
    with pytest.raises(ValueError, match="settle >= 0 and timed >= 1"):
        Blocks(settle=1, timed=0)


def test_a_block_that_times_its_first_batch_counts_making_the_iterator():
    from fastloops_helpers.measure.steps import block

    class SlowStart:  # start-up (a DataLoader starting its workers) happens in iter(), before any batch
        def __iter__(self):
            time.sleep(0.2)
            return iter([(0, 0)] * 3)

    waits, steps, ahead = block("slow start", SlowStart(), lambda x, y: None, Blocks(settle=0, timed=None))
    assert len(waits) == 3 and waits[0] >= 0.2 > max(waits[1:]) and steps[0] >= waits[0] and ahead == 0
    waits, *_ = block("slow start", SlowStart(), lambda x, y: None, Blocks(settle=1, timed=None))
    assert len(waits) == 2 and max(waits) < 0.2  # settled: the start-up is left out with the first batch


def test_blocks_leave_a_persistent_dataloaders_workers_to_its_next_epoch():
    from fastloops_helpers.measure.steps import block

    loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2, num_workers=1, persistent_workers=True)
    for _ in range(2):  # shutting the workers down would break the loader's next epoch ("Queue is closed")
        waits, *_ = block("persistent", loader, lambda *batch: None, Blocks(settle=0, timed=None))
        assert len(waits) == 4
    workers = loader._iterator._workers
    assert all(w.is_alive() for w in workers)  # kept between epochs, as persistent_workers promises
    loader._iterator._shutdown_workers()


class QueuedStream:
    """A host clock and one simulated GPU stream, as CUDA queues work.

    `launch` queues work that starts when the work before it has ended (never before the host queued it) and
    returns at once; an event recorded at host time h completes at max(h, the end of the work queued before it).
    """

    def __init__(self) -> None:
        self.host = 0.0
        self.tail = 0.0  # when the stream's queued work ends

    def mark(self) -> float:
        return max(self.host, self.tail)

    def seconds(self, first: float, second: float) -> float:
        return second - first

    def now(self) -> float:
        return self.host

    def sync(self) -> None:
        self.host = max(self.host, self.tail)

    def launch(self, seconds: float) -> None:
        self.tail = max(self.host, self.tail) + seconds
        self.host += 0.0001  # launching kernels costs the host a little, not the work's time


class HostWork:
    """A loader whose every batch costs the host `seconds` on the simulated clock (no background workers)."""

    def __init__(self, stream: QueuedStream, seconds: float, batches: int = 20) -> None:
        self.stream, self.seconds, self.batches = stream, seconds, batches

    def __iter__(self):
        for _ in range(self.batches):
            self.stream.host += self.seconds
            yield (None,)


@pytest.mark.parametrize(("load_s", "idle_s"), [(0.010, 0.006), (0.001, 0.0)])
def test_on_a_gpu_a_wait_is_the_streams_idle_time_between_queued_steps(monkeypatch, load_s, idle_s):
    """A 4 ms step behind a 10 ms loader leaves the GPU idle 6 ms a step; behind a 1 ms one, never (the floor)."""
    from fastloops_helpers.measure import steps

    stream = QueuedStream()
    monkeypatch.setattr(steps, "marks", lambda device: stream)
    waits, times, ahead = steps.block("loader", HostWork(stream, load_s), lambda _: stream.launch(0.004), Blocks(2, 10))
    assert waits == pytest.approx([idle_s] * 10, abs=2e-4)
    assert times == pytest.approx([max(load_s + 0.0001, 0.004)] * 10, abs=2e-4)  # the slower of the two sets it
    # the host queued the last step this long before the stream ran it: behind the slow loader, the last 4 ms step
    # less its 0.1 ms launch; behind the fast one, 4 - 1.1 ms gained on each of the 12 steps, after the first batch
    assert ahead == pytest.approx(0.0039 if load_s > 0.004 else load_s + 12 * (0.004 - load_s - 0.0001), abs=3e-5)
    # a clock of the host's time in next() would read load_s for each batch: 1 ms where the GPU never idles


def test_marks_are_cuda_events_on_a_cuda_device_and_the_hosts_clock_elsewhere():
    from fastloops_helpers.measure import steps

    assert isinstance(steps.marks("cuda:0"), steps.StreamClock) and steps.marks("cuda:0").device.index == 0
    assert type(steps.marks("cpu")) is steps.HostClock and type(steps.marks(None)) is steps.HostClock
    assert type(steps.marks(torch.device("meta"))) is steps.HostClock
