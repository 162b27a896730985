#!/usr/bin/env bash
# One idempotent set-up for `make test`, `make reproduce`, `make notebooks` and `make lab`.
# Usage: bash .ci/setup.sh PYTHON [EXTRAS]   (EXTRAS: comma list added to test,tf,decoders,lab,docs,jax,threads,stream,lint)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
EXTRA=${2:-}
VENV=.venv
SYSLIBS="pkg-config libopencv-dev libturbojpeg0-dev"
say() { printf '[setup] %s\n' "$*"; }

# 1. Interpreter and virtual environment.
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  say "ERROR: $PYTHON is missing or older than 3.10; run: make test PYTHON=/path/to/python3.11"; exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $("$PYTHON" -V)"
  "$PYTHON" -m venv "$VENV" || { say "ERROR: '$PYTHON -m venv' failed (Debian: apt-get install python3-venv)"; exit 1; }
fi
PY="$VENV/bin/python"
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

# 2. Constraints: the full tested pin set on the tested Python, otherwise torch alone.
CONSTRAINTS=constraints.txt
if [ "$PYVER" != "3.11" ]; then
  say "Python $PYVER is not the tested 3.11: only torch is pinned, other versions float"
  CONSTRAINTS=$VENV/constraints-torch-only.txt
  grep -E '^torch==' constraints.txt > "$CONSTRAINTS"
fi

# 3. Skip everything when nothing changed since the last successful set-up.
STAMP=$VENV/.fastloops-installed
KEY=$(cat pyproject.toml constraints.txt .ci/setup.sh | cksum | cut -d' ' -f1)-$EXTRA
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$KEY" ]; then
  say "up to date (.venv matches pyproject.toml and constraints.txt)"; exit 0
fi

# 4. System libraries for ffcv (it builds from source).
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

# 4b. Debian's chromium for the browser tests (tests/test_browser.py skips without it).
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

# 5. Python packages: the project with its extras, then ffcv when it can build.
LOG=$VENV/pip.log
pip_install() { "$PY" -m pip --disable-pip-version-check -q install -c "$CONSTRAINTS" "$@" >"$LOG" 2>&1; }
say "installing Python packages into $VENV (Python $PYVER; first time about 5 min)"
if ! pip_install -e ".[test,tf,decoders,lab,docs,jax,threads,stream,lint${EXTRA:+,$EXTRA}]"; then
  grep -v "^WARNING: Location" "$LOG" | tail -30; say "ERROR: pip install failed (log: $LOG)"; exit 1
fi
if have_syslibs && ! "$PY" -c 'import ffcv' 2>/dev/null; then
  say "building ffcv from source (about 1 min)"
  pip_install -e ".[ffcv]" || say "WARNING: ffcv did not build (log: $LOG); notebooks skip their FFCV parts"
fi
"$PY" - <<'PY'
import importlib.util as u
opt = {m: bool(u.find_spec(m)) for m in ("tensorflow", "ffcv", "simplejpeg", "turbojpeg", "tree")}
print("[setup] optional packages: " + ", ".join(f"{m}={'yes' if ok else 'no'}" for m, ok in opt.items()))
PY
echo "$KEY" > "$STAMP"
say "done"
