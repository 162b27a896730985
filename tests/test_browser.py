"""`make lab`, `make slides` and `make site` checked in a real browser (headless Chromium).

Marked `browser` (deselect with `-m "not browser"`); they skip with the reason when Chromium or playwright
is missing. Screenshots go to results/browser/ (FASTLOOPS_RESULTS/browser under `make test`).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin, urlparse

import browser
import nbformat
import pytest

from fastloops_book.notebooks import SOLUTION, SOLUTION_FIRST_LINE, notebook_paths
from fastloops_book.publish import deck, lab, site
from fastloops_helpers import config

pytestmark = pytest.mark.browser
ROOT = config.project_root()
HIDDEN_SOLUTIONS = ROOT / "notebooks" / "00_setup.ipynb"  # the committed notebook whose solutions must stay shut


def shots() -> Path:
    folder = config.results_dir() / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def lab_server(root: Path, tmp: Path) -> Iterator[str]:
    """Start `make lab`'s launcher on a free port with `root` as its folder; yield its URL; always stop it."""
    tracker = tmp / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text('{"windowingMode": "none"}')  # every cell in the DOM, so the test sees them all
    env = dict(
        os.environ,
        FASTLOOPS_SCALE="smoke",
        FASTLOOPS_RESULTS=str(tmp / "results"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        JUPYTER_CONFIG_DIR=str(tmp / "jupyter"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fastloops_book.publish.lab",
            "--port",
            str(lab.free_port(18888)),
            "--root",
            str(root),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    log: list[str] = []
    try:
        url = next((m.group(1) for line in proc.stdout if (m := re.search(r"\[lab\] open: (\S+)", line))), None)
        assert url and url.startswith("http://127.0.0.1:"), "the launcher printed no loopback URL"
        threading.Thread(target=lambda: log.extend(proc.stdout), daemon=True).start()  # keep the pipe drained
        wait_until_up(url.replace("/lab?", "/api/status?"), proc, log)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its kernels share the session's process group
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_until_up(url: str, proc: subprocess.Popen, log: list[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail("JupyterLab exited:\n" + "".join(log[-30:]))
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer within {timeout:.0f} s:\n" + "".join(log[-30:]))


def test_lab_opens_and_runs_notebook_00_in_chromium(tmp_path):
    browser.require_browser()
    work = tmp_path / "notebooks"  # a copy: running cells in the UI must not touch the committed notebook
    work.mkdir()
    nb = nbformat.read(ROOT / "notebooks" / "00_setup.ipynb", as_version=4)
    for cell in nb.cells:  # start blank, so every output and count on the page comes from this run
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            # a solution's input is collapsed in the lab and its prompt hidden with it: show it, so that every
            # code cell's prompt can say the cell ran
            cell.metadata.get("jupyter", {}).pop("source_hidden", None)
    nbformat.write(nb, work / "00_setup.ipynb")
    with lab_server(work, tmp_path) as url, browser.page() as (tab, remote):
        errors: list[str] = []
        tab.on("pageerror", lambda err: errors.append(str(err)))
        tab.goto(url.replace("/lab?", "/lab/tree/00_setup.ipynb?"))
        tab.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)  # the kernel has started
        tab.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        tab.locator("li.lm-Menu-item[data-command='runmenu:run-all']").click()
        tab.wait_for_function(
            """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            return p.length > 0 && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }""",
            timeout=240_000,
            polling=500,
        )
        text = tab.locator(".jp-Notebook").inner_text()
        tab.screenshot(path=str(shots() / "lab-00_setup.png"))
        assert tab.locator(".jp-OutputArea-output").count() >= 8
        assert tab.locator("[data-mime-type='application/vnd.jupyter.error']").count() == 0, "a cell raised"
        assert (
            "[claim] timer_sleep_ratio" in text and "active scale: smoke" in text
        )  # the last cells ran, at smoke scale
        tab.goto(url.replace("/lab?", "/rise/00_setup.ipynb?"))  # the RISE extension's slideshow view
        tab.wait_for_selector(".reveal .slides section", timeout=60_000)
        assert tab.locator(".reveal .slides > section").count() > 1, "RISE shows one slide: no slide metadata?"
        tab.screenshot(path=str(shots() / "lab-rise-00_setup.png"))
        assert not remote, f"the lab page reached the network: {remote[:5]}"
        assert not errors, f"page errors: {errors[:3]}"


def _cell_text(cell: dict) -> str:
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    outputs = [o.get("text") or o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", [])]
    return "\n".join([source, *("".join(t) if isinstance(t, list) else t for t in outputs)])


def solution_lines(path: Path) -> list[tuple[int, list[str]]]:
    """Return, per solution cell of notebook `path`, its index and the lines of its source and stored output that
    no other cell holds (so finding one on the page means the solution shows), the neutral first line left out."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out = []
    for i, cell in enumerate(cells):
        if SOLUTION not in cell.get("metadata", {}).get("tags", []):
            continue
        others = "\n".join(_cell_text(c) for j, c in enumerate(cells) if j != i).replace("`", "").replace("*", "")
        lines = {ln.strip() for ln in _cell_text(cell).splitlines()} - {SOLUTION_FIRST_LINE}
        out.append((i, sorted(ln for ln in lines if len(ln) >= 12 and ln not in others)))
    return out


def test_lab_hides_each_solution_until_it_is_clicked(tmp_path):
    """`make lab` on a committed notebook: no solution input or output on screen until the reader opens it."""
    browser.require_browser()
    work = tmp_path / "notebooks"  # the committed file as it is, in a copy: the lab must not touch the checkout
    work.mkdir()
    shutil.copyfile(HIDDEN_SOLUTIONS, work / HIDDEN_SOLUTIONS.name)
    hidden = solution_lines(HIDDEN_SOLUTIONS)
    assert hidden and all(lines for _, lines in hidden), "no solution text to look for"
    n_cells = len(json.loads(HIDDEN_SOLUTIONS.read_text(encoding="utf-8"))["cells"])
    with lab_server(work, tmp_path) as url, browser.page() as (tab, remote):
        tab.goto(url.replace("/lab?", f"/lab/tree/{HIDDEN_SOLUTIONS.name}?"))
        tab.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
        cells = tab.locator(".jp-Notebook .jp-Cell")
        tab.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length === {n_cells}")
        first = cells.nth(hidden[0][0])
        first.scroll_into_view_if_needed()
        tab.screenshot(path=str(shots() / "lab-solutions-hidden.png"))
        page = tab.locator(".jp-Notebook").inner_text()
        shown = [f"cell {i}: {line[:80]!r}" for i, lines in hidden for line in lines if line in page]
        assert not shown, "solution text on screen before it was opened:\n" + "\n".join(shown)
        first.locator(".jp-InputPlaceholder").click()  # the reader opens the first solution, then its output
        first.locator(".jp-OutputPlaceholder").click()
        tab.wait_for_timeout(500)
        opened = first.inner_text()
        tab.screenshot(path=str(shots() / "lab-solution-opened.png"))
        missing = [line for line in hidden[0][1] if line not in opened]
        assert not missing, f"the opened solution does not show: {missing[:3]}"
        assert not remote, f"the lab page reached the network: {remote[:5]}"


def test_slide_deck_renders_offline_in_chromium(tmp_path):
    browser.require_browser()
    path = ROOT / "notebooks" / "07_dataloader_anatomy.ipynb"
    out = deck.render(path, shots() / "slides")
    with browser.page(viewport=(1024, 768)) as (tab, remote):
        errors: list[str] = []
        tab.on("pageerror", lambda err: errors.append(str(err)))
        tab.goto(out.as_uri())
        tab.wait_for_function("window.Reveal && Reveal.isReady()", timeout=20_000)
        assert tab.evaluate("Reveal.getTotalSlides()") > 1
        tab.screenshot(path=str(shots() / "slides-07-title.png"))
        plot = tab.evaluate("""() => { const s = [...document.querySelectorAll('.slides section section')]
            .findIndex(e => e.querySelector('.jp-OutputArea-output img')); return s; }""")
        if plot >= 0:  # show the first plot: its slide holds the image full size, and it loaded
            tab.evaluate(f"""() => {{ const e = [...document.querySelectorAll('.slides section section')][{plot}];
                const h = [...document.querySelectorAll('.slides > section')].indexOf(e.parentElement);
                Reveal.slide(h, [...e.parentElement.children].indexOf(e)); }}""")
            tab.wait_for_timeout(300)
            assert (
                tab.evaluate(
                    "document.querySelector('section.present section.present img, section.present img').naturalWidth"
                )
                > 0
            )
            tab.screenshot(path=str(shots() / "slides-07-plot.png"))
        assert not remote, f"the deck reached the network: {remote[:5]}"
        assert not errors, f"page errors: {errors[:3]}"


@contextmanager
def static_server(folder: Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep pytest's output clean
        pass


def test_site_renders_with_images_and_links_in_chromium(tmp_path):
    browser.require_browser()
    index = site.build(notebook_paths(), tmp_path / "site")
    with static_server(index.parent) as base, browser.page() as (tab, remote):
        pages = ["index.html"] + [p.stem + ".html" for p in notebook_paths()]
        pages += ["api/fastloops_helpers.html", "api/fastloops_helpers/measure.html"]  # the API reference
        pages += ["report.html"] if (index.parent / "report.html").exists() else []
        checked: set[str] = set()
        for name in pages:
            response = tab.goto(base + name)
            assert response is not None and response.status == 200, name
            tab.wait_for_load_state("load")
            broken = tab.evaluate("[...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).length")
            assert broken == 0, f"{name}: {broken} images did not load"
            hrefs = tab.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
            for href in {h.split("#")[0] for h in hrefs if urlparse(h).netloc == urlparse(base).netloc} - checked:
                checked.add(href)
                assert tab.request.get(href).status == 200, f"{name} links to a missing page: {href}"
            if name.startswith("api/"):
                assert tab.locator("#BatchLoader, #verdict").count() >= 1, f"{name}: the reference lost its entries"
            if name in ("index.html", "07_dataloader_anatomy.html", "api/fastloops_helpers.html"):
                tab.screenshot(path=str(shots() / f"site-{name.replace('.html', '').replace('/', '-')}.png"))
        assert {urljoin(base, p) for p in pages if p != "index.html"} <= checked | {base + "index.html"}
        assert not remote, f"the site reached the network: {remote[:5]}"
