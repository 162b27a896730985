"""The mutation check (tests/mutation.py): no solution's asserts survive every mutation of its measured values.

`test_every_solution_fails_a_mutation` runs last (tests/conftest.py moves it there) and reads what make test's
kernels recorded. The tests before it check the check: a ramp moves two contenders' ratio both ways, an assert
on a measured ordering is killed while one on the cell's own set-up survives, each source mutation applies to
one solution, and notebook 11's GPU-only exercise 4, which a CPU skips, fails on synthetic values that a
synchronous step would give.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
import torch
from test_exercises import NOTEBOOKS, solutions

from fastloops_helpers import measure
from fastloops_helpers.measure import clock

spec = importlib.util.spec_from_file_location("fastloops_mutation", Path(__file__).with_name("mutation.py"))
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)


class Shell:
    """The two things the check asks of IPython: its namespace and its cell transformer."""

    def __init__(self, **ns):
        self.user_ns = ns

    def transform_cell(self, source):
        return source


def sleeper(seconds):
    return lambda: time.sleep(seconds)


def test_a_ramp_moves_contenders_apart_both_ways():
    falling, rising = (mutation._Ramp(e) for e in mutation.RAMPS.values())
    frame = sys._getframe()
    assert falling(["a", "b"], frame) == [1.0, 1 / 256] and rising(["a", "b"], frame) == [1.0, 256.0]
    assert rising(list("abc"), frame) == [1.0, 256.0, 65536.0]  # a sweep tilted: each size 256x the one before


def test_timings_alone_are_told_apart_by_the_arguments_that_led_to_them():
    rising = mutation._Ramp(4)

    def timed(nbytes):  # a library function timing alone: the clock hands the hook its caller's frame
        return rising([], sys._getframe())[0]

    # every pass of one contender keeps its factor; another argument, or a one-name interleaved call, is the next
    assert [timed(1), timed(1), timed(2), rising(["only"], sys._getframe())[0]] == [1.0, 1.0, 256.0, 65536.0]


ORDERED = (
    mutation.MARKER
    + """
t = measure.interleaved({"short": sleeper(0.001), "long": sleeper(0.004)}, repeat=3, warmup=0)
assert measure.median(t["long"]) > 2 * measure.median(t["short"])
"""
)
SET_UP = (
    mutation.MARKER
    + """
t = measure.interleaved({"short": sleeper(0.001), "long": sleeper(0.004)}, repeat=3, warmup=0)
assert len(t["long"]) == 3
"""
)


@pytest.mark.parametrize(("source", "expected"), [(ORDERED, "killed"), (SET_UP, "survived")])
def test_a_measured_ordering_is_killed_and_a_restated_set_up_survives(monkeypatch, source, expected):
    monkeypatch.setattr(clock, "_scaling", None)
    shell = Shell(measure=measure, sleeper=sleeper)
    exec(compile(source, "<solution>", "exec"), dict(shell.user_ns))  # the solution as it stands passes
    hook = mutation._hook()
    record = mutation.check(shell, source, timed=True)
    assert mutation.outcome(record) == expected, record
    assert clock._scaling is hook and hook.ramp is None  # the hook stays, ramps off, for the cells after
    assert "t" not in shell.user_ns  # a mutated run leaves the notebook's namespace alone


def test_a_solution_that_times_nothing_and_has_no_source_mutation_is_reported():
    assert mutation.outcome(mutation.check(Shell(), mutation.MARKER + "\nassert 1 + 1 == 2\n", timed=False)) == (
        "no mutation"
    )


def test_each_source_mutation_applies_to_one_solution_of_its_notebook():
    for number, pairs in mutation.SOURCE.items():
        (path,) = [p for p in NOTEBOOKS if p.name.startswith(f"{number}_")]
        for old, new in pairs:
            found = [n for _, n, source in solutions(path) if old in source]
            assert len(found) == 1 and old != new, f"{path.name}: {old!r} is in solutions {found}"


def notebook_11_exercise_4():
    (path,) = [p for p in NOTEBOOKS if p.name.startswith("11_")]
    (source,) = [s for _, n, s in solutions(path) if n == "4"]
    return source


@pytest.mark.parametrize(("gpu_busy", "fails"), [(True, False), (False, True)])
def test_notebook_11_exercise_4_fails_on_a_synchronous_step(monkeypatch, gpu_busy, fails):
    """The GPU-only solution with a stand-in CUDA: a stream still busy when the CPU returns (an asynchronous step)
    passes; a stream idle every time (a synchronous step, the wrong answer) fails its assert."""

    class Stream:
        def query(self):
            return not gpu_busy  # query() is True when the stream has no queued work left

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: Stream())
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    monkeypatch.setattr(clock, "sync", lambda *a: None)
    ns = {
        "torch": torch,
        "measure": measure,
        "depth": 10,
        "width": 1,
        "seed": 0,
        "wrn_factory": lambda depth, width, device, seed: lambda: lambda x, y: None,
        "loaders": {"helpers": [(torch.zeros(2, 3), torch.zeros(2))]},
    }
    source = notebook_11_exercise_4()
    if fails:
        with pytest.raises(AssertionError, match="synchronously"):
            exec(compile(source, "<11/4>", "exec"), ns)
    else:
        exec(compile(source, "<11/4>", "exec"), ns)
        assert ns["ex4"][2] == 5


def test_every_solution_fails_a_mutation(request):
    """Every solution of every notebook this run executed, mutated, fails an assert (or needs hardware)."""
    check = request.config.mutations
    ran = sorted(check.notebooks - check.failed)
    if not ran:
        pytest.skip("no notebook ran in this session: make test runs the check after its nbval pass")
    found = mutation.records(check.records)
    rows = [(p.stem[:2], n, mutation.outcome(found.get(s)), found.get(s)) for p in ran for _, n, s in solutions(p)]
    counts = {o: sum(r[2] == o for r in rows) for o in ("killed", "skipped", "survived", "no mutation", "not run")}
    runs = sum(len(r[3]["mutations"]) for r in rows if r[3])
    check.summary.append(
        f"mutation check: {len(rows)} solutions of {len(ran)} notebooks, {runs} mutated runs: {counts}"
    )
    for nb, n, verdict, record in rows:
        tried = "; ".join(
            f"{m['name']}: {m['outcome']} ({m['detail'][:90]!r})" for m in (record or {}).get("mutations", [])
        )
        check.summary.append(f"  {nb}/{n}: {verdict}" + (f" [{tried}]" if verdict != "killed" else ""))
    bad = [f"{nb}/{n}: {v}" for nb, n, v, _ in rows if v in ("survived", "no mutation", "not run")]
    assert not bad, f"solutions whose asserts no mutation made fail: {', '.join(bad)} (the run's summary lists each)"
