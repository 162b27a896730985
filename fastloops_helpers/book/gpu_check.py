"""One command for a GPU machine: the CUDA-capable tests and benchmarks, each part in its own process, and a report.

`python -m fastloops_helpers.book.gpu_check [--scale S] [--parts a,b] [--reports DIR] [--logs DIR]` (`make gpu-check`).
It installs nothing and needs no network: each part runs with this interpreter, the project root first on
PYTHONPATH, and scratch data and results folders, under its own timeout inside one overall budget. A part
whose packages do not import here (absent, broken or hidden) is skipped, and the packages are named with how
to bring them to an offline machine; the exit status is 1 only when a part failed or ran out of time, never
for a skip. It writes reports/<machine>.md through book/report.py. Without a CUDA GPU it runs at the smoke
scale and skips the test files (`make test` runs them on such a machine).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import config
from ..measure.clock import now
from ..measure.provenance import cpu_name, hardware_line
from . import report, runs

TESTS = [
    "tests/test_prefetch.py",
    "tests/test_process_prefetch.py",
    "tests/test_diagnose.py",
    "tests/test_timeline.py",
    "tests/test_devices.py",
    "tests/test_loaders.py",
    "tests/test_transforms.py",
    "tests/test_samplers.py",
    "tests/test_config.py",
    "tests/test_collate.py",  # fast collate: a pinned uint8 batch normalised on CUDA
]
BENCHMARKS = ["devices", "cifar", "diagnose", "otto", "fusion"]  # fusion last: the one to lose when time runs out
TIMEOUT_S = {"tests": 150, "devices": 100, "cifar": 150, "diagnose": 180, "otto": 120, "fusion": 240}
BUDGET_S = 530  # all parts together: under 9 minutes on the GPU machine it was sized on
# what each part imports beyond the core (tests/test_gpu_check.py ties them to the test files and notebooks):
# the memmaps of notebooks 11 and 15 are tensordict's tensorclasses; notebook 06 times optree and TensorDict
NEEDS: dict[str, tuple[str, ...]] = {
    "tests": ("pytest", "hypothesis", "tensordict"),
    "devices": ("tensordict", "optree"),
    "cifar": ("tensordict",),
    "diagnose": ("tensordict",),
    "otto": (),
    "fusion": (),
}
BRING = "bring it with `make wheelhouse` on a machine with the registry, then `make setup WHEELS=DIR`"


@dataclass
class Outcome:
    """What one part did: passed, FAILED, timed out or skipped, its exit code, its seconds and why."""

    part: str
    status: str
    exit_code: int | None
    seconds: float
    detail: str = ""


def missing(modules: tuple[str, ...]) -> list[str]:
    """Return each of `modules` that does not import here (absent, broken or hidden), with how to bring it."""
    found = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a broken install raises anything, not only ImportError
            why = " ".join(f"{type(exc).__name__}: {exc}".split())[:120]
            found.append(f"{name} (not importable here: {BRING}; it raised {why})")
    return found


def command(part: str, scale: str) -> list[str]:
    """Return the command line of `part`: pytest over the test files, or one benchmark at `scale`."""
    if part == "tests":
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    return [sys.executable, "-m", "fastloops_helpers.book.bench", part, "--scale", scale]


def run_part(part: str, argv: list[str], env: dict[str, str], log: Path, timeout_s: float) -> Outcome:
    """Run one part in its own process group, its output into `log`; kill the whole group at `timeout_s`."""
    start = now()
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv, cwd=config.project_root(), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=max(timeout_s, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its loader workers too
            proc.wait()
            return Outcome(part, "timed out", None, now() - start, f"killed after {timeout_s:.0f} s")
    seconds = now() - start
    return Outcome(part, "passed" if code == 0 else "FAILED", code, seconds, "" if code == 0 else _last_line(log))


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def environment(data: Path, results: Path, scale: str) -> dict[str, str]:
    """Return the parts' environment: the project root first on PYTHONPATH, scratch folders, the scale."""
    path = os.environ.get("PYTHONPATH", "")
    root = str(config.project_root())
    return {
        **os.environ,
        "PYTHONPATH": root + (os.pathsep + path if path else ""),
        "FASTLOOPS_DATA": str(data),
        "FASTLOOPS_RESULTS": str(results),
        "FASTLOOPS_SCALE": scale,
        "PYTHONUNBUFFERED": "1",
    }


def run_parts(parts: list[str], scale: str, folders: dict[str, Path], budget_s: float = BUDGET_S) -> list[Outcome]:
    """Run each part in turn (each under its timeout and what is left of `budget_s`); skip those it cannot run."""
    env = environment(folders["data"], folders["results"], scale)
    deadline = now() + budget_s
    outcomes = []
    for part in parts:
        skip = skip_reason(part, deadline)
        if skip:
            outcomes.append(Outcome(part, "skipped", None, 0.0, skip))
        else:
            left = min(TIMEOUT_S[part], deadline - now())
            outcomes.append(run_part(part, command(part, scale), env, folders["logs"] / f"{part}.log", left))
        print(_line(outcomes[-1]), flush=True)
    return outcomes


def skip_reason(part: str, deadline: float) -> str:
    """Return why `part` cannot run here (no GPU for the tests, missing packages, no time left), or ''."""
    if part == "tests" and not torch.cuda.is_available():
        return "no CUDA GPU: `make test` runs these test files on this machine"
    lost = missing(NEEDS[part])
    if lost:
        return "missing: " + ", ".join(lost)
    if deadline - now() < 10:
        return f"the {BUDGET_S} s budget of all parts was spent"
    return ""


def _line(o: Outcome) -> str:
    code = "" if o.exit_code is None else f" (exit {o.exit_code})"
    return f"[gpu-check] {o.part}: {o.status}{code} in {o.seconds:.0f} s{': ' + o.detail if o.detail else ''}"


def slug() -> str:
    """Return this machine's report name: the GPU's (else the CPU's) model and the core count."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    name = re.sub(r"\((r|tm)\)|@.*$|\b(processor|cpu)\b", " ", (gpu or cpu_name()).lower())
    words = re.findall(r"[a-z0-9]+", name)[:3] or ["machine"]
    return "-".join([*words, str(os.cpu_count()), "cores"] + ([] if gpu else ["cpu"]))


def write_report(outcomes: list[Outcome], scale: str, results: Path, out: Path) -> Path:
    """Write `out`: the parts' table, then each benchmark's targets, figures and rows as it saved them."""
    rows = [{**vars(o), "exit_code": "" if o.exit_code is None else o.exit_code} for o in outcomes]
    rows = [{**r, "seconds": round(r["seconds"])} for r in rows]
    parts = [
        "# fastloops: make gpu-check\n",
        f"- scale: {scale}; device: {config.device()}" + ("" if torch.cuda.is_available() else " (no CUDA GPU)"),
        f"- hardware: {hardware_line()}\n",
        "## Parts, each in its own process\n",
        report.markdown_table(rows),
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts + benchmark_sections(results)))
    return out


def benchmark_sections(results: Path) -> list[str]:
    """Return the report's benchmark sections: the targets, then each benchmark's figures and rows."""
    docs = runs.load(results)
    benches = runs.benchmarks(docs)
    if not benches:
        return ["(no benchmark saved a result)\n"]
    ran = {name.removeprefix("bench-") for name in benches}
    records = [r for r in runs.targets(docs).to_dict("records") if r["benchmark"] in ran]
    targets = [{k: "" if v is None or v != v else v for k, v in r.items()} for r in records]
    parts = ["## Targets\n", report.markdown_table(targets)]
    for name, doc in benches.items():
        prov = doc["provenance"]
        figures = [{"figure": k, "value": v} for k, v in doc["figures"].items()]
        parts += [f"## {name}\n", f"scale {prov.get('scale', '?')}, device {prov.get('device', '?')}\n"]
        parts += ["### figures\n", report.markdown_table(figures), "### rows\n", report.markdown_table(doc["rows"])]
    return parts


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the parts in scratch folders, write the report; 1 if a part failed."""
    gpu = torch.cuda.is_available()
    parser = argparse.ArgumentParser(prog="python -m fastloops_helpers.book.gpu_check", description=__doc__)
    parser.add_argument("--scale", choices=config.SCALES, default="workshop" if gpu else "smoke")
    parser.add_argument("--parts", default=",".join(["tests", *BENCHMARKS]), help="comma-separated parts to run")
    parser.add_argument("--reports", type=Path, default=config.project_root() / "reports", help="report folder")
    parser.add_argument("--logs", type=Path, help="keep each part's log and the results here (default: dropped)")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(TIMEOUT_S))
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; parts: {', '.join(TIMEOUT_S)}")
    print(f"[gpu-check] scale={args.scale}, {'GPU: ' + str(torch.cuda.get_device_name(0)) if gpu else 'no CUDA GPU'}")
    scratch = Path(tempfile.mkdtemp(prefix="fastloops-gpu-check-"))
    try:
        keep = args.logs or scratch
        folders = {"data": scratch / "data", "results": keep / "results", "logs": keep / "logs"}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        outcomes = run_parts(parts, args.scale, folders)
        path = write_report(outcomes, args.scale, folders["results"], args.reports / f"{slug()}.md")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"[gpu-check] wrote {config.rel(path) if path.is_relative_to(config.project_root()) else path}")
    return 1 if any(o.status in ("FAILED", "timed out") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
