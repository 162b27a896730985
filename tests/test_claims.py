import numpy as np
import pytest

from fastloops_book import claims, runs
from fastloops_helpers import measure


def test_every_claim_is_well_formed():
    names = [c.name for c in claims.CLAIMS]
    assert len(names) == len(set(names))
    for c in claims.CLAIMS:
        assert c.needs in ("", "gpu", "published"), c.name
        assert c.notebook[:2].isdigit(), c.name
        if c.needs == "published":
            assert c.seed_figure and c.source, f"{c.name}: a published claim quotes its figure and source"
        if c.at_least is not None and c.at_most is not None:
            assert c.at_least < c.at_most, c.name


def test_check_prints_one_verdict_line(capsys):
    claims.check("slide_100_speedup", 24.0)
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert out.startswith(
        "[claim] slide_100_speedup: measured 24x (single run), needs >= 5x: reproduced (seed 000/001: 122 µs"
    )


def test_check_reads_the_figure_from_a_figures_dict_and_ratios():
    assert claims.holds("slide_100_speedup", {"slide_100_speedup": 6.0})
    assert not claims.holds("slide_100_speedup", {"slide_100_speedup": 4.0})
    name = "index_only_custom_over_dataloader"
    assert claims.get(name).key == "index_only_DataLoader_ms/index_only_slide_FastDataloader_ms"
    ratio = {"index_only_DataLoader_ms": 200.0, "index_only_slide_FastDataloader_ms": 10.0}
    assert claims.holds(name, ratio)  # 20x >= 10x
    assert "measured 20x (single run), needs >= 10x: reproduced" in claims.line(name, ratio)
    assert not claims.holds(name, {"index_only_slide_FastDataloader_ms": 10.0})  # absent: not held


def test_one_name_one_number():
    # notebook 01 saves dataloader_nw0_over_numpy as the median of per-round ratios: the claim reads that figure
    figures = {"ms_per_epoch_dataloader_nw0": 773.0, "ms_per_epoch_numpy": 10.0}
    figures |= measure.interval_figures("dataloader_nw0_over_numpy", [106.4, 100, 110, 104, 108, 103, 109])
    assert "measured 106x (95 % interval 100 to 110)" in claims.line("dataloader_nw0_over_numpy", figures)
    # a figures dict that holds a figure under a claim's name while the claim reads another is refused
    name = "index_only_custom_over_dataloader"
    both = {name: 30.0, "index_only_DataLoader_ms": 200.0, "index_only_slide_FastDataloader_ms": 10.0}
    with pytest.raises(ValueError, match="one name, one number"):
        claims.check(name, both)


def test_a_figure_without_rounds_is_a_single_run_and_never_a_tie():
    assert claims.status("slide_100_speedup", 5.0) == claims.REPRODUCED  # on the threshold: the value decides
    assert claims.status("slide_100_speedup", 4.99) == claims.NOT_REPRODUCED
    assert "(single run)" in claims.line("timer_sleep_ratio", 1.0)
    assert "single run" not in claims.line("memmap_val_same_batches", True)  # a yes/no claim has no rounds


def test_directions_ranges_and_yes_no():
    assert claims.holds("helpers_over_numpy", 0.9) and not claims.holds("helpers_over_numpy", 1.1)
    assert claims.holds("timer_sleep_ratio", 1.0) and not claims.holds("timer_sleep_ratio", 0.5)
    assert not claims.holds("timer_sleep_ratio", 5.0)
    assert claims.holds("memmap_val_same_batches", True) and not claims.holds("memmap_val_same_batches", False)
    assert "measured yes, needs yes: reproduced" in claims.line("memmap_val_same_batches", True)


def test_statuses_for_gpu_published_and_unmeasured():
    assert claims.status("pinned_copy_speedup", 3.0, device="cpu") == claims.NEEDS_GPU
    assert claims.status("pinned_copy_speedup", 3.0, device="cuda:0") == claims.REPRODUCED
    assert claims.status("spdl_imagenet_faster_pct", None) == claims.PUBLISHED
    assert claims.status("slide_100_speedup", None) == claims.NOT_MEASURED
    assert "not measured (JAX is not installed)" in claims.line(
        "jax_device_put_moves_all", None, why="JAX is not installed"
    )


def test_unknown_claim_names_the_registry():
    with pytest.raises(KeyError, match="no claim named 'nope'.*add a row"):
        claims.check("nope", 1.0)


def test_checklist_items_read_registered_notebooks():
    producers = {c.notebook for c in claims.CLAIMS}
    assert all(notebook in producers for _, notebook, _ in claims.CHECKLIST)


@pytest.fixture
def docs(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_DEVICE", "cpu")
    measure.save_results("02_getitem_cost", {"slide_100_speedup": 36.0}, path=tmp_path / "a.json")
    measure.save_results(
        "bench-loops", {"helpers_over_numpy": 1.4, "dataloader_nw0_over_helpers": 80.0}, path=tmp_path / "b.json"
    )
    measure.save_results(
        "01_the_question", {"helpers_over_numpy": 0.7, "dataloader_nw0_over_helpers": 50.0}, path=tmp_path / "c.json"
    )
    measure.save_results(
        "10_ffcv_otto",
        {"otto_dataloader_step_ms": 10.0, "otto_ffcv_step_ms": 1.0, "otto_dataloader_step_over_ffcv_step": 10.0},
        path=tmp_path / "d.json",
    )
    measure.save_results("07_dataloader_anatomy", {"workers2_over_workers0": 1.8}, path=tmp_path / "e.json")
    return runs.load(tmp_path)


def _row(table, name):
    return table[table.claim == name].iloc[0]


def test_evaluate_reads_only_the_notebooks(docs):
    table = runs.evaluate(docs)
    assert len(table) == len(claims.CLAIMS)
    assert _row(table, "helpers_over_numpy")["measured here"] == 0.7  # notebook 01, not bench-loops' 1.4
    assert _row(table, "helpers_over_numpy").status == claims.REPRODUCED
    assert _row(table, "grouped_speedup_headline").status == claims.NOT_MEASURED
    assert _row(table, "otto_dataloader_step_over_ffcv_step").status == claims.NEEDS_GPU
    assert set(table.status) <= set(claims.STATUSES)


def test_benchmark_targets_read_only_benchmarks(docs):
    table = runs.targets(docs).set_index("figure")
    assert table.loc["helpers_over_numpy", "benchmark run"] == 1.4  # bench-loops, not notebook 01's 0.7
    assert table.loc["helpers_over_numpy", "verdict"] == "missed"  # target <= 1.0
    assert table.loc["dataloader_nw0_over_helpers", "verdict"] == "met"
    assert table.loc["helpers_gb_per_s", "verdict"] == "not run"


def test_checklist_orders_by_payoff_from_notebooks_only(docs):
    table = runs.checklist(docs)
    measured = table["payoff here (x)"].dropna().tolist()
    assert measured == sorted(measured, reverse=True) and measured[0] == 50.0  # 01's, not bench-loops' 80
    workers = table[table["do this"].str.contains("workers")].iloc[0]
    assert workers["payoff here (x)"] == pytest.approx(1.8)  # from notebook 07, before any benchmark ran
    assert pd_isna(table["payoff here (x)"].iloc[-1]) and table["paid off here"].iloc[-1] == "not measured"
    assert workers["paid off here"] == "yes (single run)"
    assert runs.paid_off(0.95) == "no: not faster here (single run)" and runs.paid_off(float("nan")) == "not measured"
    assert runs.paid_off(1.06, (0.95, 1.2)) == claims.TIE  # the notebook's interval spans 1: no verdict
    assert runs.paid_off(1.3, (1.1, 1.5)) == "yes" and runs.paid_off(0.8, (0.7, 0.9)) == "no: not faster here"


def pd_isna(x):
    return x != x


def test_conflicting_names_are_found(tmp_path):
    measure.save_results("10_ffcv_otto", {"ffcv_over_dataloader_load": 10.0}, path=tmp_path / "a.json")
    measure.save_results("11_ffcv_cifar", {"ffcv_over_dataloader_load": 30.0}, path=tmp_path / "b.json")
    assert runs.conflicts(runs.load(tmp_path)) == {"ffcv_over_dataloader_load": ["10_ffcv_otto", "11_ffcv_cifar"]}


def test_results_saved_before_their_notebooks_latest_run_are_leftovers(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_SCALE", "smoke")
    measure.save_results("01_the_question", {"a": 1.0}, path=tmp_path / "a.json")
    measure.save_results("02_getitem_cost", {"b": 1.0}, path=tmp_path / "b.json")
    docs = runs.load(tmp_path)
    times = {
        "smoke": {
            "started": {
                "01_the_question.ipynb": "2000-01-01T00:00:00+00:00",
                "02_getitem_cost.ipynb": "2999-01-01T00:00:00+00:00",
            }
        },
        "workshop": {"started": {"01_the_question.ipynb": "2999-01-01T00:00:00+00:00"}},
    }
    assert runs.stale(docs, times) == ["02_getitem_cost"]  # 01's smoke result is newer than its smoke run


def test_per_round_ratios_are_judged_by_their_interval():
    name = next(
        c.name for c in claims.CLAIMS if c.at_least == 1.0 and c.at_most is None and not c.needs and "/" not in c.key
    )
    clear = [1.3, 1.25, 1.4, 1.35, 1.28, 1.33]
    assert claims.status(name, clear) == claims.REPRODUCED
    assert claims.status(name, [0.7, 0.8, 0.75, 0.72, 0.78, 0.74]) == claims.NOT_REPRODUCED
    close = [0.97, 1.04, 1.01, 0.99, 1.02, 1.03, 0.98]
    assert claims.status(name, close) == claims.TIE
    assert claims.holds(name, close)  # the median alone would have said "reproduced"
    saved = measure.interval_figures(claims.get(name).key, close)
    assert claims.status(name, saved) == claims.TIE and "95 % interval" in claims.line(name, saved)


def test_a_benchmark_target_with_a_saved_interval_can_be_a_tie():
    target = claims.Target("bench-x", "speed", at_least=1.0)
    assert target.verdict({"speed": 1.02}) == "met"  # no interval saved: the plain threshold
    assert target.verdict(measure.interval_figures("speed", [0.97, 1.04, 1.01, 0.99, 1.02, 1.03, 0.98])) == claims.TIE
    assert target.verdict(measure.interval_figures("speed", [1.2, 1.3, 1.25, 1.22, 1.28, 1.21])) == "met"
    assert target.verdict({}) == "not run"


def test_a_gpu_target_says_so_where_it_is_not_run_and_a_parity_target_names_its_tie():
    target = claims.Target("bench-x", "share", at_most=0.05, needs="gpu")
    assert target.verdict({}) == claims.NEEDS_GPU and claims.Target("bench-x", "share").verdict({}) == "not run"
    measured = measure.interval_figures("share", [0.01, 0.02, 0.03, 0.02, 0.01, 0.04])
    assert target.verdict(measured) == claims.NEEDS_GPU  # a CPU's run of the same figure does not judge it
    assert target.verdict(measured, "cuda:0") == "met" and target.verdict({}, "cuda") == "not run"
    wide = measure.interval_figures("share", [0.01, 0.02, 0.03, 0.02, 0.01, 0.06])
    assert target.verdict(wide, "cuda") == claims.TIE
    assert claims.Target("bench-x", "r", at_most=1.0, parity=True).needed() == "<= 1x (a tie is parity)"


def _page_buffer_order(n: int, page_size: int, open_pages: int, rng: np.random.Generator) -> np.ndarray:
    """A QUASI_RANDOM-like order: pages opened in a random order, `open_pages` at a time, each sample drawn
    uniformly from the open pages' remaining rows (a stand-in for notebook 04's replica)."""
    pages = [list(rng.permutation(np.arange(p, min(p + page_size, n)))) for p in range(0, n, page_size)]
    waiting = list(rng.permutation(len(pages)))
    buffer: list[int] = []
    order = []
    while waiting or buffer:
        while waiting and len(buffer) < open_pages:
            buffer.append(waiting.pop())
        page = buffer[rng.integers(len(buffer))]
        order.append(pages[page].pop())
        if not pages[page]:
            buffer.remove(page)
    return np.array(order)


def test_the_quasi_random_claim_fails_when_ffcvs_order_is_a_full_shuffle():
    """At a batch of 2, 4 of the 8 pages are open and the class mix is poorer than a full shuffle's: the claim
    tells the two apart there (at a batch of 100 all 8 pages are open and it could not)."""
    from fastloops_helpers.teach.quasi_random import batch_class_entropy

    labels = np.repeat(np.arange(10), 410)[:4096]  # 4,096 rows in 10 sorted classes, 8 pages of 512
    rng = np.random.default_rng(0)

    def entropy(orders, b=2):
        return float(np.mean([batch_class_entropy(labels, o, b) for o in orders]))

    replica = entropy([_page_buffer_order(4096, 512, 4, rng) for _ in range(4)])
    figures = {"quasi_replica_entropy_bits_small_batch": replica}
    same = entropy([_page_buffer_order(4096, 512, 4, rng) for _ in range(4)])
    full = entropy([rng.permutation(4096) for _ in range(4)])
    name = "quasi_random_replica_matches_ffcv"
    assert claims.holds(name, figures | {"quasi_ffcv_entropy_bits_small_batch": same})
    assert not claims.holds(name, figures | {"quasi_ffcv_entropy_bits_small_batch": full}), (replica, full)
