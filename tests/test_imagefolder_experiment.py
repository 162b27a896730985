"""experiments.imagefolder on a tiny synthetic folder: the loaders apply the batched transform, both sides agree."""

import pandas as pd
import pytest
import torch

from fastloops_helpers.data import memmap
from fastloops_helpers.data.jpeg_folder import ImageFolder, write_synthetic_imagefolder
from fastloops_helpers.experiments import imagefolder as exp


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("imf") / "folder"
    write_synthetic_imagefolder(root, n_train=8, n_val=6, seed=0, size=120)
    out = {}
    for split in exp.SPLITS:
        ds = ImageFolder(root / split, transform=exp.sample_transform(split).precompute)
        out[split] = memmap.write_memmap(ds, root.parent / f"mm-{split}", backend="numpy")
    return exp.Prepared(root, out["train"], out["val"])


def test_val_memmap_loader_gives_the_dataloaders_batches(tiny):
    dl = list(exp.dataloader(tiny.folder, "val", 4, 0))
    for loader in (exp.memmap_loader(tiny.val, "val", 4), exp.memmap_loader(tiny.val, "val", 4, num_threads=2)):
        mm = list(loader)
        assert len(mm) == len(dl) == 2
        for (a, la), (b, lb) in zip(dl, mm):
            assert torch.equal(a, b) and torch.equal(la, lb)


@pytest.mark.parametrize("num_workers, num_threads", [(0, 1), (0, 2), (1, 1)])
def test_train_loaders_yield_normalised_crops_of_every_image(tiny, num_workers, num_threads):
    loader = exp.memmap_loader(tiny.train, "train", 3, num_workers, num_threads)
    batches = list(loader)
    labels = torch.cat([y for _, y in batches])
    assert sorted(labels.tolist()) == sorted(tiny.train.labels.tolist())  # every image once per epoch
    x = batches[0][0]
    assert x.shape[1:] == (3, exp.CROP, exp.CROP) and x.dtype == torch.float32 and x.min() < 0


def test_images_per_second_counts_images_and_speedups_pick_best_over_best(tiny):
    timed = exp.images_per_second(exp.memmap_loader(tiny.val, "val", 4), repeat=2, warmup=0)
    assert timed["images_per_s"] == pytest.approx(6 / timed["epoch_s"]) and timed["epoch_s_p95"] >= timed["epoch_s"]
    rows = [
        {"split": "val", "pipeline": "DataLoader + ImageFolder", "images_per_s": 10.0},
        {"split": "val", "pipeline": "DataLoader + ImageFolder", "images_per_s": 20.0},
        {"split": "val", "pipeline": exp.ONE_PROCESS, "images_per_s": 100.0},
        {"split": "val", "pipeline": "memmap + threads", "images_per_s": 300.0},
    ]
    figures = exp.speedups(rows)
    assert figures["memmap_val_speedup"] == 15 and figures["memmap_val_one_process_speedup"] == 5


def test_stage_costs_and_transform_costs_tables(tiny):
    costs = exp.per_image_costs(tiny.folder, "val", 2, n=2, repeat=1)
    assert list(costs["stage"])[0] == "open + decode" and costs["predicted_images_per_s"].is_monotonic_decreasing
    assert len(costs) == 4 and list(costs["stage"])[1].startswith("precompute")
    ms = costs["ms_per_image"].tolist()
    rounds = costs.attrs["decode_over_transforms_rounds"]  # one ratio per round: open + decode over the rest
    assert len(rounds) == 1 and rounds[0] == pytest.approx(ms[0] / sum(ms[1:]))  # one round: the medians themselves
    assert costs.attrs["read_ms_per_image"] > 0 and exp.READ not in set(costs["stage"])
    table = exp.transform_costs(tiny.train.images[:2].clone(), repeat=3, num_threads=2)
    assert (
        set(table["stage"]) == {"normalise", "crop", "flip", "all three"} and table.attrs["tutorial_over_helpers"] > 0
    )
    rounds = table.attrs["tutorial_over_helpers_rounds"]  # one ratio per round, whose median is the figure
    assert len(rounds) == 3 and table.attrs["tutorial_over_helpers"] == sorted(rounds)[1]


def test_tutorial_loader_yields_tensorclass_batches_like_the_helpers(tiny):
    tut = list(exp.tutorial_loader(tiny.val, "val", 4))
    mm = list(exp.memmap_loader(tiny.val, "val", 4))
    assert [type(b).__name__ for b in tut] == ["ImageNetData", "ImageNetData"]
    for a, (b, lb) in zip(tut, mm):
        torch.testing.assert_close(a.images, b, atol=1e-5, rtol=1e-5)  # InvAffine divides where the helpers multiply
        assert torch.equal(a.targets, lb)
    train = list(exp.tutorial_loader(tiny.train, "train", 3))
    assert sorted(torch.cat([b.targets for b in train]).tolist()) == sorted(tiny.train.labels.tolist())
    assert train[0].images.shape[1:] == (3, exp.CROP, exp.CROP) and train[0].images.dtype == torch.float32
    timed = exp.images_per_second(exp.tutorial_loader(tiny.val, "val", 4), repeat=1, warmup=0)
    assert timed["images_per_s"] == pytest.approx(6 / timed["epoch_s"])  # tensorclass batches are counted too


def test_sweep_times_the_tutorials_loader_and_speedups_compare_with_it():
    assert (exp.TUTORIAL, 0, 1) in exp.configurations([0, 2])
    rows = [
        {"split": "train", "pipeline": "DataLoader + ImageFolder", "images_per_s": 10.0},
        {"split": "train", "pipeline": exp.TUTORIAL, "images_per_s": 25.0},
        {"split": "train", "pipeline": exp.ONE_PROCESS, "images_per_s": 100.0},
    ]
    figures = exp.speedups(rows)
    assert figures["memmap_train_speedup"] == 10  # the tutorial's loader is neither baseline nor best memmap
    assert figures["tutorial_train_images_per_s"] == 25 and figures["memmap_train_one_process_over_tutorial"] == 4


def test_tutorial_from_dataset_and_collate(tmp_path):
    from fastloops_helpers.teach import tutorial_transforms as tut

    items = [(torch.full((3, 5, 5), i, dtype=torch.uint8), i % 2) for i in range(7)]
    in_memory = tut.ImageNetData.from_dataset(items, batch_size=3)
    on_disk = tut.ImageNetData.from_dataset(items, str(tmp_path / "tc"), batch_size=3)
    again = tut.ImageNetData.load_memmap(str(tmp_path / "tc"))
    for data in (in_memory, on_disk, again):
        assert data.images[:, 0, 0, 0].tolist() == list(range(7)) and data.targets.tolist() == [0, 1, 0, 1, 0, 1, 0]
    batch = tut.Collate(tut.InvAffine(), "cpu")(in_memory[[0, 2]])
    assert batch.images.dtype == torch.float32 and batch.targets.tolist() == [0, 0]
    assert tut.Collate()(in_memory[[1]]).images.dtype == torch.uint8  # no transform, no device: unchanged


def test_transform_costs_times_the_chain_it_is_given(tiny):
    from fastloops_helpers.teach import tutorial_transforms as tut

    chain = tut.tutorial_train_transform(exp.CROP)
    table = exp.transform_costs(tiny.train.images[:2].clone(), repeat=1, num_threads=1, tutorial=chain)
    assert len(table) == 9 and table.attrs["tutorial_over_helpers"] > 0


def test_head_to_head_times_the_sweeps_best_two_in_rounds(tiny):
    def row(pipeline, rate, w=0, threads=1):
        return {"split": "val", "pipeline": pipeline, "num_workers": w, "num_threads": threads, "images_per_s": rate}

    rows = [
        row("DataLoader + ImageFolder", 10.0),
        row("DataLoader + ImageFolder", 5.0, w=1),
        row(exp.ONE_PROCESS, 100.0),
        row("memmap + threads", 300.0, threads=2),
        row(exp.TUTORIAL, 50.0),
    ]
    best = exp.best_rows(rows, "val")
    assert best[exp.BEST_MEMMAP]["pipeline"] == "memmap + threads" and best[exp.BEST_DATALOADER]["num_workers"] == 0
    rates = exp.head_to_head(tiny, "val", rows, 4, rounds=6)
    assert set(rates) == {exp.BEST_MEMMAP, exp.BEST_DATALOADER, exp.ONE_PROCESS}
    assert all(len(r) == 6 for r in rates.values()) and rates[exp.ONE_PROCESS] != rates[exp.BEST_MEMMAP]
    ratios = exp.speedup_ratios(rates)
    assert ratios == [m / d for m, d in zip(rates[exp.BEST_MEMMAP], rates[exp.BEST_DATALOADER])]
    figures = exp.round_figures("val", rates)
    assert (
        figures["memmap_val_speedup_ci_low"] <= figures["memmap_val_speedup"] <= figures["memmap_val_speedup_ci_high"]
    )
    assert figures["memmap_val_speedup_ci_low"] == min(ratios)  # six rounds: the interval spans them all
    assert figures["memmap_val_one_process_speedup"] == exp.measure.median(exp.speedup_ratios(rates, exp.ONE_PROCESS))
    # when the one-process loader is the best memmap loader, it is timed once and serves both ratios
    one_best = exp.head_to_head(tiny, "val", rows[:3], 4, rounds=2)
    assert one_best[exp.ONE_PROCESS] is one_best[exp.BEST_MEMMAP] and len(one_best[exp.BEST_DATALOADER]) == 2


def test_the_tutorial_loader_runs_the_transform_it_is_given(tiny):
    """Notebook 09 passes its cells' own modules: the sweep's tutorial loader must apply them, not the package's."""
    from fastloops_helpers.teach import tutorial_transforms as tut

    class Counted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls, self.inner = 0, tut.InvAffine()

        def forward(self, x):
            self.calls += 1
            return self.inner(x)

    given = Counted()
    assert len(list(exp.tutorial_loader(tiny.val, "val", 4, transform=given))) == given.calls == 2
    loader = exp.make_loader(tiny, "val", exp.TUTORIAL, 0, 1, 4, tutorial=given)
    assert len(list(loader)) == 2 and given.calls == 4
    rows = exp.sweep(tiny, "val", [0], 4, repeat=1, tutorial=given)
    assert [r["pipeline"] for r in rows].count(exp.TUTORIAL) == 1 and given.calls == 8  # one warm-up, one timed


def _interval(key, median, low, high):
    return {key: median, key + "_ci_low": low, key + "_ci_high": high}


def test_stage_answer_says_which_side_dominates_as_the_interval_says():
    costs = pd.DataFrame(
        {"stage": ["open + decode", "precompute", "per epoch", "collate"], "ms_per_image": [3.0, 1.0, 0.5, 0.1]}
    )
    costs.attrs["read_ms_per_image"] = 0.02
    answer = exp.stage_answer(costs, _interval("decode_over_transforms", 2.0, 1.8, 2.2))
    assert "open + decode dominates" in answer and "largest single stage: open + decode (65%" in answer
    assert "the transforms dominate" in exp.stage_answer(costs, _interval("decode_over_transforms", 0.8, 0.7, 0.9))
    assert "a tie" in exp.stage_answer(costs, _interval("decode_over_transforms", 1.0, 0.9, 1.1))


def test_parallel_rounds_time_one_process_against_its_fastest_workers_and_threads(tiny):
    def row(pipeline, rate, w=0, threads=1):
        return {"split": "val", "pipeline": pipeline, "num_workers": w, "num_threads": threads, "images_per_s": rate}

    rows = [
        row("DataLoader + ImageFolder", 10.0),
        row(exp.ONE_PROCESS, 100.0),
        row("memmap + threads", 300.0, threads=2),
        row("memmap + threads", 200.0, threads=4),
        row("memmap + DataLoader workers", 40.0, w=2),
        row("memmap + DataLoader workers", 50.0, w=1),
    ]
    chosen = exp.parallel_rows(rows, "val")
    assert chosen["memmap + threads"]["num_threads"] == 2 and chosen["memmap + DataLoader workers"]["num_workers"] == 1
    rates = exp.parallel_rounds(tiny, "val", rows, 4, rounds=6)
    assert set(rates) == {exp.ONE_PROCESS, *exp.PARALLEL} and all(len(r) == 6 for r in rates.values())
    figures = exp.parallel_figures("val", rates)
    ratios = [w / o for w, o in zip(rates["memmap + DataLoader workers"], rates[exp.ONE_PROCESS])]
    assert figures["memmap_val_workers_over_one_process_ci_low"] == min(ratios)  # six rounds: all of them
    assert figures["memmap_val_threads_images_per_s"] == exp.measure.median(rates["memmap + threads"])
    # the verdict follows the interval: wholly below 1 slower, wholly above faster, across 1 a tie
    figures |= _interval("memmap_val_workers_over_one_process", 0.4, 0.3, 0.5)
    figures |= _interval("memmap_val_threads_over_one_process", 1.0, 0.9, 1.2)
    workers, threads = exp.parallel_verdicts(figures, "val", chosen)
    assert workers.startswith("multiple worker processes (workers=1): slower than one process")
    assert threads.startswith("multiple threads (threads=2): a tie with one process")
    figures |= _interval("memmap_val_threads_over_one_process", 1.5, 1.2, 1.9)
    assert "faster than" in exp.parallel_verdicts(figures, "val", chosen)[1]
    only_one = exp.parallel_rows(rows[:2], "val")  # no worker or thread rows (workers=[0]): no contenders, no lines
    assert list(only_one) == [exp.ONE_PROCESS] and exp.parallel_verdicts({}, "val", only_one) == []
