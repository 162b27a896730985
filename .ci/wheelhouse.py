"""Write a wheelhouse for a machine without network: `make wheelhouse PYTHON_VERSION=3.12 [WHEELHOUSE=DIR]`.

Run it anywhere that reaches the package registry; carry DIR to the GPU machine and run `make setup WHEELS=DIR`
there. It writes, for that Python on Linux x86_64:
- DIR/run: .ci/offline/run.txt and every dependency of it, less what the machine has (.ci/offline/machine.txt,
  never downloaded, so its torch and numpy stay the ones in use). At most RUN_LIMIT_MIB, to travel with the checkout.
- DIR/lab: .ci/offline/lab.txt (JupyterLab, RISE) and what it needs beyond the machine and the run tier.
- DIR/ffcv-kit: ffcv's source and Debian 12's packages of the libraries its C extension links (OpenCV core and
  imgproc, libturbojpeg) with their headers, for .ci/build_ffcv.sh to build on the machine; a C++ compiler and
  Python's headers are all it needs there. Left out, with a note, where `apt-get download` cannot run.
Versions come from constraints.txt where it pins them. Sdist-only packages that are pure Python are built into
wheels here. It needs only Python and pip; `--check DIR` re-reads a wheelhouse and reports what it lacks.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # a bare python3 with pip: pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = ROOT / ".ci" / "offline"
TIERS = ("run", "lab")
RUN_LIMIT_MIB = 45  # the run tier travels with the checkout: 64 MiB in all, with the ffcv kit and the tree
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64")
# no wheel on the registry: built here, each is pure Python
SDIST_ONLY = {"jpeg4py", "fastargs", "assertpy", "pyturbojpeg"}
LEFT_OUT = {  # imported somewhere, yet not brought: what goes without them is said where they are used
    "tensorflow-cpu": "over 250 MB: notebook 01 skips its tf.data loop",
    "torch-tensorrt": "hundreds of MB, tied to one CUDA: notebook 08 skips it",
    "pycuda": "compiles against the CUDA toolkit on the machine: notebook 08 skips it",
    "nvidia-nvimgcodec-cu13": "25 MB (and its nvJPEG extra) for one row of notebook 08, beside torchvision's: skipped",
    "jupytext": "the text twins (make twins) are written where the notebooks are edited",
    "pdoc": "the API reference (make site) is built where the notebooks are edited",
}
FFCV_DEBS = (
    "libopencv-core406 libopencv-imgproc406 libopencv-core-dev libopencv-imgproc-dev libturbojpeg0 libturbojpeg0-dev"
    " libtbb12 liblapack3 libblas3 libgfortran5 libglx0 libglvnd0 libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0"
    " libmd0 libquadmath0"
).split()  # Debian 12's: _libffcv links OpenCV 4.6's core and imgproc, and libturbojpeg; the rest is what they link


def canon(name: str) -> str:
    """Return a distribution's normalised name (PEP 503), the one every comparison here uses."""
    return str(canonicalize_name(name))


def requirements(path: Path) -> list[Requirement]:
    """Return the requirements listed in `path`, one a line, comments and blank lines left out."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def machine(path: Path = OFFLINE / "machine.txt") -> dict[str, str]:
    """Return {name: version or ''} of what the target machine already has."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[canon(name)] = version.strip()
    return found


def target(python_version: str) -> dict[str, str]:
    """Return the markers of CPython `python_version` on Linux x86_64 (3.12 reads as 3.12.0, as pip reads it)."""
    full = python_version if python_version.count(".") == 2 else python_version + ".0"
    return {
        "python_version": ".".join(full.split(".")[:2]),
        "python_full_version": full,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "platform_release": "",
        "platform_version": "",
        "implementation_version": full,
        "extra": "",
    }


def metadata(wheel: Path) -> tuple[str, str, list[str]]:
    """Return a wheel's (name, version, Requires-Dist lines), read from its METADATA."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        meta = email.parser.Parser().parsestr(z.read(name).decode())
    return canon(meta["Name"]), meta["Version"], meta.get_all("Requires-Dist") or []


def needs(wheel: Path, extras: set[str], env: dict[str, str]) -> list[Requirement]:
    """Return what `wheel` requires on `env`, with the dependencies of `extras` too."""
    found = []
    for line in metadata(wheel)[2]:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in ["", *extras]):
            req.marker = None  # decided here: `extra == "css"` would read false to the walk, which knows no extra
            found.append(req)
    return found


def closure(wanted: list[Requirement], wheels: list[Path], have: dict[str, str], env: dict[str, str]):
    """Walk `wanted` and its dependencies; return (requirements that nothing provides, version conflicts).

    A requirement is provided by the machine (`have`, {name: version or ''}) or by one of `wheels`.
    """
    by_name = {metadata(w)[0]: w for w in wheels}
    versions = {**have, **{name: metadata(w)[1] for name, w in by_name.items()}}
    lacking, conflicts, seen, todo = {}, [], set(), list(wanted)
    while todo:
        req = todo.pop()
        name = canon(req.name)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if name not in versions:
            lacking.setdefault(name, req)
            continue
        version = versions[name]
        if version and req.specifier and not req.specifier.contains(version, prereleases=True):
            conflicts.append(f"{req} (the {'machine' if name in have else 'wheelhouse'} has {name} {version})")
        key = (name, frozenset(req.extras))
        if name in by_name and key not in seen:
            seen.add(key)
            todo.extend(needs(by_name[name], set(req.extras), env))
    return list(lacking.values()), sorted(set(conflicts))


def pip(*args: str) -> None:
    """Run pip with this interpreter; raise with pip's last lines when it fails."""
    run = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(
            f"[wheelhouse] pip {args[0]} failed:\n"
            + "\n".join([line for line in run.stderr.splitlines() if not line.startswith("WARNING: Location")][-12:])
        )


def fetch(reqs: list[Requirement], folder: Path, python_version: str) -> None:
    """Download `reqs` as wheels for `python_version` into `folder` (no dependencies); build the sdist-only ones."""
    pins = ["-c", str(ROOT / "constraints.txt")]
    binary = [str(r) for r in reqs if canon(r.name) not in SDIST_ONLY]
    if binary:
        tags = ["--python-version", python_version, "--implementation", "cp", "--only-binary=:all:"]
        tags += [arg for p in PLATFORMS for arg in ("--platform", p)]
        pip("download", "--no-deps", "-q", "-d", str(folder), *pins, *tags, *binary)
    for req in (r for r in reqs if canon(r.name) in SDIST_ONLY):
        with tempfile.TemporaryDirectory() as built:
            pip("wheel", "--no-deps", "-q", "--no-binary", req.name, "-w", built, *pins, str(req))
            wheel = next(Path(built).glob("*.whl"))
            if not wheel.name.endswith("-none-any.whl"):
                raise SystemExit(
                    f"[wheelhouse] {wheel.name} is not pure Python: it cannot be built for another Python here"
                )
            shutil.move(wheel, folder / wheel.name)


def wheels(*folders: Path) -> list[Path]:
    """Return the wheels in `folders` (those that exist)."""
    return sorted(w for f in folders if f.is_dir() for w in f.glob("*.whl"))


def build_tier(tier: str, out: Path, python_version: str, rounds: int = 25) -> Path:
    """Fill out/tier with its requirements' closure over the machine and the tiers before it; return the folder."""
    folder = out / tier
    folder.mkdir(parents=True, exist_ok=True)
    before = [out / t for t in TIERS[: TIERS.index(tier)]]
    wanted, have, env = requirements(OFFLINE / f"{tier}.txt"), machine(), target(python_version)
    for _ in range(rounds):
        lacking, conflicts = closure(wanted, wheels(*before, folder), have, env)
        if conflicts:
            raise SystemExit("[wheelhouse] versions that cannot go together:\n  " + "\n  ".join(conflicts))
        if not lacking:
            return folder
        print(f"[wheelhouse] {tier}: fetching {', '.join(sorted(canon(r.name) for r in lacking))}", flush=True)
        fetch(lacking, folder, python_version)
    raise SystemExit(f"[wheelhouse] {tier}: dependencies still lacking after {rounds} rounds")


def ffcv_kit(out: Path) -> str:
    """Write out/ffcv-kit: ffcv's source and the Debian packages its C extension builds against; say what happened."""
    kit = out / "ffcv-kit"
    if shutil.which("apt-get") is None or not Path("/etc/debian_version").exists():
        return "ffcv-kit: left out (apt-get download needs a Debian or Ubuntu machine); notebooks 10 and 11 skip FFCV"
    (kit / "debs").mkdir(parents=True, exist_ok=True)
    pin = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("ffcv=="))
    pip("download", "--no-deps", "-q", "--no-binary=:all:", "-d", str(kit), pin)
    got = subprocess.run(
        ["apt-get", "download", *sorted(set(FFCV_DEBS))], cwd=kit / "debs", capture_output=True, text=True
    )
    if got.returncode != 0:
        shutil.rmtree(kit)
        return f"ffcv-kit: left out, apt-get download failed: {got.stderr.strip().splitlines()[-1:]}"
    return f"ffcv-kit: {mib(kit):.1f} MiB ({len(list((kit / 'debs').glob('*.deb')))} Debian packages and {pin})"


def mib(folder: Path) -> float:
    """Return the size of the files under `folder`, in MiB."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def check(out: Path, python_version: str) -> list[str]:
    """Return what is wrong with wheelhouse `out` for `python_version`: lacking wheels, conflicts, an oversize tier."""
    problems, have, env = [], machine(), target(python_version)
    for i, tier in enumerate(TIERS):
        lacking, conflicts = closure(
            requirements(OFFLINE / f"{tier}.txt"), wheels(*(out / t for t in TIERS[: i + 1])), have, env
        )
        problems += [f"{tier}: nothing provides {r}" for r in lacking] + [f"{tier}: {c}" for c in conflicts]
    if mib(out / "run") > RUN_LIMIT_MIB:
        problems.append(f"run: {mib(out / 'run'):.1f} MiB, over its {RUN_LIMIT_MIB} MiB")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Build (or with --check, re-read) a wheelhouse; print each tier's size; 1 if anything is wrong."""
    parser = argparse.ArgumentParser(prog="make wheelhouse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-version", required=True, help="the target machine's Python, e.g. 3.12 or 3.12.3")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "wheelhouse", help="the folder to write (default wheelhouse/)"
    )
    parser.add_argument("--tiers", default="run,lab,ffcv-kit", help="which of run, lab, ffcv-kit to write")
    parser.add_argument("--check", action="store_true", help="only check an existing wheelhouse")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+(\.\d+)?", args.python_version):
        parser.error(f"--python-version takes MAJOR.MINOR[.MICRO], e.g. 3.12 or 3.12.3; got {args.python_version!r}")
    chosen = args.tiers.split(",")
    if not args.check:
        for tier in (t for t in TIERS if t in chosen):
            build_tier(tier, args.out, args.python_version)
        if "ffcv-kit" in chosen:
            print(f"[wheelhouse] {ffcv_kit(args.out)}")
    problems = check(args.out, args.python_version) if set(TIERS) <= set(chosen) or args.check else []
    for tier in TIERS:
        if (args.out / tier).is_dir():
            print(f"[wheelhouse] {tier}: {len(wheels(args.out / tier))} wheels, {mib(args.out / tier):.1f} MiB")
    print("[wheelhouse] left out: " + "; ".join(f"{name} ({why})" for name, why in LEFT_OUT.items()))
    print(
        "\n".join(f"[wheelhouse] PROBLEM {p}" for p in problems)
        or f"[wheelhouse] {args.out}: complete for Python {args.python_version}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
