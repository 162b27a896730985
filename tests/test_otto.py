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
    with pytest.raises(ValueError, match="ran out after 2 batches"):
        batch_times(batches[:2], 1, skip=2)
    t = table({"DataLoader": [0.2, 0.2], "fast": [0.1, 0.1]}, batch_size=10)
    assert t.loc["fast", "uplift_%"] == pytest.approx(-50) and t.loc["fast", "samples_per_s"] == pytest.approx(100)
