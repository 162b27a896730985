"""Headless Chromium for the browser tests: Debian's /usr/bin/chromium driven by playwright-python.

The tests skip with the reason when either is missing (`make setup` as root installs Debian's chromium;
elsewhere: `sudo apt-get install chromium`, or set FASTLOOPS_CHROMIUM to a Chromium/Chrome binary).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

# Without these, Chromium hangs or retries on a closed network (component updates, sync, QUIC probes).
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
LOCAL_SCHEMES = ("file", "data", "blob", "about", "chrome-extension")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


def chromium_path() -> str | None:
    """Return the Chromium binary to drive, or None."""
    env = os.environ.get("FASTLOOPS_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


def require_browser() -> str:
    """Return the Chromium path, or skip the calling test with the reason."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("playwright is not installed (it comes with the test extra: make setup)")
    path = chromium_path()
    if path is None:
        pytest.skip(
            "no chromium binary: as root `make setup` installs Debian's chromium; "
            "otherwise `sudo apt-get install chromium` (or set FASTLOOPS_CHROMIUM)"
        )
    return path


def is_local(url: str) -> bool:
    """Return whether a request URL stays on this machine (a file, inline data, or a loopback server)."""
    parts = urlparse(url)
    return parts.scheme in LOCAL_SCHEMES or parts.hostname in LOCAL_HOSTS


@contextmanager
def page(viewport: tuple[int, int] = (1280, 800)) -> Iterator[tuple[object, list[str]]]:
    """Yield a fresh headless page and the list of non-local URLs it requested (filled as it loads)."""
    from playwright.sync_api import sync_playwright

    executable = require_browser()
    remote: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        try:
            context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
            tab = context.new_page()
            tab.on("request", lambda req: None if is_local(req.url) else remote.append(req.url))
            yield tab, remote
        finally:
            browser.close()
