import pytest

from fastloops_helpers import claims, measure


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_DEVICE", "cpu")
    measure.save_results("02_getitem_cost", {"slide_100_speedup": 36.0}, path=tmp_path / "a.json")
    measure.save_results("bench-loops", {"helpers_over_numpy": 1.4, "dataloader_nw0_over_helpers": 80.0},
                        path=tmp_path / "b.json")
    measure.save_results("10_ffcv_otto", {"dataloader_step_ms": 10.0, "ffcv_step_ms": 1.0}, path=tmp_path / "c.json")
    return tmp_path


def _row(table, figure):
    return table[table.figure == figure].iloc[0]


def test_statuses_follow_thresholds_and_direction(folder):
    table = claims.evaluate(folder)
    assert len(table) == len(claims.CLAIMS)
    assert _row(table, "slide_100_speedup").status == "reproduced"
    assert _row(table, "dataloader_nw0_over_helpers").status == "reproduced"
    assert _row(table, "helpers_over_numpy").status == "not reproduced here"  # lower is better, 1.4 > 1.0
    assert _row(table, "grouped_speedup_2p26").status == "not measured"


def test_ratio_figures_and_gpu_claims(folder):
    row = _row(claims.evaluate(folder), "dataloader_step_ms/ffcv_step_ms")
    assert row.measured == pytest.approx(10.0)
    assert row.status == "needs a GPU"  # measured on the CPU: the seed's effect needs a GPU


def test_first_source_wins(folder):
    measure.save_results("01_the_question", {"dataloader_nw0_over_helpers": 2.0}, path=folder / "d.json")
    row = _row(claims.evaluate(folder), "dataloader_nw0_over_helpers")
    assert row.source == "bench-loops" and row.measured == 80.0


def test_checklist_orders_by_payoff_and_puts_unmeasured_last(folder):
    table = claims.checklist(folder)
    measured = table["payoff here (x)"].dropna().tolist()
    assert measured == sorted(measured, reverse=True) and measured[0] == 80.0
    assert table["payoff here (x)"].isna().sum() == len(claims.CHECKLIST) - 2
    assert table["payoff here (x)"].iloc[-1] != table["payoff here (x)"].iloc[-1]  # NaN at the end
