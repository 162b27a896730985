import numpy as np
import pytest

from fastloops_helpers.data import otto_csv as otto


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    return otto.generate_otto(tmp_path_factory.mktemp("otto") / "train.csv", rows=600, seed=3)


def _rewrite(src, dst, line_no, edit):
    lines = src.read_text().splitlines()
    lines[line_no - 1] = edit(lines[line_no - 1])
    dst.write_text("\n".join(lines) + "\n")
    return dst


def test_generator_writes_ottos_csv_format(csv_path):
    lines = csv_path.read_text().splitlines()
    assert lines[0] == ",".join(otto.HEADER) and len(lines) == 601
    fields = lines[1].split(",")
    assert fields[0] == "1" and fields[-1] in otto.CLASSES and len(fields) == 95
    assert all(f.isdigit() for f in fields[1:-1])


def test_reader_returns_float_counts_and_labels(csv_path):
    X, y = otto.read_otto(csv_path)
    assert X.shape == (600, 93) and X.dtype == np.float32 and y.dtype == np.int64
    assert (X >= 0).all() and (X == np.round(X)).all()
    assert 0.5 < (X == 0).mean() < 0.95  # sparse, like the real counts
    assert set(np.unique(y)) <= set(range(9)) and np.bincount(y, minlength=9).argmax() == 1  # Class_2 dominates


def test_generator_is_seeded(tmp_path, csv_path):
    again = otto.generate_otto(tmp_path / "train.csv", rows=600, seed=3)
    assert again.read_bytes() == csv_path.read_bytes()
    other = otto.generate_otto(tmp_path / "other.csv", rows=600, seed=4)
    assert other.read_bytes() != csv_path.read_bytes()


def test_classes_are_learnable_beyond_the_majority_class():
    X, y = otto.read_otto(otto.generate_otto(_tmp(), rows=4000, seed=0))
    X_tr, y_tr, X_va, y_va = otto.split(X, y, 0.25, seed=0)
    # nearest class mean on log counts: a far weaker model than the MLP, still well above the majority class
    f = np.log1p
    means = np.stack([f(X_tr[y_tr == c]).mean(0) for c in range(9)])
    pred = ((f(X_va)[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    majority = np.bincount(y_tr).argmax()
    assert (pred == y_va).mean() > (y_va == majority).mean() + 0.15


def _tmp():
    import tempfile

    return tempfile.mkdtemp() + "/train.csv"


def test_split_is_disjoint_and_typed(csv_path):
    X, y = otto.read_otto(csv_path)
    X_tr, y_tr, X_va, y_va = otto.split(X, y, val_fraction=0.2, seed=0)
    assert len(X_va) == 120 and len(X_tr) == 480 and X_tr.dtype == np.float32 and y_va.dtype == np.int64
    rows = {r.tobytes() for r in X_tr} & {r.tobytes() for r in X_va}
    assert len(X_tr) + len(X_va) == len(X) and len(rows) <= 5  # only genuinely repeated rows may coincide
    with pytest.raises(ValueError, match="val_fraction"):
        otto.split(X, y, val_fraction=1.0)


def test_wrong_header_is_named(csv_path, tmp_path):
    bad = _rewrite(csv_path, tmp_path / "h.csv", 1, lambda s: s.replace("feat_7,", "feat_seven,"))
    with pytest.raises(ValueError, match=r"line 1 .*column 8 is 'feat_seven', expected 'feat_7'"):
        otto.read_otto(bad)


@pytest.mark.parametrize("value", ["abc", "-1", "2.5", ""])
def test_bad_value_names_line_and_column(csv_path, tmp_path, value):
    def edit(line):
        f = line.split(",")
        f[5] = value
        return ",".join(f)

    bad = _rewrite(csv_path, tmp_path / "v.csv", 42, edit)
    with pytest.raises(ValueError, match=rf"line 42, column feat_5: '{value}' is not a non-negative integer"):
        otto.read_otto(bad)


def test_unknown_class_names_the_line(csv_path, tmp_path):
    bad = _rewrite(csv_path, tmp_path / "c.csv", 7, lambda s: s.rsplit(",", 1)[0] + ",Class_10")
    with pytest.raises(ValueError, match=r"line 7: unknown class 'Class_10'"):
        otto.read_otto(bad)


def test_rows_dataset_yields_one_float_row(csv_path):
    X, y = otto.read_otto(csv_path)
    x0, y0 = otto.OttoRows(X, y)[5]
    assert x0.dtype == np.float32 and x0.shape == (93,) and y0 == y[5]


def test_batch_times_counts_batches_after_skip_and_up_to_limit():
    from fastloops_helpers.experiments.training import batch_times, table

    batches = [(np.zeros(2), np.zeros(2))] * 6
    seen = []
    assert len(batch_times(batches, 2, lambda x, y: seen.append(1), skip=2)) == 8  # 4 timed per epoch
    assert len(seen) == 12  # but every batch was stepped
    assert len(batch_times(batches, 1, skip=0)) == 6
    assert len(batch_times(batches, 1, skip=1, limit=2)) == 2
    with pytest.raises(ValueError, match="no batch timed"):
        batch_times(batches[:2], 1, skip=2)
    t = table({"DataLoader": [0.2, 0.2], "fast": [0.1, 0.1]}, batch_size=10)
    assert t.loc["fast", "uplift_%"] == pytest.approx(-50) and t.loc["fast", "samples_per_s"] == pytest.approx(100)


def test_training_with_the_helpers_loader_beats_the_majority_class():
    import torch

    from fastloops_helpers import BatchLoader
    from fastloops_helpers.experiments.otto import train_and_evaluate

    X, y = otto.read_otto(otto.generate_otto(_tmp(), rows=3000, seed=2))
    X_tr, y_tr, X_va, y_va = otto.split(X, y, 0.2, seed=0)
    loader = BatchLoader((torch.from_numpy(X_tr), torch.from_numpy(y_tr)), batch_size=128, shuffle=True, seed=0)
    acc = train_and_evaluate(loader, {"X_val": X_va, "y_val": y_va}, 3, torch.device("cpu"))
    assert acc[-1] > (y_va == np.bincount(y_tr).argmax()).mean() + 0.1


def test_seed_protocol_loaders_keep_the_file_order_and_the_step_is_forward_only():
    import torch

    from fastloops_helpers.experiments import otto as exp

    X, y = otto.read_otto(otto.generate_otto(_tmp(), rows=600, seed=3))
    data = exp.seed_protocol_data({"X": X, "y": y, "beton": None}, rows=500)
    assert len(data["X"]) == 500 and data["beton"] is None
    loaders = exp.seed_protocol_loaders(data, 64, torch.device("cpu"))
    for name, loader in loaders.items():
        xs = torch.cat([x for x, _ in loader])
        assert torch.equal(xs, torch.from_numpy(X[:500])), name  # no shuffle, nothing dropped
    step = exp.forward_loss_factory(torch.device("cpu"))()
    loss = step(torch.tensor(X[:8]), torch.tensor(y[:8]))
    assert loss.requires_grad and torch.isfinite(loss)  # the graph is recorded, never walked backwards
    with pytest.raises(ValueError, match="wants 700 rows but the training split has 600"):
        exp.seed_protocol_data({"X": X, "y": y, "beton": None}, rows=700)


def test_seed_protocol_skips_the_seeds_eleven_batches_and_tabulates_each_uplift():
    import torch

    from fastloops_helpers.experiments import otto as exp

    assert exp.SEED_SKIP == 11  # the seed times a batch `if i > 10`: batches 0 to 10 are left out
    X, y = otto.read_otto(otto.generate_otto(_tmp(), rows=300, seed=4))
    data = exp.seed_protocol_data({"X": X, "y": y, "beton": None}, rows=300)
    cpu = torch.device("cpu")
    loaders = exp.seed_protocol_loaders(data, 20, cpu)  # 15 batches per epoch
    times = exp.seed_protocol(loaders, exp.forward_loss_factory(cpu), 2, cpu)
    assert {len(v) for v in times.values()} == {2 * (15 - exp.SEED_SKIP)}
    every = exp.seed_protocol(loaders, exp.forward_loss_factory(cpu), 2, cpu, skip=0)
    assert {len(v) for v in every.values()} == {2 * 15}
    t = exp.seed_table({"DataLoader": [0.2, 0.2, 0.4], "FFCV": [0.1, 0.1, 0.1], "helpers": [0.05, 0.05, 0.05]})
    assert list(t.columns) == ["Mean", "Median", "0.95-Quantile"]  # the seed's columns, in its order
    assert list(t.index) == ["DataLoader", "FFCV", "helpers", "UPLIFT FFCV (%)", "UPLIFT helpers (%)"]
    assert t.loc["UPLIFT FFCV (%)", "Median"] == pytest.approx(-50)
    assert t.loc["UPLIFT FFCV (%)", "Mean"] == pytest.approx((0.1 - 0.8 / 3) / (0.8 / 3) * 100)
    assert t.loc["DataLoader", "0.95-Quantile"] == pytest.approx(np.quantile([0.2, 0.2, 0.4], 0.95))
    assert t.loc["UPLIFT helpers (%)", "Median"] == pytest.approx(-75)


def test_the_seeds_loop_times_back_to_back_the_wait_and_the_step(monkeypatch):
    import torch

    from fastloops_helpers import measure
    from fastloops_helpers.experiments import otto as exp
    from fastloops_helpers.measure import clock

    ticks = [0.0]
    monkeypatch.setattr(clock, "now", lambda: ticks[0])  # a fake clock: only the loader and the step move it
    monkeypatch.setattr(measure, "now", lambda: ticks[0])

    def loader():
        for _ in range(14):
            ticks[0] += 1.0  # waiting for a batch
            yield torch.zeros(2, 3), torch.zeros(2)

    calls = []

    def step(x, y):
        calls.append(1)
        ticks[0] += 10.0

    times = exp.seed_protocol({"a": _Again(loader)}, lambda: step, 2, torch.device("cpu"))
    assert len(calls) == 2 * 14 and times == {"a": [11.0] * 6}  # every batch stepped; batches 11 to 13 timed
    every = exp.seed_protocol({"a": _Again(loader)}, lambda: step, 1, torch.device("cpu"), skip=0)
    assert every == {"a": [11.0] * 14}


class _Again:
    """A loader: a fresh generator from `make` at every epoch."""

    def __init__(self, make):
        self.make = make

    def __iter__(self):
        return self.make()


def test_load_only_takes_turns_and_gives_samples_per_s_per_round():
    import torch

    from fastloops_helpers.experiments import otto as exp

    calls = []

    class Loader:
        def __init__(self, name, batches):
            self.name, self.batches = name, batches

        def __iter__(self):
            calls.append(self.name)
            return iter([(torch.zeros(8, 3), torch.zeros(8))] * self.batches)

    load, rates = exp.load_only({"a": Loader("a", 4), "b": Loader("b", 2)}, 3, 8, torch.device("cpu"))
    assert calls[:2] == ["a", "b"] and len(calls) == 2 + 3 * 2  # one warm-up epoch each, then 3 rounds
    assert all(sorted(calls[i : i + 2]) == ["a", "b"] for i in (2, 4, 6))  # every round runs each loader once
    assert [len(r) for r in rates.values()] == [3, 3] and min(min(r) for r in rates.values()) > 0
    assert set(load.index) == {"a", "b"} and (load["samples_per_s"] > 0).all()


def test_a_full_step_epoch_is_a_block_with_its_waits_kept_apart():
    import torch

    from fastloops_helpers.experiments import otto as exp

    open_iterators = []

    class Loader:
        def __iter__(self):
            open_iterators.append(self)
            try:
                yield from [(torch.zeros(8, 3), torch.zeros(8))] * 5
            finally:
                open_iterators.remove(self)

    seen = []

    def factory():
        return lambda x, y: seen.append(len(open_iterators))  # a step sees only its own loader's iterator open

    timed = exp.step_times({"a": Loader(), "b": Loader()}, factory, 3, torch.device("cpu"))
    assert set(seen) == {1} and not open_iterators  # each epoch's iterator is closed before the next loader's
    assert {k: len(v) for k, v in timed.flat("waits").items()} == {"a": 3 * (5 - exp.SKIP), "b": 3 * (5 - exp.SKIP)}
    every = exp.compare({"a": Loader()}, 2, factory, torch.device("cpu"), skip=0)
    assert len(every["a"]) == 2 * 5  # skip=0 counts every batch, the first with its iterator's start-up


def test_per_round_splits_each_loaders_batches_into_its_rounds():
    from fastloops_helpers.experiments import otto as exp

    times = {"a": [1.0, 2, 3, 4, 5, 6], "b": [2.0, 2, 4, 4, 6, 6]}
    assert exp.per_round(times, 3, sum) == {"a": [3, 7, 11], "b": [4, 8, 12]}
    assert exp.per_round(times, 2, max) == {"a": [3, 6], "b": [4, 6]}
    with pytest.raises(ValueError, match="not the same number in each of 4 rounds"):
        exp.per_round(times, 4, sum)


def test_figures_save_each_ratio_of_the_targets_with_its_interval():
    import pandas as pd

    from fastloops_helpers import measure
    from fastloops_helpers.book import claims
    from fastloops_helpers.experiments import otto as exp

    names = ["FFCV", "DataLoader", "helpers"]
    load = pd.DataFrame({"samples_per_s": [3e5, 2e4, 3e6]}, index=names)
    full = pd.DataFrame({"median": [0.004, 0.006, 0.003]}, index=names)
    rates = {"FFCV": [3e5, 3.1e5, 2.9e5, 3e5, 3.2e5, 2.8e5], "DataLoader": [2e4] * 6, "helpers": [3e6] * 6}
    step_rounds = {
        "FFCV": [0.004] * 6,
        "DataLoader": [0.006, 0.005, 0.007, 0.006, 0.006, 0.006],
        "helpers": [0.003] * 6,
    }
    seed = exp.seed_table({n: [m] for n, m in zip(names, [0.001, 0.01, 0.0005])})
    seed_rounds = {"FFCV": [0.001] * 6, "DataLoader": [0.01, 0.011, 0.009, 0.01, 0.012, 0.01], "helpers": [0.0005] * 6}
    out = exp.figures(load, rates, full, step_rounds, seed, seed_rounds)
    want = measure.interval_figures(
        "otto_helpers_over_ffcv_load", [h / f for h, f in zip(rates["helpers"], rates["FFCV"])]
    )
    assert {k: out[k] for k in want} == want
    for target in (t for t in claims.TARGETS if t.benchmark == "bench-otto"):
        assert target.figure + "_ci_low" in out and target.verdict(out) == "met", target.figure
    assert out["otto_seed_protocol_uplift_pct"] == pytest.approx(-90)
    seed_ms = {k: v for k, v in out.items() if k.startswith("otto_seed_protocol_") and k.endswith("_ms")}
    assert seed_ms == pytest.approx({f"otto_seed_protocol_{n.lower()}_ms": m for n, m in zip(names, [1, 10, 0.5])})
    assert out["otto_seed_protocol_uplift_pct_ci_high"] < -50 and out["otto_dataloader_step_over_ffcv_step"] == 1.5
    without_ffcv = exp.figures(load.drop("FFCV"), rates, full.drop("FFCV"), step_rounds)
    assert (
        "otto_helpers_over_ffcv_load" not in without_ffcv and "otto_helpers_over_dataloader_load_ci_low" in without_ffcv
    )
