"""The warp (book/fastloops_book/instruments/warp.py): FASTLOOPS_WARP scales every duration the clock returns."""

from __future__ import annotations

import itertools
import linecache
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from fastloops_book.instruments import hooks, warp
from fastloops_helpers.measure import clock, stats


@pytest.fixture
def one_second_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every timed call last exactly 1 s: clock.now() reads 0, 1, 2, ..."""
    ticks = itertools.count()
    monkeypatch.setattr(clock, "now", lambda: float(next(ticks)))


def _seeded(monkeypatch: pytest.MonkeyPatch, seed: int | None) -> None:
    """Turn the warp on with `seed` as the run's sitecustomize does (None: off), sites forgotten."""
    monkeypatch.setattr(warp, "SEED", seed)
    monkeypatch.setattr(warp, "_sites", {})
    monkeypatch.setattr(clock, "_scaling", None)
    warp.install()


def _fresh_factors(seed: str | None) -> str:
    """Return the factors a fresh interpreter computes (another PYTHONHASHSEED, so hash() would differ)."""
    env = {k: v for k, v in os.environ.items() if k != warp.ENV}
    env["PYTHONHASHSEED"] = "random"
    if seed is not None:
        env[warp.ENV] = seed
    code = (  # warp.py alone, without the packages (and torch) around it: a quick start
        f"import importlib.util as u; s = u.spec_from_file_location('warp', {warp.__file__!r}); "
        "warp = u.module_from_spec(s); s.loader.exec_module(warp); "
        "print(warp.SEED, warp.factors(['numpy', 'helpers', 'torch']), warp.alone(('cell.py', 3), 'x'))"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_factors_are_deterministic_across_processes_and_change_with_the_seed() -> None:
    first, again, other = _fresh_factors("1"), _fresh_factors("1"), _fresh_factors("2")
    assert first == again and first.startswith("1 {")
    assert other.startswith("2 {") and other != first  # ranks or alone factors move with the seed


def test_warp_off_when_unset_or_empty() -> None:
    assert _fresh_factors(None).startswith("None {'numpy': 1.0, 'helpers': 1.0, 'torch': 1.0}")
    assert warp._read_seed(None) is None and warp._read_seed(" ") is None and warp._read_seed("7") == 7
    with pytest.raises(ValueError, match="FASTLOOPS_WARP must be an integer seed"):
        warp._read_seed("yes")


def _clock_in_child(env: dict[str, str]) -> str:
    code = (
        "import sys, fastloops_helpers.measure.clock as c; "
        "print(c._scaling is not None, 'fastloops_book' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_runs_site_folder_installs_the_warp_in_every_child_and_nothing_without_a_seed() -> None:
    env = hooks.environment({k: v for k, v in os.environ.items() if k != warp.ENV})
    assert _clock_in_child({**env, warp.ENV: "1"}) == "True True"
    assert _clock_in_child(env) == "False False"  # a reader's process: no instrument, not even imported


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


def test_every_duration_the_clock_returns_is_warped(monkeypatch: pytest.MonkeyPatch, one_second_calls: None) -> None:
    _seeded(monkeypatch, 3)
    moved = {warp.STEP**e for e in warp.ALONE}
    with clock.Timer() as t:
        pass
    assert t.seconds in moved
    assert len(set(clock.measure(lambda: None, repeat=3, warmup=0))) == 1  # one contender: one factor
    assert clock.elapsed(clock.now()) in moved
    fs = warp.factors(["p", "q"])
    assert clock.per_call({"p": lambda: None, "q": lambda: None}, number=1, repeat=2, warmup=0) == {
        k: [v, v] for k, v in fs.items()
    }
    steady = clock.interleaved_until_steady({"p": lambda: None, "q": lambda: None}, "p", "q", rounds=6, warmup=0)
    assert steady == {k: [v] * 6 for k, v in fs.items()}  # the same factors in every round


def _read(name: str, size: int) -> float:
    """One reader's epoch, timed alone at one line: the way notebook 16 times its readers one by one."""
    with clock.Timer() as t:
        pass
    return t.seconds


def test_contenders_timed_one_by_one_at_one_site_get_distinct_factors(
    monkeypatch: pytest.MonkeyPatch, one_second_calls: None
) -> None:
    _seeded(monkeypatch, 5)
    readers = ["webdataset", "pyarrow Parquet", "datasets streaming", "ffcv"]
    first = {name: _read(name, 64) for name in readers}
    assert len(set(first.values())) == len(readers)  # every two readers apart by STEP at least
    assert {name: _read(name, 64) for name in readers} == first  # each pass of a reader: its own factor again
    assert {_read("webdataset", size) for size in (64, 128)} == {first["webdataset"], _read("webdataset", 128)}


def test_a_timing_inside_an_interleaved_contender_takes_its_factor(
    monkeypatch: pytest.MonkeyPatch, one_second_calls: None
) -> None:
    _seeded(monkeypatch, 2)
    inner: dict[str, list[float]] = {"a": [], "b": []}

    def contender(name: str):
        def one() -> None:
            with clock.Timer() as t:  # one line for both: the enclosing contender tells them apart
                pass
            inner[name].append(t.seconds)

        return one

    outer = clock.interleaved({"a": contender("a"), "b": contender("b")}, repeat=2, warmup=0)
    fs = warp.factors(["a", "b"])
    assert inner == {k: [fs[k]] * 2 for k in "ab"} and stats.ratio(outer, "a", "b") == pytest.approx(
        3 * fs["a"] / (3 * fs["b"])  # a contender's call spans its inner timer's two reads and its own
    )


def _run_cell(source: str, name: str) -> float:
    """Run `source` as a kernel runs a cell (its text in linecache under a file name of its own); return `seconds`."""
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    scope = {"clock": clock}
    exec(compile(source, name, "exec"), scope)
    return scope["seconds"]


def test_a_solution_cell_runs_unwarped_and_a_compared_cell_does_not(
    monkeypatch: pytest.MonkeyPatch, one_second_calls: None
) -> None:
    _seeded(monkeypatch, 4)
    body = "with clock.Timer() as t:\n    pass\nseconds = t.seconds\n"
    assert _run_cell(body, "/tmp/ipykernel_1/compared.py") != 1.0
    assert _run_cell(warp.SOLUTION_FIRST_LINE + "\n" + body, "/tmp/ipykernel_1/solution.py") == 1.0


def test_now_is_not_warped_and_durations_are_real_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, 1)
    assert clock.now is time.perf_counter  # absolute readings stay real: time never runs backwards
    readings = [clock.now() for _ in range(1000)]
    assert readings == sorted(readings)
    _seeded(monkeypatch, None)
    with clock.Timer() as t:
        time.sleep(0.02)
    assert 0.02 <= t.seconds < 1.0  # real seconds (a 4x or 1/4x warp would leave this window)


def _without_instruments(env: dict[str, str], seed: str | None) -> dict[str, str]:
    """Return `env` with the warp's seed set to `seed` (None: unset) and the instruments' folder off PYTHONPATH."""
    env = {k: v for k, v in env.items() if k != warp.ENV}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(hooks.SITE)]
    return {**env, "PYTHONPATH": os.pathsep.join(paths), **({warp.ENV: seed} if seed is not None else {})}


def test_make_tests_pytest_runs_with_the_instruments_installed(tmp_path) -> None:
    (tmp_path / "test_child.py").write_text(
        "import subprocess, sys\n"
        "import fastloops_helpers.measure.clock as clock\n\n"
        "def test_warped_here_and_in_a_child():\n"
        "    code = 'import fastloops_helpers.measure.clock as c; print(c._scaling is not None)'\n"
        "    child = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)\n"
        "    assert clock._scaling is not None and child.stdout.strip() == 'True'\n"
    )
    env = _without_instruments(dict(os.environ), "1")
    for how, passes in (["fastloops_book.runner", "pytest"], True), (["pytest"], False):  # plain pytest: no warp
        done = subprocess.run(
            [sys.executable, "-m", *how, "-q", "-p", "no:cacheprovider", "test_child.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert (done.returncode == 0) == passes, done.stdout[-2000:]


def _tie_notebook(path) -> None:
    """Write a notebook whose two compared cells print "tie" for two equal functions, timed two ways."""
    import nbformat

    cells = [
        "from fastloops_helpers import measure\n\n"
        "def a():\n    return sum(range(20_000))\n\n"
        "def b():\n    return sum(range(20_000))",
        't = measure.interleaved({"a": a, "b": b}, repeat=5, warmup=1)  # timed together\n'
        'r = measure.median(t["a"]) / measure.median(t["b"])\n'
        'print("tie" if 1 / 3 < r < 3 else "differ")',
        "m = {}\nfor fn in (a, b):  # timed one by one, at one site\n"
        "    m[fn.__name__] = measure.median(measure.measure(fn, repeat=5, warmup=1))\n"
        'r = m["a"] / m["b"]\n'
        'print("tie" if 1 / 3 < r < 3 else "differ")',
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    for count, cell in enumerate(nb.cells, 1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="tie\n")] if count > 1 else []
    nbformat.write(nb, path)


def test_make_tests_warped_pass_fails_a_compared_cell_that_depends_on_a_timing(tmp_path) -> None:
    _tie_notebook(tmp_path / "ties.ipynb")
    runs = {}
    for seed in (None, "1"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "fastloops_book.runner",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--nbval",
                "--nbval-current-env",
                "ties.ipynb",
            ],
            cwd=tmp_path,
            env=_without_instruments(dict(os.environ), seed),
            capture_output=True,
            text=True,
        )
        runs[seed] = done.stdout.strip().splitlines()[-1]
    assert "3 passed" in runs[None], runs  # unwarped, equal functions tie
    assert "2 failed" in runs["1"], runs  # warped, both compared cells print "differ": nbval fails them
