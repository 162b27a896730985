import json

import numpy as np
import pytest

from fastloops_helpers import measure


def test_summary_against_hand_computed_values():
    table = measure.summarize({"base": [1.0, 2.0, 3.0, 4.0, 10.0], "fast": [0.5, 0.5, 1.0, 1.0, 1.5]}, baseline="base")
    # p95 with linear interpolation: position 0.95 * 4 = 3.8 -> 4 + 0.8 * (10 - 4) = 8.8
    assert table.loc["base", "p95"] == pytest.approx(8.8)
    assert table.loc["base", "mean"] == pytest.approx(4.0)
    assert table.loc["base", "median"] == pytest.approx(3.0)
    assert table.loc["fast", "min"] == pytest.approx(0.5)
    # uplift as in seed 003: (1.0 - 3.0) / 3.0 * 100
    assert table.loc["fast", "uplift_%"] == pytest.approx(-66.6667, abs=1e-3)
    assert table.loc["base", "uplift_%"] == 0


def test_summary_rejects_unknown_baseline_and_empty_samples():
    with pytest.raises(KeyError, match="baseline 'x'"):
        measure.summarize({"a": [1.0]}, baseline="x")
    with pytest.raises(ValueError, match="no samples for 'a'"):
        measure.summarize({"a": []})


def test_measure_warms_up_then_repeats():
    calls = []
    samples = measure.measure(lambda: calls.append(1), repeat=4, warmup=2)
    assert len(samples) == 4 and len(calls) == 6
    assert all(s >= 0 for s in samples)
    with pytest.raises(ValueError, match="repeat >= 1"):
        measure.measure(lambda: None, repeat=0, warmup=0)


def test_timer_measures_elapsed_time():
    import time

    with measure.Timer() as t:
        time.sleep(0.02)
    assert 0.015 < t.seconds < 1.0


def test_show_uses_the_masked_prefix(capsys):
    measure.show("epoch", 0.08031)
    assert capsys.readouterr().out == "[timing] epoch: 0.08031 s\n"


def test_hardware_line_names_machine_and_versions():
    line = measure.hardware_line()
    assert "GiB RAM" in line and "torch " in line and "python " in line


def test_save_results_writes_documented_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTLOOPS_SCALE", "smoke")
    path = measure.save_results(
        "demo",
        {"ratio": np.float64(2.5)},
        rows=[{"n": np.int64(3)}],
        knobs={"batch_size": 300},
        repeats=5,
        path=tmp_path / "demo.json",
    )
    doc = json.loads(path.read_text())
    assert set(doc) == {"name", "provenance", "rows", "figures"}
    assert doc["figures"] == {"ratio": 2.5} and doc["rows"] == [{"n": 3}]
    prov = doc["provenance"]
    assert prov["scale"] == "smoke" and prov["knobs"] == {"batch_size": 300} and prov["repeats"] == 5
    assert prov["hardware"] == measure.hardware_line() and "torch" in prov["versions"]


def test_save_results_refuses_unserialisable_values(tmp_path):
    with pytest.raises(TypeError, match="cannot save object"):
        measure.save_results("bad", {}, rows=[{"x": object()}], path=tmp_path / "bad.json")


def test_interleaved_shuffle_runs_every_function_once_per_round_in_varying_orders():
    calls = []
    fns = {k: (lambda k=k: calls.append(k)) for k in "abcd"}
    seconds = measure.interleaved(fns, repeat=12, warmup=0, shuffle=True)
    assert {k: len(v) for k, v in seconds.items()} == dict.fromkeys("abcd", 12)
    rounds = [tuple(calls[i : i + 4]) for i in range(0, 48, 4)]
    assert all(sorted(r) == list("abcd") for r in rounds)
    assert len(set(rounds)) > 1  # not always the same order
    calls.clear()
    measure.interleaved(fns, repeat=3, warmup=0)
    assert calls == list("abcd") * 3  # without shuffle: the given order


def test_per_call_divides_by_the_calls_per_round():
    counts = {"a": 0, "b": 0}
    fns = {k: (lambda k=k: counts.__setitem__(k, counts[k] + 1)) for k in counts}
    seconds = measure.per_call(fns, number={"a": 10, "b": 3}, repeat=2, warmup=1)
    assert counts == {"a": 30, "b": 9} and all(len(v) == 2 for v in seconds.values())
    assert all(0 < s < 1 for v in seconds.values() for s in v)
    with pytest.raises(ValueError, match="number must be >= 1"):
        measure.per_call(fns, number=0)


def test_per_call_without_a_number_fills_about_a_block():
    counts = {"fast": 0}
    measure.per_call(
        {"fast": lambda: counts.__setitem__("fast", counts["fast"] + 1)}, repeat=1, warmup=0, block_s=0.001
    )
    assert counts["fast"] > 10  # a no-op is far shorter than a ms: many calls per round


def test_drain_runs_one_pass_and_counts_items():
    epoch = measure.drain(range(7))
    assert epoch() == 7 and epoch() == 7


def test_predicted_labels_a_single_run(capsys):
    assert measure.predicted("copy", 5, 20, 12.5, "GB/s")
    assert not measure.predicted("ratio", float("-inf"), 1.0, 1.2, "x")
    assert measure.predicted("speed-up", 3, float("inf"), np.float32(4.0))
    assert not measure.predicted("saved", 0, 25, -25.0, "%")  # a lower end of 0 decides: it is printed
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "copy: predicted 5-20 GB/s, measured 12.5 GB/s (single run): within",
        "ratio: predicted <= 1x, measured 1.2x (single run): missed",
        "speed-up: predicted >= 3, measured 4 (single run): within",
        "saved: predicted 0-25 %, measured -25 % (single run): missed",
    ]


def test_predicted_decides_per_round_values_by_their_interval(capsys):
    at_most = float("-inf")
    assert measure.predicted("ratio", at_most, 1.0, [0.8, 0.9, 0.85, 0.7, 0.95, 0.88], "x")
    assert not measure.predicted("ratio", at_most, 1.0, [0.97, 1.04, 1.01, 0.99, 1.02, 1.03, 0.98], "x")
    assert not measure.predicted("rate", 5, 20, np.array([21.0, 25, 22, 30, 24, 23]), "GB/s")
    assert not measure.predicted("rate", 5, 20, [10.0, 11, 12, 10, 11], "GB/s")  # 5 rounds decide nothing
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "ratio: predicted <= 1x, measured 0.865x (95 % interval 0.7 to 0.95, 6 rounds): within",
        "ratio: predicted <= 1x, measured 1.01x (95 % interval 0.97 to 1.04, 7 rounds): a tie on this machine",
        "rate: predicted 5-20 GB/s, measured 23.5 GB/s (95 % interval 21 to 30, 6 rounds): missed",
        "rate: predicted 5-20 GB/s, measured 11 GB/s (5 rounds: 6 or more bound an interval): too few rounds to decide",
    ]


def test_a_span_verdict_is_met_only_inside_and_missed_only_outside():
    from fastloops_helpers.measure import TIE, verdict

    assert verdict([2.0, 2.1, 2.2, 2.05, 2.15, 2.12], (1.0, 3.0)).word == "met"
    assert verdict([3.5, 3.6, 3.7, 3.55, 3.65, 3.62], (1.0, 3.0)).word == "missed"
    edge = verdict([2.9, 3.1, 2.95, 3.05, 3.0, 2.98], (1.0, 3.0))
    assert edge.word == TIE and "target 1 to 3" in str(edge)


def test_progress_shows_a_bar_only_for_loops_longer_than_min_steps(capsys):
    from fastloops_helpers.measure import display

    list(display.progress(range(display.MIN_STEPS), desc="short"))
    assert "short" not in capsys.readouterr().err
    list(display.progress(range(display.MIN_STEPS + 1), desc="long"))
    assert "long: 100%" in capsys.readouterr().err


def test_median_interval_uses_order_statistics():
    from fastloops_helpers.measure import median_interval

    assert median_interval([5, 1, 4, 2, 3]) == (float("-inf"), float("inf"))  # 5 rounds cannot reach 95 %
    assert median_interval([6, 1, 5, 2, 4, 3]) == (1, 6)  # 6 rounds: min and max cover 1 - 2/64 = 96.9 %
    low, high = median_interval(list(range(1, 21)))  # 20 rounds: the 6th and 15th values (95.9 %)
    assert (low, high) == (6, 15)
    assert median_interval(list(range(1, 21)), confidence=0.99) == (4, 17)  # 99.7 %


def test_a_verdict_near_its_threshold_is_a_tie():
    from fastloops_helpers.measure import TIE, verdict

    assert verdict([1.1, 1.2, 1.15, 1.3, 1.12, 1.18], 1.0).word == "met"
    assert verdict([0.9, 0.8, 0.85, 0.7, 0.88, 0.82], 1.0).word == "missed"
    close = verdict([0.97, 1.04, 1.01, 0.99, 1.02, 1.03, 0.98], 1.0)
    assert close.word == TIE and close.low < 1 < close.high and "interval" in str(close)
    assert verdict([0.9, 0.8, 0.85, 0.7, 0.88, 0.82], 1.0, higher_is_better=False).word == "met"


def test_a_verdict_over_too_few_rounds_says_so_rather_than_tie_or_decide():
    from fastloops_helpers.measure import MIN_ROUNDS, TOO_FEW, verdict

    few = verdict([1.5, 1.6, 1.4, 1.55, 1.45], 1.0)  # 5 rounds: the median's 95 % interval is unbounded
    assert few.word == TOO_FEW and "5 rounds" in str(few) and "inf" not in str(few)
    assert verdict([1.5, 1.6, 1.4, 1.55, 1.45, 1.5], 1.0).word == "met" and MIN_ROUNDS == 6
    assert all(verdict([1.0] * n, (0.5, 2.0)).word == TOO_FEW for n in range(1, MIN_ROUNDS))


def test_rounds_are_added_until_the_interval_is_narrow_or_the_budget_is_spent():
    import itertools
    import time as _time

    from fastloops_helpers.measure import interleaved_until_steady

    steady = interleaved_until_steady(
        {"a": lambda: _time.sleep(0.002), "b": lambda: _time.sleep(0.001)}, "a", "b", rounds=6, halfwidth=10.0
    )
    assert len(steady["a"]) == len(steady["b"]) == 6  # already narrow enough: no extra round
    noisy_a = itertools.cycle([0.001, 0.006, 0.002, 0.005])
    noisy = interleaved_until_steady(
        {"a": lambda: _time.sleep(next(noisy_a)), "b": lambda: _time.sleep(0.002)},
        "a",
        "b",
        rounds=6,
        halfwidth=0.001,
        budget=2.0,
    )
    assert len(noisy["a"]) == len(noisy["b"]) > 6  # too wide: rounds were added, until about twice the time
    assert len(noisy["a"]) < 6 * 4


def test_the_memory_probe_sees_this_process_grow_and_its_workers():
    import multiprocessing as mp

    import numpy as np

    from fastloops_helpers import measure

    before = measure.memory_by_process()[0]
    block = np.ones(64 * 2**20 // 8)  # 64 MiB of this process's own (anonymous) pages, touched
    after = measure.memory_by_process()[0]
    assert after["role"] == "main" and after["anonymous_mb"] - before["anonymous_mb"] > 48
    assert after["pss_mb"] - before["pss_mb"] > 48 and after["uss_mb"] <= after["pss_mb"] + 1
    child = mp.get_context("fork").Process(target=__import__("time").sleep, args=(30,))
    child.start()
    try:
        rows = measure.memory_by_process()
        assert [r["pid"] for r in rows if r["role"] == "worker"] == [child.pid]
        total = measure.pss_mb()
        assert total["workers"] > 0 and abs(total["total"] - sum(r["pss_mb"] for r in rows)) < 8  # two readings apart
    finally:
        child.kill()
        child.join()
    del block
