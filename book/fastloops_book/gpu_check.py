"""One command for a GPU machine: the CUDA-capable tests, then every notebook, solutions included, and a report.

`python -m fastloops_book.gpu_check [--scale S] [--parts a,b] [--reports DIR] [--mode kernel|script]`
(`make gpu-check`). It installs nothing and needs no network: each part runs with this interpreter, the project
root first on PYTHONPATH, and one scratch data and results folder (notebook 13, last, reads what the others
saved), in its own process group under its own timeout. A notebook runs in a Jupyter kernel where one is
installed (the executed copy is kept) and as a script otherwise (its log stands in for the copy). Each finished
copy and log is appended to one archive at once, so a run stopped at its limit still leaves what finished. A part
whose packages do not import here is skipped and the packages named with how to bring them; the exit status is
1 only when a part failed or ran out of time. On a GPU it writes reports/gpu/<machine>/ at the gpu scale (one
short run: BUDGET_S); without one, the smoke scale into a temporary or --reports folder, never reports/gpu/.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from fastloops_helpers import config
from fastloops_helpers.measure.clock import now
from fastloops_helpers.measure.provenance import cpu_name, git_state, hardware_line

from . import bench, notebooks, report, runs

TESTS = [
    "tests/test_prefetch.py",
    "tests/test_pinned_ring.py",
    "tests/test_steps.py",
    "tests/test_device_decode.py",
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
# the GPU parts first, the CPU-only ones after, the conclusion last (it reads what the others saved)
ORDER = ("tests", "11", "10", "06", "05", "08", "15", "03", "07", "12", "14", "04", "09", "01", "02", "00", "16", "13")
# seconds per part on the GPU machine at the gpu scale; a part may take up to twice its own while the whole
# run keeps to their sum. README.md (On a GPU machine) gives the arithmetic.
BUDGET_S = {
    "tests": 30, "11": 51, "10": 25, "06": 10, "05": 65, "08": 8, "15": 15, "03": 5, "07": 15, "12": 30,
    "14": 36, "04": 28, "09": 22, "01": 12, "02": 6, "00": 15, "16": 22, "13": 5,
}  # fmt: skip
SET_UP_S = {"make setup WHEELS=DIR (no ffcv)": 40, "ffcv's build from its kit": 40}  # before gpu-check starts
COMMAND_S = 8 * 60  # one command on the GPU machine: set-up, build and every part
CPU_TIMEOUT_S = 1800  # a part's limit at the other scales (no budget: a 2-core machine at smoke)
# what each part imports beyond the core (tests/test_gpu_check.py ties them to the test files and notebooks)
NEEDS: dict[str, tuple[str, ...]] = {
    "tests": ("pytest", "hypothesis", "tensordict"),
    "06": ("tensordict", "optree"),
    "09": ("tensordict",),
    "11": ("tensordict",),
    "15": ("tensordict",),
    "14": ("tensordict",),
    "16": ("tensordict",),
}
BRING = "bring it with `make wheelhouse` on a machine with the registry, then `make setup WHEELS=DIR`"
ARCHIVE = "gpu-check.tar"


@dataclass
class Outcome:
    """What one part did: passed, FAILED, timed out or skipped, how it ran, its exit code, its seconds and why."""

    part: str
    status: str
    exit_code: int | None
    seconds: float
    detail: str = ""
    mode: str = ""


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


def kernel_mode() -> str:
    """Return "kernel" where nbclient and a python3 Jupyter kernel are installed, else "script"."""
    try:
        importlib.import_module("nbclient")
        importlib.import_module("jupyter_client.kernelspec").KernelSpecManager().get_kernel_spec("python3")
    except Exception:  # no Jupyter, or no kernel: the notebook runs as a script
        return "script"
    return "kernel"


def command(part: str, scale: str, mode: str, folders: dict[str, Path]) -> list[str]:
    """Return the command line of `part`: pytest over the test files, or one notebook in a kernel or as a script."""
    if part == "tests":
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    path = str(notebooks.notebook_paths([part])[0])
    if mode == "kernel":
        times = ["--times", str(folders["logs"] / "notebook_times.json"), "--scale", scale]
        return [sys.executable, "-m", f"{__package__}.notebooks", "run", "--out", str(folders["out"]), *times, path]
    return [sys.executable, "-m", f"{__package__}.as_script", path, str(folders["results"]), scale, "--solutions"]


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
    return Outcome(part, "passed" if code == 0 else "FAILED", code, now() - start, "" if code == 0 else _last_line(log))


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def environment(data: Path, results: Path, scale: str) -> dict[str, str]:
    """Return the parts' environment: the library and the book first on PYTHONPATH, scratch folders, the scale."""
    root = config.project_root()
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), str(root / "book"), os.environ.get("PYTHONPATH")])),
        "FASTLOOPS_DATA": str(data),
        "FASTLOOPS_RESULTS": str(results),
        "FASTLOOPS_SCALE": scale,
        "PYTHONUNBUFFERED": "1",
        "MPLBACKEND": "Agg",
    }


def run_parts(parts: list[str], scale: str, mode: str, folders: dict[str, Path]) -> list[Outcome]:
    """Run each part in turn under its timeout (at the gpu scale, within the parts' budgets); skip what cannot run.

    Each finished log, executed notebook and benchmark result goes into the archive as soon as its part ends.
    """
    env = environment(folders["data"], folders["results"], scale)
    deadline = now() + sum(BUDGET_S[p] for p in parts) if scale == "gpu" else float("inf")
    outcomes = []
    for part in parts:
        left = min(2 * BUDGET_S[part] if scale == "gpu" else CPU_TIMEOUT_S, deadline - now())
        lost = missing(NEEDS.get(part, ()))
        if lost or left < 1:
            o = Outcome(
                part, "skipped", None, 0.0, "missing: " + ", ".join(lost) if lost else "the parts' budget was spent"
            )
        else:
            o = run_part(part, command(part, scale, mode, folders), env, folders["logs"] / f"{part}.log", left)
            o.mode = "pytest" if part == "tests" else mode
            archive(part, o, folders)
        outcomes.append(o)
        code = "" if o.exit_code is None else f" (exit {o.exit_code})"
        print(
            f"[gpu-check] {o.part}: {o.status}{code} in {o.seconds:.0f} s{': ' + o.detail if o.detail else ''}",
            flush=True,
        )
    return outcomes


def archive(part: str, outcome: Outcome, folders: dict[str, Path]) -> None:
    """Append `part`'s log, its executed notebook and the results it saved (copied into results/, where notebook
    13 can read them, with each of its benchmarks' bench-NAME.json) to the run's archive."""
    files, kept = [folders["logs"] / f"{part}.log"], folders["kept"]
    if part != "tests":
        stem = notebooks.notebook_paths([part])[0].stem
        files.append(folders["out"] / f"{stem}.ipynb")
        if outcome.status == "passed" and (folders["results"] / f"{stem}.json").is_file():
            files.append(Path(shutil.copy2(folders["results"] / f"{stem}.json", kept)))
            names = [n for n, spec in bench.benchmarks().items() if spec["notebook"] == stem]
            files += [bench.save(n, kept, str(kept / f"bench-{n}.json"))[1] for n in names]
    with tarfile.open(folders["out"] / ARCHIVE, "a") as tar:
        for path in files:
            if path.is_file():
                tar.add(path, arcname=path.relative_to(folders["out"]).as_posix())


def slug() -> str:
    """Return this machine's report name: the GPU's (else the CPU's) model and the core count."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    name = re.sub(r"\((r|tm)\)|@.*$|\b(processor|cpu)\b", " ", (gpu or cpu_name()).lower())
    words = re.findall(r"[a-z0-9]+", name)[:3] or ["machine"]
    return "-".join([*words, str(os.cpu_count()), "cores"] + ([] if gpu else ["cpu"]))


def test_counts(log: Path) -> str:
    """Return pytest's summary counts from the tests part's log ("172 passed, 2 failed"), or why there are none."""
    counts = re.findall(
        r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)", _last_line(log) if log.is_file() else ""
    )
    return (
        ", ".join(f"{n} {what}" for n, what in counts)
        or "no pytest summary: the tests part did not run, or did not finish"
    )


def foreign_packages() -> dict[str, list[str]]:
    """Return the distributions installed into this set-up's .venv (not the machine's own), by where they came from."""
    venv = Path(sys.prefix).resolve()
    if not (venv / ".fastloops-installed").exists():
        return {}  # the machine's own interpreter: every package is the machine's
    wheels = venv / ".fastloops-wheels"
    source = f"the wheelhouse {wheels.read_text().strip()}" if wheels.exists() else "the package index (make setup)"
    found: dict[str, list[str]] = {}
    for dist in importlib.metadata.distributions():
        if venv in Path(str(dist.locate_file(""))).resolve().parents:
            name = dist.metadata["Name"]
            built = (
                ", ffcv built from its kit by .ci/build_ffcv.sh" if name.lower() == "ffcv" and wheels.exists() else ""
            )
            found.setdefault(source + built, []).append(f"{name} {dist.version}")
    return {where: sorted(names, key=str.lower) for where, names in found.items()}


def provenance_lines(scale: str, mode: str) -> list[str]:
    """Return the report's first lines: commit and tree, date, scale, mode, the knobs that differ per machine."""
    git = git_state()
    tree = "DIRTY tree: uncommitted changes ran" if git["dirty"] else "clean tree"
    ffcv = "present" if importlib.util.find_spec("ffcv") else "absent (notebooks 10 and 11 skip its loaders)"
    return [
        f"# fastloops: make gpu-check on {slug()}, commit {str(git['commit'])[:12]}, {tree}\n",
        f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}; scale: {scale}; notebooks as {mode}",
        f"- hardware: {hardware_line()}",
        f"- device: {config.device()}; torch threads: {torch.get_num_threads()}; cores: {os.cpu_count()}; ffcv: {ffcv}",
        f"- models: WideResNet (depth, width) {config.size('cifar.wrn', scale)}; DDP world size "
        f"{config.size('ddp.world_size', scale)}; loader workers swept: {config.size('imagefolder.workers', scale)}\n",
    ]


def write_report(outcomes: list[Outcome], scale: str, mode: str, folders: dict[str, Path]) -> Path:
    """Write README.md in the run's folder: provenance, the parts' table, the test counts, the packages brought,
    then each benchmark's targets, figures and rows as it saved them; add it to the archive."""
    rows = [
        {**vars(o), "exit_code": "" if o.exit_code is None else o.exit_code, "seconds": round(o.seconds)}
        | {"budget_s": BUDGET_S[o.part] if scale == "gpu" else ""}
        for o in outcomes
    ]
    parts = [
        *provenance_lines(scale, mode),
        "## Parts, each in its own process\n",
        report.markdown_table(rows),
        f"## Tests\n\n{test_counts(folders['logs'] / 'tests.log')}\n",
        "## Packages not the machine's own\n",
        "".join(f"- from {where}: {', '.join(names)}\n" for where, names in foreign_packages().items()) or "(none)\n",
    ]
    out = folders["out"] / "README.md"
    out.write_text("\n".join(parts + benchmark_sections(folders["kept"])))
    with tarfile.open(folders["out"] / ARCHIVE, "a") as tar:
        tar.add(out, arcname=out.name)
    return out


def benchmark_sections(folder: Path) -> list[str]:
    """Return one section per benchmark result in `folder`: `report.doc_section`, then its targets' verdicts."""
    parts = []
    for name, doc in runs.benchmarks(runs.load(folder)).items():
        parts += report.doc_section(name, doc, folder, hardware_line(), qualify=True)
        parts += [
            f"- {t}\n" for t in bench.target_lines(name.removeprefix("bench-"), doc["figures"], runs.device_of(doc))
        ]
    return parts or ["(no benchmark saved a result)\n"]


def out_folder(given: Path | None, gpu: bool) -> Path:
    """Return where the run's report goes: --reports, else reports/gpu/<machine>/ on a GPU, else a new temporary one."""
    shelf = config.project_root() / "reports" / "gpu"
    if given is None:
        return shelf / slug() if gpu else Path(tempfile.mkdtemp(prefix="fastloops-gpu-check-"))
    if not gpu and (given.resolve() == shelf.resolve() or shelf.resolve() in given.resolve().parents):
        raise SystemExit(f"{given} is under reports/gpu/, which holds GPU runs only: give --reports another folder")
    return given


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the parts with scratch data and results, write the report; 1 if a part failed."""
    gpu = torch.cuda.is_available()
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.gpu_check", description=__doc__)
    parser.add_argument("--scale", choices=config.PROFILES, default="gpu" if gpu else "smoke")
    parser.add_argument("--parts", default=",".join(ORDER), help="comma-separated parts: tests and notebook numbers")
    parser.add_argument("--reports", type=Path, help="the run's folder (default: reports/gpu/<machine>/ on a GPU)")
    parser.add_argument("--mode", choices=["kernel", "script"], help="how notebooks run (default: kernel if any)")
    args = parser.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(ORDER) - {""}
    if unknown:
        parser.error(f"unknown part {sorted(unknown)[0]!r}; parts: {', '.join(ORDER)}")
    parts = [p for p in ORDER if p in args.parts.split(",")]  # the conclusion last, whatever the order given
    mode = args.mode or kernel_mode()
    out = out_folder(args.reports, gpu)
    print(f"[gpu-check] scale={args.scale}, {torch.cuda.get_device_name(0) if gpu else 'no CUDA GPU'}; into {out}")
    scratch = Path(tempfile.mkdtemp(prefix="fastloops-gpu-check-data-"))
    try:
        folders = {"data": scratch / "data", "results": scratch / "results", "out": out, "logs": out / "logs"}
        folders["kept"] = out / "results"  # each notebook's result, copied: a GPU report notebook 13 can read
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        (out / ARCHIVE).unlink(missing_ok=True)  # this run's archive holds this run's parts alone
        outcomes = run_parts(parts, args.scale, mode, folders)
        path = write_report(outcomes, args.scale, mode, folders)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"[gpu-check] wrote {path} and {out / ARCHIVE}")
    return 1 if any(o.status in ("FAILED", "timed out") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
