"""Seed 003's CIFAR protocol as the replay runs it (experiments/cifar.py): what a CPU can check of it."""

import numpy as np
import pytest
import torch

from fastloops_helpers import measure
from fastloops_helpers.experiments import cifar
from fastloops_helpers.measure import clock


def test_the_skip_is_the_seeds_eleven_unless_a_pass_is_too_short():
    assert cifar.seed_skip(50) == 11 and cifar.seed_skip(13) == 11  # `if i > 10`: batches 0..10 left out
    assert cifar.seed_skip(12) == 10 and cifar.seed_skip(10) == 8  # the smoke scale: 10 batches, 2 timed
    with pytest.raises(ValueError, match="3 or more batches.*got 2"):
        cifar.seed_skip(2)


def test_the_replay_runs_the_seeds_wrn_28_10_on_cuda_and_the_scales_elsewhere():
    assert cifar.replay_wrn(torch.device("cuda"), 16, 2) == (28, 10)
    assert cifar.replay_wrn(torch.device("cpu"), 16, 2) == (16, 2)


@pytest.fixture
def fake_clock(monkeypatch):
    t = [0.0]
    monkeypatch.setattr(measure, "now", lambda: t[0])
    monkeypatch.setattr(clock, "now", lambda: t[0])
    return t


def test_a_pass_times_arrival_to_arrival_and_leaves_the_first_batches_out(fake_clock):
    def loader(loads=(1.0, 2.0, 3.0, 4.0, 5.0)):
        for i, load in enumerate(loads):
            fake_clock[0] += load  # the batch takes `load` seconds to arrive
            yield torch.tensor([i]), torch.tensor([i])

    def step(x, y):
        fake_clock[0] += 0.5

    assert cifar.seed_pass(loader(), None, torch.device("cpu"), skip=2) == [3.0, 4.0, 5.0]
    assert cifar.seed_pass(loader(), step, torch.device("cpu"), skip=2) == [3.5, 4.5, 5.5]


def test_the_protocol_runs_the_seeds_four_passes_in_its_order():
    calls = []

    class Loader:
        def __init__(self, name):
            self.name = name

        def __iter__(self):
            calls.append(self.name)
            return iter([(torch.zeros(1), torch.zeros(1))] * 4)

    steps = {n: (lambda x, y, n=n: calls.append(f"{n} step")) for n in ("FFCV", "DataLoader")}
    times = cifar.seed_protocol({"FFCV": Loader("FFCV"), "DataLoader": Loader("DataLoader")}, steps, "cpu", 1)
    assert [c for c in calls if not c.endswith("step")] == ["FFCV", "FFCV", "DataLoader", "DataLoader"]
    assert calls[1:5] == ["FFCV step"] * 4 and calls[-4:] == ["DataLoader step"] * 4  # full, load only, load, full
    assert {p: sorted(t) for p, t in times.items()} == {
        "full": ["DataLoader", "FFCV"],
        "load only": ["DataLoader", "FFCV"],
    }
    assert all(len(t) == 3 for phase in times.values() for t in phase.values())  # 4 batches, 1 left out
    calls.clear()
    alone = cifar.seed_protocol({"DataLoader": Loader("DataLoader")}, steps, "cpu", 1)  # no ffcv: no FFCV passes
    assert list(alone["full"]) == ["DataLoader"] and "FFCV step" not in calls


def test_the_table_is_the_seeds_with_its_uplift_row():
    # the seed's load-only medians as it printed them: 0.0008 s (FFCV) and 0.028822 s (DataLoader), uplift -97.22 %
    table = cifar.seed_table({"FFCV": [0.0008, 0.0008, 0.0009], "DataLoader": [0.028822, 0.028822, 0.03]})
    assert list(table.index) == ["FFCV", "DataLoader", "UPLIFT (%)"]
    assert list(table.columns) == ["Mean", "Median", "0.95-Quantile"]
    assert table.loc["UPLIFT (%)", "Median"] == pytest.approx((0.0008 - 0.028822) / 0.028822 * 100)
    assert table.loc["UPLIFT (%)", "Median"] == pytest.approx(-97.22, abs=0.01)
    assert table.loc["UPLIFT (%)", "Mean"] == pytest.approx(
        (np.mean([8, 8, 9]) / np.mean([288.22, 288.22, 300]) - 1) * 100
    )
    assert list(cifar.seed_table({"DataLoader": [1.0, 2.0]}).index) == ["DataLoader"]  # no FFCV, no uplift
    figures = cifar.seed_figures({"load only": table})
    assert figures["cifar_seed_protocol_load_uplift_pct"] == table.loc["UPLIFT (%)", "Median"]
    assert figures["cifar_seed_protocol_ffcv_load_median_ms"] == pytest.approx(0.8)


def test_the_seeds_steps_are_forward_and_loss_on_each_loaders_batch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 10))
    steps = cifar.seed_steps(model, torch.device("cpu"))
    x = torch.randint(0, 256, (4, 3, 2, 2), dtype=torch.uint8)
    y = torch.tensor([1, 2, 3, 4])
    ffcv = steps["FFCV"](x, y)  # FFCV's uint8 batch, divided by 255 in the step
    torch_loss = steps["DataLoader"](x.float() / 255, y[:, None])  # a float batch; labels flattened in the step
    assert torch.allclose(ffcv, torch_loss) and ffcv.requires_grad  # the graph is recorded, never stepped
    assert all(p.grad is None for p in model.parameters())


def test_the_seeds_dataloader_reads_in_order_with_one_worker():
    images = np.zeros((8, 32, 32, 3), np.uint8)
    data = {"images": images, "labels": np.arange(8), "beton": None}
    loaders = cifar.seed_loaders(data, 4, torch.device("cpu"), 48, 32)
    loader = loaders["DataLoader"]
    assert list(loaders) == ["DataLoader"]  # no .beton: no FFCV loader
    assert isinstance(loader.sampler, torch.utils.data.SequentialSampler)  # no shuffle
    assert loader.num_workers == 1 and loader.drop_last and loader.batch_size == 4
