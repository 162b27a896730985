"""The DDP script under torchrun with 2 CPU processes (gloo): shards, coverage, and weights vs one process."""

import json

import numpy as np
import pytest
import torch

from fastloops_helpers.experiments import distributed


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("ddp")
    kw = dict(world_size=2, rows=1_001, epochs=2, batch_size=64)
    ranks = distributed.launch(log_dir, "helpers", **kw)
    reference = distributed.launch(log_dir, "helpers", reference=True, **kw)
    return log_dir, ranks, reference


def test_each_rank_logs_its_epochs(runs):
    _, ranks, _ = runs
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in ranks)
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
    diff = distributed.relative_weight_difference(log_dir / "helpers-rank0-weights.pt",
                                             log_dir / "helpers-reference2-weights.pt")
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
