"""No compared cell's output depends on the machine: CUDA, the core count, or an optional package.

The stored outputs are made on a 2-core CPU machine and on a 16-core GPU machine that lacks some optional packages,
and nbval must pass on both. nbval compares every code cell that has outputs and lacks the `nbval-ignore-output`
tag (a "compared cell"), so such a cell may not print anything that differs between them. Lines that do are
printed from an ignored cell, or phrased so that they read the same everywhere.

The rule, checked on the cell's syntax tree (so comments and strings never trigger it):

1. A compared cell does not use any reference in `MACHINE` below: `torch.cuda`, `find_spec`, `os.cpu_count`,
   `config.device()`, the package's machine and capability helpers, ...
2. Nor a name that the notebook bound, in an earlier cell, directly from one of them: `cores = os.cpu_count()`,
   `device = config.device()`, `HAVE_FFCV = ffcv_io.have_ffcv()`, a loop over `find_decoders()`, an assignment
   under `if torch.cuda.is_available():`, an import inside a `try` that catches ImportError.
3. Nor a name in `DERIVED`: values whose content (a dict's keys, a table's rows) follows an optional package
   through several steps, which a one-step rule cannot follow without flagging every value that merely passed
   near one (a full taint analysis flags about 30 compared cells whose outputs read the same everywhere).

Exempt: `assert` statements (a passing assert prints nothing; an assert states what must hold on every machine),
and the bodies of functions and classes a compared cell defines (they print only when called, and the call is
checked). Cell magics and shell lines (`%...`, `!...`) are skipped.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# A dotted reference is machine-dependent when any run of its parts is a key of MACHINE (so `torch.cuda.synchronize`,
# `fastloops_helpers.config.device` and `from os import cpu_count; cpu_count()` all count); the value says why.
MACHINE = {
    # CUDA: present on the GPU machine only
    "torch.cuda": "CUDA is there on the GPU machine only",
    "is_available": "torch.cuda.is_available and the like",
    "device_count": "how many GPUs",
    "get_device_name": "the GPU's name",
    "config.device": "cuda on the GPU machine, cpu here (fastloops_helpers.config.device)",
    "gpu_name": "fastloops_helpers.measure.gpu_name: the GPU's name, or None",
    # the core count
    "cpu_count": "os.cpu_count, psutil.cpu_count, multiprocessing.cpu_count: the cores",
    "sched_getaffinity": "the cores this process may use",
    "loops.workers": "fastloops_helpers.experiments.loops.workers: the slide's 10 workers capped by the cores",
    # the machine described
    "hardware_line": "fastloops_helpers.measure.hardware_line: CPU, cores, RAM, GPU, versions",
    "cpu_name": "fastloops_helpers.measure.cpu_name: the CPU's model",
    "check_feature": "PIL.features.check_feature: how this Pillow was built",
    # optional packages: which are installed
    "find_spec": "importlib.util.find_spec: whether a package is installed",
    "importlib.util": "find_spec and friends",
    "import_module": "importlib.import_module inside a try: probing an optional package",
    "__import__": "probing an optional package (notebook 14's `has`)",
    "ImportError": "a try/except ImportError: which optional packages import",
    "ModuleNotFoundError": "the same",
    "have_ffcv": "fastloops_helpers.data.ffcv_io.have_ffcv: whether ffcv imports",
    "find_decoders": "fastloops_helpers.data.decoders.find_decoders: the JPEG decoders installed here",
    "capabilities.check_all": "fastloops_helpers.measure.capabilities: the optional parts present here",
    "check_gpu": "capabilities.check_gpu",
    "check_ffcv": "capabilities.check_ffcv",
    "check_compile": "capabilities.check_compile: whether inductor compiles here",
    "check_libjpeg_turbo": "capabilities.check_libjpeg_turbo",
}

# Values that depend on an optional package through several steps (rule 3), by notebook number.
DERIVED = {
    "06": {"ways": "the slide's one-liners: dm-tree's only where dm-tree imports"},
    "14": {
        "configs": "the pipelines: SPDL and torchdata.nodes only where they import (`has`)",
        "rates": "one entry per pipeline in `configs`",
        "ratios": "helpers_threads_over_spdl only where SPDL was timed",
    },
    "16": {
        "rank_rows": "a row per split, the `datasets` ones from the datasets package",
        "resume_rows": "a row per reader, from the datasets and webdataset packages",
    },
}


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return [parts[-1]] if parts else None
    return [node.id, *reversed(parts)]


def machine_refs(node: ast.AST) -> set[str]:
    """Return the MACHINE keys that `node` references (names, attribute chains, imported names)."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Attribute, ast.Name)) and (parts := _dotted(n)):
            runs = {".".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)}
            found |= runs & MACHINE.keys()
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            found |= {a.name for a in n.names} & MACHINE.keys()
            if isinstance(n, ast.ImportFrom) and n.module:
                found |= {n.module} & MACHINE.keys()
    return found


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stored(node: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(node, ast.alias):
        names = {(node.asname or node.name).split(".")[0]}
    return names


def bind(stmts: list[ast.stmt], bound: dict[str, str], because: str = "") -> None:
    """Record in `bound` each name these statements bind directly from a MACHINE reference (rule 2)."""
    for s in stmts:
        why = because
        if isinstance(s, ast.If | ast.While):
            bind(s.body + s.orelse, bound, because or ", ".join(sorted(machine_refs(s.test))))
            continue
        if isinstance(s, ast.Try):
            handlers = ", ".join(sorted(set().union(*(machine_refs(h.type) for h in s.handlers if h.type))))
            bind(s.body + s.orelse, bound, because or handlers)
            for h in s.handlers:
                bind(h.body, bound, because or handlers)
            bind(s.finalbody, bound, because)
            continue
        if isinstance(s, ast.For | ast.AsyncFor):
            targets, value = _stored(s.target), s.iter
            bind(s.body + s.orelse, bound, because)
        elif isinstance(s, ast.Assign | ast.AnnAssign | ast.AugAssign):
            value = s.value
            targets = set().union(*(_stored(t) for t in (s.targets if isinstance(s, ast.Assign) else [s.target])))
        elif isinstance(s, ast.Import | ast.ImportFrom):
            targets, value = set().union(*(_stored(a) for a in s.names)), s
        elif isinstance(s, ast.With | ast.AsyncWith):
            bind(s.body, bound, because)
            continue
        else:
            continue
        why = why or ", ".join(sorted(machine_refs(value)))
        for name in targets:
            if why:
                bound[name] = why
            elif isinstance(s, ast.Assign | ast.For):
                bound.pop(name, None)  # rebound from something the machine does not decide


def offences(stmts: list[ast.stmt], bound: dict[str, str]) -> list[str]:
    """Return what, in a compared cell's statements, may print something machine-dependent (asserts exempt)."""
    found = []
    for s in stmts:
        if isinstance(s, ast.Assert):
            continue
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            parts = s.decorator_list
        elif isinstance(s, ast.If | ast.While):
            parts = [s.test]
            found += offences(s.body + s.orelse, bound)
        elif isinstance(s, ast.For | ast.AsyncFor):
            parts = [s.iter]
            found += offences(s.body + s.orelse, bound)
        elif isinstance(s, ast.With | ast.AsyncWith):
            parts = [item.context_expr for item in s.items]
            found += offences(s.body, bound)
        elif isinstance(s, ast.Try):
            parts = [h.type for h in s.handlers if h.type]
            found += offences(s.body + s.orelse + s.finalbody + [x for h in s.handlers for x in h.body], bound)
        else:
            parts = [s]
        for part in parts:
            found += [f"line {s.lineno}: {ref}" for ref in sorted(machine_refs(part))]
            names = sorted(_loaded(part) & bound.keys())
            found += [f"line {s.lineno}: {name} (bound from {bound[name]})" for name in names]
    return found


def _parse(source: str) -> ast.Module:
    lines = source.splitlines()
    return ast.parse("\n".join("pass" if line.lstrip().startswith(("%", "!")) else line for line in lines))


def flagged(path: Path) -> dict[int, list[str]]:
    """Return {cell index: offences} for the compared cells of notebook `path` that break the rule."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    bound = {name: f"DERIVED: {why}" for name, why in DERIVED.get(path.name[:2], {}).items()}
    out = {}
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        tree = _parse(source)
        compared = cell.get("outputs") and "nbval-ignore-output" not in cell.get("metadata", {}).get("tags", [])
        if compared and (found := offences(tree.body, bound)):
            out[index] = found
        bind(tree.body, bound)
        bound.update({name: f"DERIVED: {why}" for name, why in DERIVED.get(path.name[:2], {}).items()})
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_compared_cell_depends_on_the_machine(path):
    bad = flagged(path)
    assert not bad, (
        f"{path.name}: compared cells whose output depends on the machine "
        + "; ".join(f"cell {i}: {', '.join(why)}" for i, why in bad.items())
        + " (print such lines from a cell tagged nbval-ignore-output, or phrase them the same everywhere)"
    )


def _flags(*sources: str) -> list[str]:
    bound: dict[str, str] = {}
    for source in sources[:-1]:
        bind(_parse(source).body, bound)
    return offences(_parse(sources[-1]).body, bound)


def test_the_rule_flags_branches_and_bound_names_and_spares_comments_strings_and_asserts():
    assert _flags('print("GPU" if torch.cuda.is_available() else "none")')
    assert _flags("if importlib.util.find_spec('tree'):\n    print('dm-tree')")
    assert _flags("from os import cpu_count\nprint(cpu_count())")
    assert _flags("print(measure.hardware_line())")
    assert _flags("cores = os.cpu_count()", "print(cores)")
    assert _flags("try:\n    import tree\nexcept ImportError:\n    tree = None", "print(tree is None)")
    assert _flags("if torch.cuda.is_available():\n    rows = [1]\nelse:\n    rows = []", "print(len(rows))")
    assert _flags("device = config.device()", "x = torch.ones(2, device=device)\nx")
    assert not _flags("cores = os.cpu_count()", "cores = 2", "print(cores)")  # rebound from a constant
    assert not _flags("# torch.cuda.is_available() decides nothing here\nprint('torch.cuda, find_spec')")
    assert not _flags("cores = os.cpu_count()", "assert cores >= 1")
    assert not _flags("def f():\n    return torch.cuda.is_available()\nprint('defined')")
    assert not _flags("%time x = 1\nprint(x)")


def test_the_rule_flags_what_the_issue_named_before_the_fix():
    """The offenders the GPU-edition issue named, as they were written, are flagged (rule 1 and rule 3)."""
    nb08_c49 = 'print("TensorRT step:", "a GPU is here" if torch.cuda.is_available() else "needs an NVIDIA GPU")'
    assert _flags(nb08_c49)
    assert _flags("device = config.device()", "loaders = make_loaders(data, batch_size, device, seed=seed)")
    bound = {name: "DERIVED" for name in DERIVED["14"]}
    assert offences(_parse('print("ratios taken per round:", sorted(ratios))').body, bound)
    bound = {name: "DERIVED" for name in DERIVED["16"]}
    assert offences(_parse("for r in rank_rows:\n    print(r['split'])").body, bound)
