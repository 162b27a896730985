"""The notebook rules of CONTRIBUTING.md ("Numbers come from code"; "Stored outputs"), checked on every notebook.

Each test is parametrised by notebook, so a failure names the notebook and the rule; its message lists every
offending cell and text. Run: `pytest -q tests/test_notebook_rules.py -rf`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fastloops_book import claims
from fastloops_book.notebooks import HIDDEN, RUN_TIME_MARKER, SOLUTION, SOLUTION_FIRST_LINE
from fastloops_helpers.measure import MIN_ROUNDS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

UNITS = r"ms|µs|us|ns|min|s|GB/s|MB/s|GiB/s|MiB/s|img/s|images/s|samples/s|fps"
# a number with a unit: "12 ms", "3.5 GB/s", "36x", "-91 %"; "256 x 256" and "2x2" are not ratios
NUMBER_WITH_UNIT = re.compile(rf"(?<![\w.^/])(\d[\d,]*(?:\.\d+)?)(?:\s?({UNITS}|%)(?![\w/])|(x|×)(?![\w]))")
PREDICTION_START = re.compile(r"^\s*(?:[>*-]\s*)*\*\*(?:Prediction|Estimate)", re.I)
ARITHMETIC = re.compile(r"\d[^=\n]*=\s*~?\s*\d")  # "4 B x 93 = 372 B": a worked estimate
INLINE_CODE_OR_MATH = re.compile(r"`[^`\n]*`|\$[^$\n]+\$")
COMMENTED_HEADING = re.compile(r"^\s*#+\s*#{1,6}\s+\S", re.M)
ABSOLUTE_PATH = re.compile(r"(?:(?<=^)|(?<=[\s='\"(\[:]))(?<!://)(?:/[\w.@+-]+){2,}/?|\b[A-Z]:\\[\w\\. -]+", re.M)
PROGRESS_BAR = re.compile(r"\|[#=>\-\s█▏▎▍▌▋▊▉]*\|\s*\d+/\d+")
WARNING = re.compile(r"\b\w*Warning\b:|^WARNING[: ]", re.M)
# "...(up to the bound 1.97x ...): predicted <= 2.17x, measured 1.68x (...)" then "    85 % of the bound"
SHARE_OF_BOUND = re.compile(r"bound (\d+(?:\.\d+)?)x[^\n]*measured (\d+(?:\.\d+)?)x[^\n]*\n\s*(\d+) ?% of the bound")
# "95 % interval 0.9 to 1.2 over 5 rounds" or "-inf to inf": an interval verdict over fewer rounds than can decide
INTERVAL_ROUNDS = re.compile(r"(?:95 % interval|a tie on this machine)[^\n]*?\b(\d+) rounds|interval -?inf to -?inf")


def wrong_shares_of_bound(text: str) -> list[str]:
    """Return each printed share of a bound that is not the measured ratio over that bound (2 points' rounding)."""
    return [
        m.group(0).strip()[:160]
        for m in SHARE_OF_BOUND.finditer(text)
        if abs(float(m.group(3)) - 100 * float(m.group(2)) / float(m.group(1))) > 2
    ]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    else:
        data = output.get("data", {})
        text = data.get("text/plain", "") or "".join(output.get("traceback", []))
    return "".join(text) if isinstance(text, list) else text


def _normal(number: str, unit: str) -> tuple[float, str]:
    unit = {"×": "x", "us": "µs", "images/s": "img/s", "fps": "img/s"}.get(unit, unit)
    return float(number.replace(",", "")), unit


def seed_figures() -> set[tuple[float, str]]:
    """Return the (number, unit) pairs quoted in the claims registry's seed figures."""
    pairs = set()
    for c in claims.CLAIMS:  # "20,452 vs 669 fps": every number of a seed figure with each of its units
        units = {m.group(2) or m.group(3) for m in NUMBER_WITH_UNIT.finditer(c.seed_figure)}
        numbers = re.findall(r"\d[\d,]*(?:\.\d+)?", c.seed_figure)
        pairs |= {_normal(n, u) for n in numbers for u in units}
    return pairs


def unexplained_numbers(markdown: str, allowed: set[tuple[float, str]]) -> list[str]:
    """Return the numbers with units in `markdown` that are neither seed figures nor part of a prediction."""
    found = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        if PREDICTION_START.match(paragraph):
            continue  # a stated prediction or estimate: the code prints it beside the measurement
        for line in paragraph.splitlines():
            if RUN_TIME_MARKER in line or ARITHMETIC.search(line):
                continue  # generated run-time card line; a worked estimate with its arithmetic
            for m in NUMBER_WITH_UNIT.finditer(INLINE_CODE_OR_MATH.sub(" ", line)):
                if _normal(m.group(1), m.group(2) or m.group(3)) not in allowed:
                    found.append(f"{m.group(0).strip()!r} in: {line.strip()[:140]}")
    return found


def _report(path: Path, rule: str, offences: list[str]) -> str:
    return f"{path.name} breaks '{rule}' ({len(offences)}):\n  " + "\n  ".join(offences)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_markdown_states_no_measured_numbers(path):
    allowed = seed_figures()
    offences = [
        f"cell {i}: {text}"
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "markdown"
        for text in unexplained_numbers(_source(cell), allowed)
    ]
    assert not offences, _report(
        path,
        "numbers come from code: markdown states only seed figures (claims "
        "registry) and predictions ('**Prediction'/'**Estimate' paragraphs, "
        "'=' arithmetic)",
        offences,
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_markdown_commented_out_in_code(path):
    offences = [
        f"cell {i}: {m.group(0).strip()[:100]}"
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "code"
        for m in COMMENTED_HEADING.finditer(_source(cell))
    ]
    assert not offences, _report(
        path, "no markdown commented out in code cells (a '# ## heading' never renders)", offences
    )


INSTRUMENT = re.compile(r"\bcontender=|\bwarp\.|\bslowdown\.")  # the test runs' instruments: never in a lesson


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_names_the_test_instruments(path):
    offences = [
        f"cell {i}: {line.strip()[:100]}"
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "code"
        for line in _source(cell).splitlines()
        if INSTRUMENT.search(line)
    ]
    assert not offences, _report(path, "no cell names a contender for the warp or calls an instrument", offences)


def test_the_instrument_scanner_finds_a_named_contender():
    assert INSTRUMENT.search("with measure.Timer(contender=('epoch', name)) as t:")
    assert INSTRUMENT.search("factors = warp.factors(passes)") and not INSTRUMENT.search("the warped run")


def _output_offences(path: Path, scanner) -> list[str]:
    """Return "cell N: text" for each text `scanner` finds in a code cell's stored outputs."""
    return [
        f"cell {i}: {line}"
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "code"
        for line in scanner("".join(_text(out) for out in cell.get("outputs", [])))
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_printed_share_of_a_bound_is_the_ratio_over_it(path):
    offences = _output_offences(path, wrong_shares_of_bound)
    assert not offences, _report(path, "a share of a bound is the measured ratio divided by the bound", offences)


def undecidable_intervals(text: str) -> list[str]:
    """Return each printed interval verdict over fewer rounds than bound a 95 % interval (stats.MIN_ROUNDS)."""
    return [
        m.group(0)[:160] for m in INTERVAL_ROUNDS.finditer(text) if m.group(1) is None or int(m.group(1)) < MIN_ROUNDS
    ]


def test_the_interval_scanner_finds_a_verdict_over_too_few_rounds():
    assert undecidable_intervals("a tie on this machine: median 1.1, 95 % interval 0.9 to 1.3 over 5 rounds")
    assert undecidable_intervals("x: predicted 1-2x, measured 1.5x (95 % interval -inf to inf, 5 rounds): a tie")
    assert not undecidable_intervals("met: median 1.16, 95 % interval 1.12 to 1.17 over 6 rounds (target >= 1)")
    assert not undecidable_intervals("x: too few rounds to decide: median 1.1 over 3 rounds (6 or more bound it)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_interval_verdict_over_too_few_rounds(path):
    offences = _output_offences(path, undecidable_intervals)
    assert not offences, _report(path, f"an interval verdict needs {MIN_ROUNDS} or more rounds", offences)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_absolute_paths_in_outputs(path):
    offences = [
        f"cell {i}: {m.group(0)[:100]}"
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "code"
        for out in cell.get("outputs", [])
        for m in ABSOLUTE_PATH.finditer(_text(out))
    ]
    assert not offences, _report(path, "paths printed relative to the project root (config.rel)", offences)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_progress_bars_stored_as_one_line(path):
    offences = [
        f"cell {i}: {out.get('name', out.get('output_type'))} output"
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "code"
        for out in cell.get("outputs", [])
        if "\r" in _text(out)
    ]
    assert not offences, _report(
        path,
        "one line per progress bar (re-run with python -m fastloops_book.notebooks run: it resolves carriage returns)",
        offences,
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_warnings_in_outputs(path):
    offences = [
        f"cell {i}: {m.group(0)} ... {_text(out)[m.start() : m.start() + 100]!r}"
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "code"
        for out in cell.get("outputs", [])
        for m in WARNING.finditer(_text(out))
    ]
    assert not offences, _report(path, "no warnings noise in stored outputs", offences)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_solutions_are_hidden_in_the_lab_input_and_output(path):
    solutions = [(i, c) for i, c in enumerate(_cells(path)) if SOLUTION in c.get("metadata", {}).get("tags", [])]
    offences = [
        f"cell {i}: metadata.jupyter.{flag} is not true"
        for i, cell in solutions
        for flag in HIDDEN
        if cell["metadata"].get("jupyter", {}).get(flag) is not True
    ]
    offences += [  # a collapsed cell shows its first line
        f"cell {i}: starts {_source(cell).splitlines()[0][:60]!r}, not {SOLUTION_FIRST_LINE!r}"
        for i, cell in solutions
        if _source(cell).splitlines()[:1] != [SOLUTION_FIRST_LINE]
    ]
    assert solutions, f"{path.name} has no cell tagged {SOLUTION!r}"
    assert not offences, _report(
        path,
        "a solution is collapsed in JupyterLab, input and output, and its first line gives nothing away (every run "
        "of the notebooks sets both: make notebooks NB=...)",
        offences,
    )


def test_no_progress_bar_stored_on_stderr():
    counts = {}
    for path in NOTEBOOKS:
        n = sum(
            1
            for cell in _cells(path)
            if cell["cell_type"] == "code"
            for out in cell.get("outputs", [])
            if out.get("name") == "stderr" and PROGRESS_BAR.search(_text(out))
        )
        if n:
            counts[path.name] = n
    assert not counts, (
        f"stored stderr progress outputs (a red block on GitHub): {counts}; re-run with python -m "
        "fastloops_book.notebooks run, which stores the finished bars of nbval-ignore-output cells as text"
    )


def test_the_number_scanner_flags_measurements_and_exempts_seeds_and_predictions():
    allowed = seed_figures()
    assert (122.0, "µs") in allowed and (36.0, "x") in allowed
    measured = [(17.3, "ms"), (3.5, "GB/s"), (2.7, "x")]  # figures no seed quotes
    assert not set(measured) & allowed
    assert unexplained_numbers("The loop takes 17.3 ms here, 3.5 GB/s and 2.7x faster.", allowed) == [
        "'17.3 ms' in: The loop takes 17.3 ms here, 3.5 GB/s and 2.7x faster.",
        "'3.5 GB/s' in: The loop takes 17.3 ms here, 3.5 GB/s and 2.7x faster.",
        "'2.7x' in: The loop takes 17.3 ms here, 3.5 GB/s and 2.7x faster.",
    ]
    assert unexplained_numbers("The slide: 122 µs vs 3.42 µs (36x).", allowed) == []
    assert unexplained_numbers("**Prediction.** 2 cores, so at most 2x;\nabout 40 % idle.", allowed) == []
    assert unexplained_numbers("93 features x 4 B = 372 B per row, 1024 rows = 0.4 ms at 1 GB/s.", allowed) == []
    assert unexplained_numbers("256 x 256 images, `time.sleep(0.05)` and $t = 5 ms$; 1000 epochs", allowed) == []
    assert len(unexplained_numbers("| **Run time** | smoke ~15 s |", allowed)) == 1
    assert unexplained_numbers(f"| **Run time** | {RUN_TIME_MARKER} smoke ~15 s |", allowed) == []


def test_the_output_scanners():
    assert ABSOLUTE_PATH.findall("data=/home/me/fastloops/data, results=results") == ["/home/me/fastloops/data"]
    assert not ABSOLUTE_PATH.findall("see https://github.com/a/b and 3 GB/s, img/s, data=$FASTLOOPS_DATA/otto")
    assert COMMENTED_HEADING.search("x = 1\n# ## Takeaway\n")
    assert not COMMENTED_HEADING.search("# a comment\n#: not a heading")
    assert PROGRESS_BAR.search("epochs: 100%|##########| 5/5")
    assert WARNING.search("/x.py:3: UserWarning: something") and not WARNING.search("no warnings here")
    line = "n=1 over 0 (up to the bound 1.97x, +10 %): predicted <= 2.17x, measured 1.68x (6 rounds): within\n"
    assert wrong_shares_of_bound(line + "    168 % of the bound") and not wrong_shares_of_bound(
        line + "  85 % of the bound"
    )


def test_the_runner_talks_to_its_kernel_over_local_sockets_and_prints_nothing(tmp_path, capfd):
    import nbformat

    from fastloops_book import notebooks

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os\nprint(os.environ['FASTLOOPS_SCALE'])")])
    nbformat.write(nb, tmp_path / "t.ipynb")
    notebooks.execute(tmp_path / "t.ipynb", tmp_path / "out.ipynb", "smoke")
    printed = capfd.readouterr()
    # over TCP, ipykernel warns on stderr that the kernel's traffic is sent unencrypted
    assert printed.err == "" and printed.out == "", printed
    assert nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs[0]["text"] == "smoke\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.ipynb", "t.ipynb"]  # no socket files left behind
