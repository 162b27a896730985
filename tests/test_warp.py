"""The warp (measure/warp.py): FASTLOOPS_WARP scales every duration measure returns by a seeded factor per contender."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from fastloops_helpers.measure import clock, stats, warp


@pytest.fixture
def one_second_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every timed call last exactly 1 s: clock.now() reads 0, 1, 2, ..."""
    ticks = itertools.count()
    monkeypatch.setattr(clock, "now", lambda: float(next(ticks)))


def _seeded(monkeypatch: pytest.MonkeyPatch, seed: int | None) -> None:
    monkeypatch.setattr(warp, "SEED", seed)


def _fresh_factors(seed: str | None) -> str:
    """Return the factors a fresh interpreter computes (another PYTHONHASHSEED, so hash() would differ)."""
    env = {k: v for k, v in os.environ.items() if k != warp.ENV}
    env["PYTHONHASHSEED"] = "random"
    if seed is not None:
        env[warp.ENV] = seed
    code = (  # warp.py alone, without the package (and torch) around it: a quick start
        f"import importlib.util as u; s = u.spec_from_file_location('warp', {warp.__file__!r}); "
        "warp = u.module_from_spec(s); s.loader.exec_module(warp); "
        "print(warp.SEED, warp.factors(['numpy', 'helpers', 'torch']), warp.factor('alone'))"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_factors_are_deterministic_across_processes_and_change_with_the_seed() -> None:
    first, again, other = _fresh_factors("1"), _fresh_factors("1"), _fresh_factors("2")
    assert first == again and first.startswith("1 {")
    assert other.startswith("2 {") and other != first  # ranks or alone factors move with the seed


def test_warp_off_when_unset_or_empty() -> None:
    assert _fresh_factors(None) == _fresh_factors("") == "None {'numpy': 1.0, 'helpers': 1.0, 'torch': 1.0} 1.0\n"
    assert warp._read_seed(None) is None and warp._read_seed(" ") is None and warp._read_seed("7") == 7
    with pytest.raises(ValueError, match="FASTLOOPS_WARP must be an integer seed"):
        warp._read_seed("yes")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_the_seed_reaches_a_worker_process(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    monkeypatch.setenv(warp.ENV, "7")  # what a spawned worker imports
    _seeded(monkeypatch, 7)  # what a forked worker inherits
    keys = ["a", "b", "c"]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context(method)) as pool:
        in_child = pool.submit(warp.factors, keys).result()
    assert in_child == warp.factors(keys) and set(in_child.values()) == {1 / 4, 1.0, 4.0}


@pytest.mark.parametrize("seed", range(8))
def test_every_two_contenders_of_one_call_move_apart_by_more_than_the_wide_margin(
    monkeypatch: pytest.MonkeyPatch, one_second_calls: None, seed: int
) -> None:
    _seeded(monkeypatch, seed)
    same = lambda: None  # noqa: E731 (every contender takes exactly 1 s)
    for n in range(2, 6):
        names = [f"c{i}" for i in range(n)]
        seconds = clock.interleaved(dict.fromkeys(names, same), repeat=3, warmup=0)
        for a, b in itertools.permutations(names, 2):
            moved = stats.ratio(seconds, a, b)  # 1.0 unwarped
            assert moved >= warp.STEP > warp.WIDE or moved <= 1 / warp.STEP < 1 / warp.WIDE
    pair = clock.interleaved({"x": same, "y": same}, repeat=2, warmup=0)
    assert stats.ratio(pair, "x", "y") in (16.0, 1 / 16)  # two contenders: 4 and 1/4


def test_every_duration_measure_returns_is_warped(monkeypatch: pytest.MonkeyPatch, one_second_calls: None) -> None:
    _seeded(monkeypatch, 3)
    f = warp.factor("mine")
    assert f in (4.0, 0.25)
    with clock.Timer(contender="mine") as t:
        pass
    assert t.seconds == f
    assert clock.measure(lambda: None, repeat=2, warmup=0, contender="mine") == [f, f]
    assert clock.elapsed(clock.now(), contender="mine") == f
    fs = warp.factors(["p", "q"])
    assert clock.per_call({"p": lambda: None, "q": lambda: None}, number=1, repeat=2, warmup=0) == {
        k: [v, v] for k, v in fs.items()
    }
    steady = clock.interleaved_until_steady({"p": lambda: None, "q": lambda: None}, "p", "q", rounds=6, warmup=0)
    assert steady == {k: [v] * 6 for k, v in fs.items()}  # the same factors in every round


def test_a_timer_without_a_name_is_named_by_its_line(monkeypatch: pytest.MonkeyPatch, one_second_calls: None) -> None:
    _seeded(monkeypatch, 5)
    seconds = []
    for _ in range(3):  # one line, one contender: the same factor every pass
        with clock.Timer() as t:
            pass
        seconds.append(t.seconds)
    assert len(set(seconds)) == 1 and seconds[0] in (4.0, 0.25)
    lines = {clock.measure(lambda: None, 1, 0)[0], clock.measure(lambda: None, 1, 0)[0]}
    assert lines <= {4.0, 0.25}
    found = {warp.factor(("site", "cell.py", line)) for line in range(20)}
    assert found == {4.0, 0.25}  # sites get both factors


def test_now_is_not_warped_and_durations_are_real_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, 1)
    assert clock.now is time.perf_counter  # absolute readings stay real: time never runs backwards
    readings = [clock.now() for _ in range(1000)]
    assert readings == sorted(readings)
    _seeded(monkeypatch, None)
    with clock.Timer(contender="mine") as t:
        time.sleep(0.02)
    assert 0.02 <= t.seconds < 1.0  # real seconds (a 4x or 1/4x warp would leave this window)
