import pytest
import torch

from fastloops_helpers import config


def test_every_size_has_one_value_per_scale():
    for name, values in config.SIZES.items():
        assert len(values) == len(config.SCALES), name


def test_the_gpu_scale_is_workshop_but_smoke_for_the_cpu_parts_and_the_seeds_model():
    assert config.size("cifar.train", "gpu") == config.size("cifar.train", "workshop")
    assert config.size("cifar.wrn", "gpu") == (28, 10)
    assert config.size("threads.rounds", "gpu") == config.size("threads.rounds", "smoke")
    assert config.size("stream.images", "gpu") == 320 and config.size("anatomy.ladder_rounds", "gpu") == 3
    assert config.size("diagnose.batches", "gpu") == 24 and config.size("repeat", "gpu") == 7
    assert set(config.GPU_SCALE.values()) <= set(config.SCALES)
    assert all(any(n == k or n.startswith(k + ".") for n in config.SIZES) for k in config.GPU_SCALE)  # no stale key


def test_scale_reads_environment(monkeypatch):
    monkeypatch.setenv("FASTLOOPS_SCALE", "Smoke ")
    assert config.scale() == "smoke"
    assert config.size("loops.samples") == config.SIZES["loops.samples"][0]
    monkeypatch.setenv("FASTLOOPS_SCALE", "full")
    assert config.size("loops.epochs") == 1000


def test_default_scale_is_workshop(monkeypatch):
    monkeypatch.delenv("FASTLOOPS_SCALE", raising=False)
    assert config.scale() == "workshop"


def test_unknown_scale_lists_valid_ones(monkeypatch):
    monkeypatch.setenv("FASTLOOPS_SCALE", "huge")
    with pytest.raises(ValueError, match="'huge'.*smoke, workshop, full, gpu"):
        config.scale()


def test_unknown_size_name_is_a_clear_error():
    with pytest.raises(KeyError, match="no size named 'nope'"):
        config.size("nope")


def test_sizes_by_prefix(monkeypatch):
    monkeypatch.setenv("FASTLOOPS_SCALE", "full")
    assert config.sizes("ddp") == {"rows": 61_878, "epochs": 20, "batch_size": 512, "world_size": 2}


def test_device_default_and_override(monkeypatch):
    monkeypatch.delenv("FASTLOOPS_DEVICE", raising=False)
    assert config.device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("FASTLOOPS_DEVICE", "cpu")
    assert config.device() == torch.device("cpu")
    monkeypatch.setenv("FASTLOOPS_DEVICE", "banana")
    with pytest.raises(ValueError, match="'banana' is not a torch device"):
        config.device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_override_without_gpu_is_rejected(monkeypatch):
    monkeypatch.setenv("FASTLOOPS_DEVICE", "cuda")
    with pytest.raises(ValueError, match="sees no GPU"):
        config.device()


def test_folders_follow_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FASTLOOPS_RESULTS", str(tmp_path / "r"))
    monkeypatch.setenv("FASTLOOPS_DATA", str(tmp_path / "d"))
    assert config.results_dir() == tmp_path / "r" and (tmp_path / "r").is_dir()
    assert config.data_dir() == tmp_path / "d" and (tmp_path / "d").is_dir()


def test_relative_folders_resolve_against_the_project_root(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a kernel runs in notebooks/, not in the root
    monkeypatch.setenv("FASTLOOPS_RESULTS", "results/smoke-test")
    assert config.results_dir() == config.project_root() / "results" / "smoke-test"
