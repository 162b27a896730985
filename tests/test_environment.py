"""The conda route installs what the set-up installs: the same extras of pyproject.toml."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _extras(text: str, pattern: str) -> set[str]:
    match = re.search(pattern, text)
    assert match, f"no install line matching {pattern!r}"
    return {e for e in match.group(1).split(",") if e and "$" not in e}


def test_environment_yml_installs_the_setups_extras():
    setup = _extras((ROOT / ".ci/setup.sh").read_text(), r'pip_install -e "\.\[([a-z,]+)')
    setup |= _extras((ROOT / ".ci/setup.sh").read_text(), r'pip_install -e "\.\[(ffcv)\]')
    conda = _extras((ROOT / "environment.yml").read_text(), r"-e \.\[([a-z,]+)\]")
    assert conda == setup, f"environment.yml lacks {setup - conda} and adds {conda - setup}"


def test_every_extra_of_pyproject_is_installed_by_the_setup():
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    setup = _extras((ROOT / ".ci/setup.sh").read_text(), r'pip_install -e "\.\[([a-z,]+)')
    assert declared - setup <= {"ffcv"}, f"the set-up never installs {declared - setup - {'ffcv'}}"
