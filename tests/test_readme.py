"""The README's Quick start stays true: CI runs exactly its test command."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_quick_start_has_exactly_two_commands():
    cmds = quick_start_commands()
    assert len(cmds) == 2, cmds
    install_and_open, install_and_test = cmds
    assert install_and_open.endswith("actviz") and "pip install ." in install_and_open
    assert "pytest" in install_and_test and "[test]" in install_and_test


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert quick_start_commands()[1] in ci


def test_pyproject_pins_pyside_below_6_12():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"PySide6-Essentials[^"]*<6\.12"', text)
