"""The mutation check: every solution's asserts must fail when its key measured value is made wrong.

`make test` runs every notebook under nbval with its solutions. tests/conftest.py starts those kernels with an
IPython start-up file that calls `register()`, so after each solution cell that passed, the kernel runs the cell
again, mutated, in a copy of the notebook's namespace, its output swallowed:

- **source mutations** (`SOURCE`, tried first): a line of the solution replaced by a wrong one (a sort reversed,
  a count changed, the fallback forced, a contender swapped for another);
- **timing mutations** (when the solution timed anything through the library's clock): every duration the clock
  returns under the cell is multiplied by a ramp over the contenders (the names of one interleaved call in their
  order, the timings alone in the order first timed, told apart by the arguments of every call that led to
  them), falling x1/256 per contender, then rising x256. Neighbouring contenders' ratio moves 256x either way,
  so an assert that a measured ordering or margin holds fails in one; a sweep's curve tilts either way, so what
  its first sizes beat, the last now beat.

A mutation kills the solution when the mutated cell raises AssertionError. The runs stop at the first kill. Each
solution's outcome goes, as one JSON line, to a file in FASTLOOPS_MUTATIONS. tests/test_mutations.py reads them at
the end of the session and fails for a solution that survived every mutation (its asserts cannot fail). A
solution that printed "skipped" (it needs hardware this machine lacks) is reported as skipped; notebook 11's
exercise 4 is checked there by a fixture that feeds its assert synthetic values.

A solution whose answer is read from a loader's timeline (stamped with `clock.now()`, which no ramp scales) is
killed by a source mutation that makes the timeline's value wrong (the wrong stage read, one contender's batches
slowed, the rows swapped); a solution's assert reads only what the solution measured itself, never a compared
cell's value, which `make test`'s warp has moved.
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

ENV = "FASTLOOPS_MUTATIONS"  # the folder the kernels write their records to; unset: no mutation check
MARKER = "# Solution: try the exercise first"  # a solution cell's first line (fastloops_book.notebooks)
NAME = "<mutated solution"  # how a mutated cell's code is named
STEP = 4.0
RAMPS = {"timings x1/256 per contender": -4, "timings x256 per contender": 4}  # name: exponent of STEP per step

# Per notebook (its number), the source mutations of its solutions: (what the solution says, a wrong version of it).
# Each makes wrong the value the exercise asks for (a count, a verdict, which way copies), never a set-up detail
# beside it (a thread count put back, the batches a timed loader handed over): an assert that only such a detail
# can fail leaves the answer unchecked. Each `old` occurs in exactly one solution of its notebook (the tests check).
SOURCE: dict[str, list[tuple[str, str]]] = {
    "01": [
        (  # 2: batch 3000's epochs replaced by batch 30's
            'ex2_ms = {bs: {r["loop"]: r["ms_per_epoch"] for r in res.rows} for bs, res in ex2_results.items()}',
            'ex2_ms = {bs: {r["loop"]: r["ms_per_epoch"] for r in ex2_results[30].rows} for bs in ex2_results}',
        ),
    ],
    "02": [
        ('ex3_first_batch("spawn", lambda b: b)', 'ex3_first_batch("spawn", collate_batch)'),  # 3: nothing to fail
    ],
    "03": [
        ("if self.drop_last and self.cursor + self.batch_size > len(self.data):", "if False:"),  # 1: no drop
        ("BatchLoader(ex2_array, batch_size, shuffle=True, seed=0)", "BatchLoader(ex2_array, batch_size, seed=1)"),  # 2
    ],
    "04": [
        (
            "batch_class_entropy(ex1_y[ex1_p], ex1_perm, BATCH_SIZE, 10)",
            "batch_class_entropy(ex1_y, ex1_perm, BATCH_SIZE, 10)",
        ),
        ("variants=v) for v in (1, VARIANTS)}", "variants=1) for v in (1, VARIANTS)}"),  # 2: one variant both times
        ("quasi_random_permutation(QUALITY_N, ex4_page, b,", "quasi_random_permutation(QUALITY_N, ex4_page, 1,"),  # 4
    ],
    "06": [
        ('"tags": {torch.ones(1), torch.zeros(1)}}', '"tags": [torch.ones(1), torch.zeros(1)]}'),  # 1: a list, no set
        ('ex2_way(ex2_xs, torch.device("meta"))', "ex2_xs"),  # 2: nothing moved
        ('!= ex3_xs["cim"].data_ptr()', '== ex3_xs["cim"].data_ptr()'),  # 3: copies called shared
    ],
    "09": [
        ('image.draft("RGB", (target, target))', 'image.draft("RGB", (target // 2, target // 2))'),  # 4
    ],
    "10": [
        (  # 1: the two loaders' rates swapped
            'ex1_over = measure.ratios(ex1_rates, f"helpers, batch {ex1_batch}", f"DataLoader, batch {ex1_batch}")',
            'ex1_over = measure.ratios(ex1_rates, f"DataLoader, batch {ex1_batch}", f"helpers, batch {ex1_batch}")',
        ),
        (  # 2: the two workers' batches made a hundred times slower
            "ex2_times = compare(ex2_loaders, 2, None, device, skip=0)",
            'ex2_times = {k: [t * (100 if "2 workers" in k else 1) for t in v] for k, v in compare(ex2_loaders, 2, '
            "None, device, skip=0).items()}",
        ),
        (  # 3: the block orders' batches made four times slower
            "ex3_times = compare(ex3_loaders, epochs, None, device, skip=0)",
            'ex3_times = {k: [t * (4 if "grouped" in k or "quasi" in k else 1) for t in v] for k, v in '
            "compare(ex3_loaders, epochs, None, device, skip=0).items()}",
        ),
        (  # 4: nothing left out
            "ex4_kept = [t for i, t in enumerate(ex4_all) if i % ex4_per_epoch >= SEED_SKIP]",
            "ex4_kept = ex4_all",
        ),
    ],
    "11": [
        (  # 2: the loop's measured waits made a hundred times shorter, as if a worker had hidden the loading
            '"wait": training.table(ex2_timed.flat("waits"), batch_size)',
            '"wait": training.table({k: [s / 100 for s in v] for k, v in ex2_timed.flat("waits").items()}, batch_size)',
        ),
        ("ex1_gap = (resize_crop(ex1_x).float()", "ex1_gap = 2 + (resize_crop(ex1_x).float()"),  # 1: windows apart
    ],
    "12": [
        ("ex1_pad = -ex1_rows % ex1_ranks", "ex1_pad = -ex1_rows % ex1_ranks + 1"),  # 1: one padding too many
        ("ex2_shards(ex2_train, [seed, seed + 1])", "ex2_shards(ex2_train, [seed, seed])"),  # 2: no second seed
        ("ex3_shards(ex3_train, e) for e in range(2)]", "ex3_shards(ex3_train, 0) for e in range(2)]"),  # 3
    ],
    "15": [
        ("persistent_workers=True), batches", "persistent_workers=False), batches"),  # 2: the knob not set
        ("ex1_step_ms = 4 * step_ms", "ex1_step_ms = step_ms // 4"),  # 1: the step made shorter, not longer
    ],
    "16": [
        ("ex2[4] = ex2_curve(4, ex2_step,", "ex2[4] = ex2_curve(1, ex2_step,"),  # 2: one open shard both times
        ("for x in base.for_rank(r, world)]", "for x in base.for_rank(0, world)]"),  # 3: every rank reads rank 0's
    ],
    "00": [
        ('for nb in c.used_by.split(",")})', 'for nb in c.used_by.split(",")[:1]})'),  # 3: one notebook per part
    ],
    "05": [
        ("return chain(x).tanh() * x", "return chain(x) * x"),  # 1: the longer chain one op short
        ("ex3_graphs(ex3_static, False)", "ex3_graphs(ex3_static, True)"),  # 3: both dynamic
    ],
    "07": [
        (
            'ex2_extra = ex2_mem["list of floats"]["workers_uss_mb"] - ex2_mem["numpy array"]["workers_uss_mb"]',
            'ex2_extra = ex2_mem["numpy array"]["workers_uss_mb"] - ex2_mem["list of floats"]["workers_uss_mb"]',
        ),  # 2
        ("epoch_starts(dataset, 1, batch_size, step_ms, True,", "epoch_starts(dataset, 1, batch_size, step_ms, False,"),
        (  # 1: the steps read as the waits
            """query("stage == 'wait' and batch > 0")""",
            """query("stage == 'step' and batch > 0")""",
        ),
        (  # 4: the steps read as the collates
            """    return tl.frame().query("stage == 'collate'").seconds.median() * 1e3""",
            """    return tl.frame().query("stage == 'step'").seconds.median() * 1e3""",
        ),
        (  # 5: the two contenders' rows swapped
            "for label, runs in ex5_runs.items()}).T",
            "for label, runs in zip(ex5_runs, reversed(ex5_runs.values()))}).T",
        ),
    ],
    "08": [
        ("decoders.encode_jpegs(n_images, ex2_px, q)", "decoders.encode_jpegs(n_images, ex2_px, 140 - q)"),  # 2
        ("ex3_found = {name: shares(fn, source)", "ex3_found = {name: not shares(fn, source)"),  # 3
    ],
    "13": [
        ("if name not in ex1_saved]", "if name in ex1_saved]"),  # 1: the saved ones called missing
        ("if low >= bound:", "if low < bound:"),  # 2: an interval above its bound called a miss
        ('"figures": {ex3_name: 2.0}', '"figures": {ex3_name + "_2": 2.0}'),  # 3: no clash made
    ],
    "14": [
        ("image = Image.fromarray(ex2_decode(f.read()))", "raise ValueError('the fallback, forced')"),  # 2
    ],
}


class _Ramp:
    """The clock's hook while a mutated cell runs: the i-th contender (by position in one interleaved call, by
    order of first timing for the timings alone) x STEP**(e * i)."""

    def __init__(self, exponent: int) -> None:
        self.exponent, self.alone = exponent, {}

    def factor(self, i: int) -> float:
        return STEP ** (self.exponent * i)

    def __call__(self, contenders: Sequence[Any], frame: FrameType) -> list[float]:
        if len(contenders) > 1:
            return [self.factor(i) for i in range(len(contenders))]
        return [self.factor(self.alone.setdefault(_stack(frame), len(self.alone)))]


def _stack(frame: FrameType | None) -> tuple[Any, ...]:
    """Return what tells one timing alone from another: each function from `frame` up to the mutated cell, with
    its plain arguments, and the cell's line (every pass of one contender gives the same)."""
    from fastloops_book.instruments import warp

    parts: list[Any] = []
    while frame is not None:
        parts.append((frame.f_code.co_name, warp.site_key(frame)[1]))
        if frame.f_code.co_filename.startswith(NAME):
            parts.append(frame.f_lineno)
            break
        frame = frame.f_back
    return tuple(parts)


class _Hook:
    """Wraps the clock's hook (the warp's, or none): counts the timings a solution makes, ramps a mutated one."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.ramp = inner, 0, None

    def __call__(self, contenders: Sequence[Any], frame: FrameType) -> Sequence[float]:
        self.calls += 1
        if self.ramp is not None:
            return self.ramp(contenders, frame)
        return self.inner(contenders, frame) if self.inner is not None else [1.0] * max(1, len(contenders))


def _hook() -> _Hook | None:
    """Return the clock's counting hook, installing it once the library's clock has been imported."""
    clock = sys.modules.get("fastloops_helpers.measure.clock")
    if clock is None:
        return None
    if not isinstance(clock._scaling, _Hook):
        clock.set_scaling(_Hook(clock._scaling))
    return clock._scaling


def mutations(source: str, timed: bool) -> list[tuple[str, str, int | None]]:
    """Return (name, mutated source, ramp or None) for each mutation that applies to solution `source`."""
    found = [
        (f"{number}: {old.strip()!r} made wrong", source.replace(old, new), None)
        for number, pairs in SOURCE.items()
        for old, new in pairs
        if old in source
    ]
    return found + ([(name, source, ramp) for name, ramp in RAMPS.items()] if timed else [])


def run_mutated(shell: Any, source: str, ramp: int | None, hook: _Hook | None) -> tuple[str, str]:
    """Run `source` in a copy of the kernel's namespace, durations ramped if asked; return (outcome, output)."""
    name = f"{NAME} {abs(hash(source))}>"
    code = shell.transform_cell(source)
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # its first line is the marker
    out = io.StringIO()
    if hook is not None:
        hook.ramp = _Ramp(ramp) if ramp is not None else None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(code, name, "exec"), dict(shell.user_ns))
    except AssertionError as e:
        return "killed", f"AssertionError: {e}"[:300]
    except Exception as e:  # a mutation that crashes the cell does not show that its asserts can fail
        return "error", f"{type(e).__name__}: {e}"[:300]
    finally:
        if hook is not None:
            hook.ramp = None
    return ("skipped" if "skipped" in out.getvalue() else "survived"), out.getvalue()[-300:]


def check(shell: Any, source: str, timed: bool) -> dict[str, Any]:
    """Run the mutations of solution `source` until one kills it; return its record."""
    record: dict[str, Any] = {"source": source, "timed": timed, "mutations": []}
    found = mutations(source, timed)
    if not found and run_mutated(shell, source, None, None)[0] == "skipped":  # it needs what this machine lacks
        record["skipped"] = True
    for name, mutated, ramp in found:
        outcome, detail = run_mutated(shell, mutated, ramp, _hook())
        record["mutations"].append({"name": name, "outcome": outcome, "detail": detail})
        if outcome == "killed":
            break
    return record


def register(shell: Any) -> None:
    """Install the check in IPython `shell` when FASTLOOPS_MUTATIONS names a folder (the start-up file's call)."""
    folder = os.environ.get(ENV)
    if not folder:
        return
    out = Path(folder) / f"{os.getpid()}.jsonl"

    def before(info: Any) -> None:
        if (info.raw_cell or "").startswith(MARKER) and (hook := _hook()) is not None:
            hook.calls = 0

    def after(result: Any) -> None:
        source = result.info.raw_cell or ""
        if not source.startswith(MARKER) or not result.success:
            return
        hook = _hook()
        record = check(shell, source, timed=hook is not None and hook.calls > 0)
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")

    shell.events.register("pre_run_cell", before)
    shell.events.register("post_run_cell", after)


def records(folder: Path) -> dict[str, dict[str, Any]]:
    """Return every record the kernels wrote to `folder`, by solution source (the last one for a source)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            found[record["source"]] = record
    return found


def outcome(record: dict[str, Any] | None) -> str:
    """Return a record's verdict: killed, skipped, survived (every mutation ran, none failed an assert), no
    mutation (none applies), or not run."""
    if record is None:
        return "not run"
    seen = [m["outcome"] for m in record["mutations"]]
    if "killed" in seen:
        return "killed"
    if not seen:
        return "skipped" if record.get("skipped") else "no mutation"
    return "skipped" if "skipped" in seen else "survived"
