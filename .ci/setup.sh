#!/usr/bin/env bash
# One idempotent set-up for `make test`, `make reproduce`, `make notebooks` and `make lab`.
# Usage: bash .ci/setup.sh PYTHON [EXTRAS]   (EXTRAS: comma list added to test,tf,decoders,lab,docs,jax,threads,stream,lint,trees)
#        WHEELS=DIR bash .ci/setup.sh PYTHON  (`make setup WHEELS=DIR`: offline, from `make wheelhouse`'s folder)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
EXTRA=${2:-}
WHEELS=${WHEELS:-}
VENV=.venv
STAMP=$VENV/.fastloops-installed
SYSLIBS="pkg-config libopencv-dev libturbojpeg0-dev"
say() { printf '[setup] %s\n' "$*"; }
# a venv made offline remembers its wheelhouse, so that `make lab` or `make test` there stays offline
[ -z "$WHEELS" ] && [ -f "$VENV/.fastloops-wheels" ] && WHEELS=$(cat "$VENV/.fastloops-wheels")
if [ -n "$WHEELS" ]; then
  [ -d "$WHEELS/run" ] || { say "ERROR: $WHEELS/run is missing: write it with make wheelhouse PYTHON_VERSION=X.Y"; exit 1; }
  WHEELS=$(cd "$WHEELS" && pwd)
fi

# 1. Interpreter and virtual environment.
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  say "ERROR: $PYTHON is missing or older than 3.10; run: make test PYTHON=/path/to/python3.11"; exit 1
fi
# 1b. Skip everything when nothing changed since the last successful set-up.
KEY=$(cat pyproject.toml constraints.txt .ci/setup.sh .ci/offline/*.txt | cksum | cut -d' ' -f1)-$EXTRA
KEY=$KEY${WHEELS:+-$(ls -R "$WHEELS" | cksum | cut -d' ' -f1)}
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$KEY" ]; then
  say "up to date (.venv matches pyproject.toml and constraints.txt${WHEELS:+ and $WHEELS})"; exit 0
fi
rm -f "$STAMP"  # from here until done, .venv is unfinished: make gpu-check will not pick it
CREATED=
# A failed set-up leaves no half-made .venv: one this run created goes (one that was there stays, unstamped)
trap '[ -n "$CREATED" ] && [ ! -f "$STAMP" ] && rm -rf "$VENV" && say "removed the unfinished $VENV"' EXIT
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $("$PYTHON" -V)"
  rm -rf "$VENV"; CREATED=1
  # offline, .venv uses the machine's pip and setuptools: a pip of its own would shadow them (Python 3.11's
  # venv brings setuptools 65, older than a CUDA torch asks for)
  "$PYTHON" -m venv ${WHEELS:+--without-pip} "$VENV" \
    || { say "ERROR: '$PYTHON -m venv' failed (Debian: apt-get install python3-venv)"; exit 1; }
fi
PY="$VENV/bin/python"
if [ -n "$WHEELS" ]; then
  # Offline, the machine's own packages (its CUDA torch) stay the ones in use: .venv sees PYTHON's site folders,
  # which a venv made from a python3 that is itself in a venv would not (addsitedir reads their .pth files too)
  "$PYTHON" - > "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/fastloops-machine.pth" <<'PY'
import site, sys
dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
print("\n".join(f"import site; site.addsitedir({d!r})" for d in dirs))
PY
  echo "$WHEELS" > "$VENV/.fastloops-wheels"
  "$PY" -m pip --version >/dev/null 2>&1 || "$PY" -m ensurepip -q \
    || { say "ERROR: neither $PYTHON nor ensurepip has pip: bring pip's wheel in $WHEELS/run"; exit 1; }
fi
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
LOG=$VENV/pip.log

# 2. Offline: everything from the wheelhouse, nothing from apt or an index; ffcv built from its kit.
install_offline() {
  local tiers=(--find-links "$WHEELS/run") reqs=(-r .ci/offline/run.txt)
  [ -d "$WHEELS/lab" ] && tiers+=(--find-links "$WHEELS/lab") && reqs+=(-r .ci/offline/lab.txt)
  say "installing from $WHEELS into $VENV, offline (Python $PYVER; the machine's torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'is missing'))"
  # --no-build-isolation: the project builds with the machine's setuptools, not one fetched from an index
  if ! "$PY" -m pip --disable-pip-version-check -q install --no-index "${tiers[@]}" --no-build-isolation \
      -e . -e ./book "${reqs[@]}" >"$LOG" 2>&1; then
    grep -v "^WARNING: Location" "$LOG" | tail -30
    say "ERROR: pip install from $WHEELS failed (log: $LOG); is the wheelhouse for Python $PYVER? make wheelhouse PYTHON_VERSION=$PYVER"
    return 1
  fi
  if [ -d "$WHEELS/ffcv-kit" ] && ! "$PY" -c 'import ffcv' 2>/dev/null; then
    bash .ci/build_ffcv.sh "$WHEELS/ffcv-kit" "$PY" "$VENV/ffcv-libs" \
      || say "WARNING: ffcv did not build from $WHEELS/ffcv-kit; notebooks skip their FFCV parts"
  fi
}

# 3. Online. Constraints: the full tested pin set on the tested Python, otherwise torch alone.
install_online() {
  CONSTRAINTS=constraints.txt
  if [ "$PYVER" != "3.11" ]; then
    say "Python $PYVER is not the tested 3.11: only torch is pinned, other versions float"
    CONSTRAINTS=$VENV/constraints-torch-only.txt
    grep -E '^torch==' constraints.txt > "$CONSTRAINTS"
  fi

  # 3a. System libraries for ffcv (it builds from source).
  have_syslibs() { command -v pkg-config >/dev/null && pkg-config --exists opencv4 libturbojpeg; }
  if ! have_syslibs; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing system libraries for ffcv with apt: $SYSLIBS"
      export DEBIAN_FRONTEND=noninteractive
      apt-get install -y -q $SYSLIBS >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $SYSLIBS >/dev/null 2>&1; } \
        || say "WARNING: apt-get install failed"
    else
      say "ffcv needs system libraries that are missing here. To add them, run:"
      say "    sudo apt-get install -y $SYSLIBS && make setup"
      say "(conda: see environment.yml). Going on without ffcv; notebooks skip their FFCV parts."
    fi
  fi

  # 3b. Debian's chromium for the browser tests (tests/test_browser.py skips without it).
  if ! command -v chromium >/dev/null && [ -z "${FASTLOOPS_NO_BROWSER:-}" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing chromium with apt for the browser tests (FASTLOOPS_NO_BROWSER=1 skips this)"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -q >/dev/null 2>&1; apt-get install -y -q chromium >/dev/null 2>&1 \
        || say "WARNING: apt-get install chromium failed; the browser tests will skip"
    else
      say "no chromium: the browser tests will skip (to run them: sudo apt-get install -y chromium)"
    fi
  fi

  # 3c. Python packages: the project with its extras, then ffcv when it can build.
  pip_install() { "$PY" -m pip --disable-pip-version-check -q install -c "$CONSTRAINTS" "$@" >"$LOG" 2>&1; }
  say "installing Python packages into $VENV (Python $PYVER; first time about 5 min)"
  if ! pip_install -e ".[test,tf,decoders,lab,docs,jax,threads,stream,lint,trees${EXTRA:+,$EXTRA}]" -e ./book; then
    grep -v "^WARNING: Location" "$LOG" | tail -30; say "ERROR: pip install failed (log: $LOG)"; return 1
  fi
  if have_syslibs && ! "$PY" -c 'import ffcv' 2>/dev/null; then
    say "building ffcv from source (about 1 min)"
    pip_install -e ".[ffcv]" || say "WARNING: ffcv did not build (log: $LOG); notebooks skip their FFCV parts"
  fi
}

if [ -n "$WHEELS" ]; then install_offline || exit 1; else install_online || exit 1; fi
"$PY" - <<'PY'
import importlib.util as u
import torch
opt = {m: bool(u.find_spec(m)) for m in ("tensorflow", "ffcv", "simplejpeg", "turbojpeg", "tree")}
print(f"[setup] torch {torch.__version__} from {torch.__file__.rsplit('/torch/', 1)[0]}")
print("[setup] optional packages: " + ", ".join(f"{m}={'yes' if ok else 'no'}" for m, ok in opt.items()))
PY
echo "$KEY" > "$STAMP"
say "done"
