"""Start JupyterLab on this machine's loopback in notebooks/, as any user (root too), with no network calls.

`python -m fastloops_book.publish.lab [--port N] [--root DIR]` (what `make lab` runs) picks a free port
from 8888 up, prints the URL to open (with its token), then replaces itself with `jupyter lab`. Explained in
README.md, "Present and read".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import socket
import sys
from pathlib import Path

from fastloops_helpers import config

CONFIG = Path(__file__).with_name("jupyter")  # labconfig/: never ask to fetch news (JUPYTER_CONFIG_PATH)
HOST = "127.0.0.1"  # loopback only: a lecture-room network never sees the server
# JupyterLab's own calls out (news feed, update check, PyPI extension search), all off: nothing to fetch here.
OFFLINE = (
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
)


def free_port(start: int = 8888, tries: int = 100) -> int:
    """Return the first port from `start` that can be bound on the loopback."""
    for port in range(start, start + tries):
        with socket.socket() as sock, contextlib.suppress(OSError):  # taken: try the next
            sock.bind((HOST, port))
            return port
    raise OSError(f"no free port in {start}..{start + tries - 1} on {HOST}: pass --port")


def command(port: int, root: Path, token: str, as_root: bool | None = None) -> list[str]:
    """Return the `jupyter lab` command line (with --allow-root when run as root)."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    return [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--ip={HOST}",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        *OFFLINE,
        *(["--allow-root"] if as_root else []),
    ]


def environment() -> dict[str, str]:
    """Return this process's environment with the project's Jupyter config folder first on JUPYTER_CONFIG_PATH."""
    paths = [str(CONFIG), *filter(None, os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))]
    return dict(os.environ, JUPYTER_CONFIG_PATH=os.pathsep.join(dict.fromkeys(paths)))


def url(port: int, token: str) -> str:
    """Return the address to open in a browser."""
    return f"http://{HOST}:{port}/lab?token={token}"


def main(argv: list[str] | None = None) -> int:
    """Print where JupyterLab will listen, then exec it."""
    parser = argparse.ArgumentParser(prog="python -m fastloops_book.publish.lab")
    parser.add_argument("--port", type=int, help="port on 127.0.0.1 (default: the first free one from 8888)")
    parser.add_argument("--root", type=Path, default=config.project_root() / "notebooks", help="folder to open")
    args = parser.parse_args(argv)
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        raise SystemExit(
            "JupyterLab is not installed in this environment: run `make lab` (it installs the lab extra)"
        ) from None
    if not args.root.is_dir():
        raise SystemExit(f"no such folder: {args.root}")
    port = args.port or free_port()
    token = secrets.token_hex(24)
    print(f"[lab] JupyterLab in {args.root}, scale={config.scale()}; stop it with Ctrl-C twice", flush=True)
    print(f"[lab] open: {url(port, token)}", flush=True)
    argv_lab = command(port, args.root.resolve(), token)
    os.execve(argv_lab[0], argv_lab, environment())
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
