"""The DDP script under torchrun with 2 CPU processes (gloo): placement, shards, coverage, weights vs one process."""

import os

import numpy as np
import pytest
import torch

from fastloops_helpers.experiments import distributed


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("ddp")
    kw = dict(world_size=2, rows=1_001, epochs=2, batch_size=64, gpus=1)  # one GPU for two ranks: both on the CPU
    ranks = distributed.launch(log_dir, "helpers", **kw)
    reference = distributed.launch(log_dir, "helpers", reference=True, **kw)
    return log_dir, ranks, reference


CPU, CUDA0, CUDA1 = torch.device("cpu"), torch.device("cuda", 0), torch.device("cuda", 1)


@pytest.mark.parametrize(
    "world_size, gpus, backend, devices",
    [
        (2, 0, "gloo", [CPU, CPU]),
        (2, 1, "gloo", [CPU, CPU]),  # not rank 1 on cuda:1, which one GPU does not have; not a world of one either
        (2, 2, "nccl", [CUDA0, CUDA1]),
        (2, 3, "nccl", [CUDA0, CUDA1]),  # a spare GPU stays idle
        (1, 1, "nccl", [CUDA0]),
        (1, 0, "gloo", [CPU]),
    ],
)
def test_placement_gives_every_rank_its_own_gpu_or_all_the_cpu(world_size, gpus, backend, devices):
    assert distributed.placement(world_size, gpus) == (backend, devices)


@pytest.mark.parametrize("world_size, gpus", [(0, 1), (2, -1)])
def test_placement_names_a_bad_value(world_size, gpus):
    with pytest.raises(ValueError, match=f"world_size={world_size}, gpus={gpus}"):
        distributed.placement(world_size, gpus)


def test_a_process_that_sees_one_gpu_runs_the_two_rank_reference_on_the_cpu(tmp_path, monkeypatch):
    """The device comes from placement with the GPU count torch reports, not from cuda:{LOCAL_RANK}."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    args = distributed.parse(["--log-dir", str(tmp_path), "--rows", "1001", "--epochs", "1", "--reference", "2"])
    assert args.gpus == 1
    assert distributed.train(args)["device"] == "cpu"  # not cuda:1, which one GPU does not have


def test_each_rank_logs_its_epochs(runs):
    _, ranks, reference = runs
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in ranks)
    assert [r["device"] for r in ranks + reference] == ["cpu"] * 3  # placement(2, 1): the ranks and the reference
    assert all(len(r["epochs"]) == 2 for r in ranks)


@pytest.mark.parametrize("epoch", [0, 1])
def test_shards_are_disjoint_and_cover_the_data(runs, epoch):
    log_dir, ranks, _ = runs
    rows = ranks[0]["train_rows"]
    check = distributed.check_shards(log_dir, "helpers", 2, epoch, rows)
    assert check["covered"] and check["disjoint"] and check["equal_sizes"]
    assert check["repeated"] == rows % 2  # DistributedSampler pads an odd split with one repeated index


def test_epochs_have_different_orders(runs):
    log_dir, _, _ = runs
    a, b = (np.load(log_dir / f"helpers-rank0-epoch{e}.npy") for e in (0, 1))
    assert not np.array_equal(a, b)


def test_ddp_matches_one_process_on_the_same_global_batches(runs):
    log_dir, ranks, reference = runs
    diff = distributed.relative_weight_difference(
        log_dir / "helpers-rank0-weights.pt", log_dir / "helpers-reference2-weights.pt"
    )
    assert diff < 1e-5
    assert ranks[0]["val_accuracy"] == pytest.approx(reference[0]["val_accuracy"], abs=1e-3)


def test_check_shards_detects_overlap(tmp_path):
    np.save(tmp_path / "x-rank0-epoch0.npy", np.array([0, 1, 2]))
    np.save(tmp_path / "x-rank1-epoch0.npy", np.array([2, 3, 4]))  # index 2 twice, 5 missing
    check = distributed.check_shards(tmp_path, "x", 2, 0, rows=6)
    assert not check["covered"] and not check["disjoint"]


def test_failed_launch_reports_stderr(tmp_path):
    with pytest.raises(RuntimeError, match="failed with exit code"):
        distributed.launch(tmp_path, "helpers", world_size=2, rows=1_001, epochs=1, batch_size=0, reference=True)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_both_sharding_functions_pad_and_cover_alike(world_size):
    rows = 101
    train = {"X": torch.zeros(rows, 3), "y": torch.zeros(rows, dtype=torch.long), "id": torch.arange(rows)}
    for make in (distributed.sampler_batches, distributed.helpers_batches):
        shards = [torch.cat([b["id"] for b in make(train, 8, r, world_size, 0, 1)]).numpy() for r in range(world_size)]
        check = distributed.shard_check(shards, rows)
        assert check["covered"] and check["disjoint"] and check["equal_sizes"]
        assert check["repeated"] == check["expected_padding"] == -rows % world_size
        ids, counts = np.unique(np.concatenate(shards), return_counts=True)
        padding = -rows % world_size  # the padding repeats the first indices of the permutation: each rank's first
        assert set(ids[counts > 1].tolist()) == {int(s[0]) for s in shards[:padding]}


def test_different_seeds_per_rank_break_the_shards():
    rows = 100
    train = {"X": torch.zeros(rows, 3), "y": torch.zeros(rows, dtype=torch.long), "id": torch.arange(rows)}
    shards = [
        torch.cat([b["id"] for b in distributed.helpers_batches(train, 10, r, 2, r, 0)]).numpy() for r in range(2)
    ]
    check = distributed.shard_check(shards, rows)
    assert not check["covered"] and not check["disjoint"]


def test_throughput_and_figures_read_the_logs():
    logs = [
        {
            "epochs": [
                {"samples": 100, "seconds": 9.0},
                {"samples": 100, "seconds": 1.0},
                {"samples": 100, "seconds": 3.0},
            ]
        }
    ] * 2
    speed = distributed.throughput(logs, "two ranks")  # epoch 0 (warm-up) left out: median of 1 s and 3 s
    assert speed == {"run": "two ranks", "ranks": 2, "samples/s per rank": 50.0, "samples/s total": 100.0}
    single = distributed.throughput(logs[:1], "one")
    checks = [{"covered": True, "disjoint": True}] * 2
    figs = distributed.figures(checks, 1e-7, 0.5, 0.501, [speed, single])
    assert figs["ddp_matches_single"] == 1.0 and figs["shards_ok"] == 1.0 and figs["ddp_total_over_single"] == 2.0
    assert distributed.figures(checks, 0.1, 0.5, 0.5, [speed, single])["ddp_matches_single"] == 0.0


def test_a_liveness_run_slows_the_ranks_functions_too(tmp_path, monkeypatch):
    """torchrun's ranks import the package afresh: they slow what the slowed notebook's kernel slowed."""
    from fastloops_book import liveness
    from fastloops_book.instruments import hooks

    monkeypatch.setenv(liveness.INHERIT, "fastloops_helpers.experiments.distributed:train_epoch:0.5;")
    monkeypatch.setenv("PYTHONPATH", hooks.environment(dict(os.environ))["PYTHONPATH"])  # as the slowed kernel has
    log = distributed.launch(tmp_path, "helpers", world_size=2, rows=1_001, epochs=1, batch_size=64, reference=True)
    assert log[0]["epochs"][0]["seconds"] >= 0.5  # train_epoch slept at least 0.5 s inside the timed epoch
