"""The README's Quick start stays true: CI runs exactly its test command."""

from __future__ import annotations

import pathlib
import re

import pytest

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


def test_ci_runs_both_readme_commands_as_written():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    install_and_open, install_and_test = quick_start_commands()
    assert install_and_test in ci
    # The first one headless: the app exits on its own once it has painted.
    assert install_and_open in ci
    assert "ACTVIZ_EXIT_AFTER_SHOW=1" in ci[ci.index(install_and_open) - 1]


def test_ci_checks_the_system_packages_the_readme_lists():
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (readme,) = re.findall(r"`sudo apt-get install -y ([^`]+)`", section)
    ci = (ROOT / ".ci" / "run").read_text()
    (checked,) = re.findall(r'^PACKAGES="([^"]+)"$', ci, flags=re.MULTILINE)
    assert readme.split() == checked.split()
    assert {"python3-venv", "libegl1", "libgl1", "libxkbcommon0", "libfontconfig1"} <= set(
        readme.split()
    )
    # Every library package has the shared object .ci/run looks for.
    sonames = dict(re.findall(r"\[([\w.+-]+)\]=(lib[\w.+-]+\.so\.\d+)", ci))
    assert set(readme.split()) - {"python3-venv"} == set(sonames)


def test_pyproject_pins_what_can_break_ci_and_can_build_offline():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    test_extra = project["project"]["optional-dependencies"]["test"]
    assert any(re.fullmatch(r"ruff==[\d.]+", req) for req in test_extra), test_extra
    # The packaging test builds without build isolation: the backend must come with [test].
    assert set(project["build-system"]["requires"]) <= set(test_extra)


def test_pyproject_pins_pyside_below_6_12():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"PySide6-Essentials[^"]*<6\.12"', text)
