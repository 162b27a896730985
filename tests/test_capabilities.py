"""The GPU row of each notebook's card, read by capabilities.gpu_notebooks, agrees with the notebook's code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fastloops_helpers import config
from fastloops_helpers.measure import capabilities

NOTEBOOKS = sorted((config.project_root() / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _card(folder: Path, gpu: str, name: str = "42_x.ipynb") -> Path:
    cell = {"cell_type": "markdown", "metadata": {}, "source": [f"| | |\n|---|---|\n| **GPU** | {gpu} |\n"]}
    path = folder / name
    path.write_text(json.dumps({"cells": [cell]}))
    return path


@pytest.mark.parametrize(
    ("row", "answer"),
    [("optional: when present", "optional"), ("no", ""), ("not needed: CPU work", ""), ("yes: CUDA only", "needed")],
)
def test_gpu_card_reads_the_first_word(tmp_path: Path, row: str, answer: str) -> None:
    assert capabilities.gpu_card(_card(tmp_path, row)) == answer


def test_gpu_card_refuses_an_unknown_answer(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="42_x.ipynb"):
        capabilities.gpu_card(_card(tmp_path, "sometimes"))


def test_gpu_notebooks_lists_only_the_cards_that_use_a_gpu(tmp_path: Path) -> None:
    _card(tmp_path, "optional: faster there", "01_a.ipynb")
    _card(tmp_path, "no", "02_b.ipynb")
    _card(tmp_path, "yes", "03_c.ipynb")
    assert capabilities.gpu_notebooks(tmp_path) == {"01": "optional", "03": "needed"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_a_notebook_with_cuda_code_says_so_on_its_card(path: Path) -> None:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    uses_cuda = any(c["cell_type"] == "code" and re.search(r"cuda", "".join(c["source"])) for c in cells)
    listed = path.name[:2] in capabilities.gpu_notebooks(path.parent)
    assert listed or not uses_cuda, f"{path.name} has CUDA code but its card's GPU row says it needs none"


def test_the_gpu_check_names_the_notebooks_from_the_cards() -> None:
    numbers = list(capabilities.gpu_notebooks())
    assert len(numbers) >= 2 and capabilities.used_by("CUDA GPU") == ", ".join(numbers) + " (GPU parts)"


def test_optional_notebooks_reads_the_names_before_the_colon(tmp_path: Path) -> None:
    for name, row in (("01_a.ipynb", "ffcv, JAX: skipped without"), ("02_b.ipynb", "jax only: not ffcv")):
        cell = {"cell_type": "markdown", "source": [f"| | |\n|---|---|\n| **GPU** | no |\n| **Optional** | {row} |\n"]}
        (tmp_path / name).write_text(json.dumps({"cells": [cell]}))
    (tmp_path / "03_c.ipynb").write_text(
        json.dumps({"cells": [{"cell_type": "markdown", "source": ["| **GPU** | no |"]}]})
    )
    assert capabilities.optional_notebooks("ffcv", tmp_path) == ["01"]
    assert capabilities.optional_notebooks("jax", tmp_path) == ["01"]  # "jax only" is not a name


# an optional part, and what a notebook's code shows when it uses it: its card must then name the part
USES = {
    "ffcv": r"\bffcv\b|have_ffcv",
    "tensorflow": r"\btensorflow\b",
    "simplejpeg": r"simplejpeg",
    "pyturbojpeg": r"turbojpeg",
    "tensordict": r"tensordict|tensorclass",
    "optree": r"\boptree\b",
    "jax": r"\bjax\b",
    "torch.compile": r"torch\.compile",
}


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if not p.name.startswith("00_")], ids=lambda p: p.name[:2])
def test_a_notebook_that_uses_an_optional_part_names_it_on_its_card(path: Path) -> None:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    unnamed = [
        part
        for part, pattern in USES.items()
        if re.search(pattern, code) and path.name[:2] not in capabilities.optional_notebooks(part, path.parent)
    ]
    assert not unnamed, f"{path.name} uses {unnamed} but its card's '| **Optional** |' row does not name them"


def test_every_optional_part_is_named_by_a_card() -> None:
    assert all(capabilities.used_by(name) != "none" for name in capabilities.CHECKS), {
        name: capabilities.used_by(name) for name in capabilities.CHECKS
    }


def test_cache_sizes_reads_the_last_level_where_linux_says() -> None:
    caches = capabilities.cache_sizes()
    if not Path("/sys/devices/system/cpu/cpu0/cache/index0").exists():
        assert caches == {}
    else:
        last = max(caches, key=lambda name: int(name[1]))
        assert caches[last] >= caches.get("L1d", 0) and caches[last] >= 2**16
