"""One clock: nothing outside `measure/` reads a raw clock, so every duration goes through the harness.

The store's throttle (`data/store.py`) schedules bytes rather than measuring anything, and is the one exception.
"""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAW = re.compile(r"\btime\.(perf_counter|monotonic|time|process_time)(_ns)?\b|from time import")
EXCEPT = {"fastloops_helpers/data/store.py"}


def raw_clocks(text: str) -> list[str]:
    """Return the lines of `text` that read a raw clock."""
    return [line.strip() for line in text.splitlines() if RAW.search(line) and not line.lstrip().startswith("#")]


def test_the_pattern_finds_every_raw_clock_and_nothing_else():
    found = raw_clocks("a = time.perf_counter()\nb = time.monotonic_ns()\nfrom time import sleep\n# time.time()\n")
    assert found == ["a = time.perf_counter()", "b = time.monotonic_ns()", "from time import sleep"]
    assert raw_clocks("time.sleep(1)\nmeasure.now()\nstart = now()\n") == []


def test_no_raw_clock_outside_measure():
    offenders = {}
    for path in sorted((ROOT / "fastloops_helpers").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("fastloops_helpers/measure/") or rel in EXCEPT:
            continue
        if lines := raw_clocks(path.read_text()):
            offenders[rel] = lines
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if lines := raw_clocks(code):
            offenders[path.name] = lines
    assert not offenders, f"time with measure.now, measure.Timer or measure.measure, not a raw clock: {offenders}"
