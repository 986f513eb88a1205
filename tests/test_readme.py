"""The README and docs/ stay true: CI runs the Quick start exactly as written, the README's
script runs, every command line shown parses, every link and picture exists."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The README is a front door: what actviz is, the Quick start, a script, the CLI, links.
README_MAX_LINES = 160
#: User-guide pages of features that write their own page; the README and the docs index link
#: them from the start, so a link to one of these may wait for its page.
PAGES_OF_OTHER_FEATURES = {"visualize.md", "effects.md", "atlas.md", "sessions.md"}


def readme() -> str:
    return (ROOT / "README.md").read_text()


def section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def quick_start_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", section(readme(), "Quick start"))


def markdown_files() -> list[pathlib.Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


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
    (listed,) = re.findall(r"`sudo apt-get install -y ([^`]+)`", section(readme(), "Quick start"))
    ci = (ROOT / ".ci" / "run").read_text()
    (checked,) = re.findall(r'^PACKAGES="([^"]+)"$', ci, flags=re.MULTILINE)
    assert listed.split() == checked.split()
    assert {"python3-venv", "libegl1", "libgl1", "libxkbcommon0", "libfontconfig1"} <= set(
        listed.split()
    )
    # Every library package has the shared object .ci/run looks for.
    sonames = dict(re.findall(r"\[([\w.+-]+)\]=(lib[\w.+-]+\.so\.\d+)", ci))
    assert set(listed.split()) - {"python3-venv"} == set(sonames)


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


# -- the README as a front door ---------------------------------------------------------------


def test_readme_is_short_and_has_one_screenshot():
    text = readme()
    assert len(text.splitlines()) <= README_MAX_LINES
    assert len(re.findall(r"!\[[^\]]*\]\(resources/screenshot-[\w-]+\.png\)", text)) == 1
    # The history lives in CHANGELOG.md and the figures in docs/performance.md.
    for dated in ("evening", "before this round", "2026-11-"):
        assert dated not in text


def test_every_link_and_picture_resolves():
    missing = []
    for md in markdown_files():
        for target in re.findall(r"\]\(([^)\s]+)\)", md.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path = target.split("#", 1)[0]
            if not path:
                continue
            if not (md.parent / path).exists() and pathlib.Path(path).name not in (
                PAGES_OF_OTHER_FEATURES
            ):
                missing.append(f"{md.relative_to(ROOT)} -> {target}")
    assert missing == []


def test_anchors_point_at_headings():
    def slug(heading: str) -> str:
        heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        return heading.replace(" ", "-")

    bad = []
    for md in markdown_files():
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([\w-]+)\)", md.read_text()):
            page = (md.parent / target) if target else md
            if not page.exists():
                continue
            slugs = {slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)}
            if anchor not in slugs:
                bad.append(f"{md.name} -> {target}#{anchor}")
    assert bad == []


def test_the_readme_links_every_user_guide_page():
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", readme()))
    pages = {p.name for p in DOCS.glob("*.md")}
    required = {
        "opening-models.md", "layers.md", "saliency.md", "whatif.md", "compare.md",
        "dataset-scan.md", "live.md", "tokens.md", "export.md", "cli.md", "scripting.md",
        "architecture.md", "performance.md", "testing.md", "index.md",
    }  # fmt: skip
    assert required <= pages
    assert required <= linked
    assert PAGES_OF_OTHER_FEATURES <= linked


# -- what the docs show must run --------------------------------------------------------------


def _parse_actviz(line: str):
    """Parse an ``actviz ...`` command line as ``actviz.cli.main`` would (``gui`` when no
    command is named); argparse exits on an unknown flag or command."""
    from actviz import cli

    argv = shlex.split(line, comments=True)[1:]
    first = next((a for a in argv if not a.startswith("-")), None)
    if first not in cli._COMMANDS:
        argv.insert(1 if argv[:1] == ["--debug"] else 0, "gui")
    return cli.build_parser().parse_args(argv)


def test_every_command_line_in_the_docs_parses():
    lines = []
    for md in markdown_files():
        for block in re.findall(r"```bash\n(.*?)```", md.read_text(), flags=re.DOTALL):
            lines += [ln for ln in block.splitlines() if ln.startswith("actviz")]
    assert len(lines) >= 10
    for line in lines:
        args = _parse_actviz(line)
        assert args.command in line.split("#")[0] or args.command == "gui", line


def test_every_flag_the_cli_page_names_exists(capsys):
    from actviz import cli
    from actviz.bench import cli as bench_cli

    parser = cli.build_parser()
    known = set(parser._option_string_actions)
    for action in parser._subparsers._group_actions:
        for sub in action.choices.values():
            known |= set(sub._option_string_actions)
    with pytest.raises(SystemExit):
        bench_cli.main(["--help"])
    known |= set(re.findall(r"--[a-z][\w-]*", capsys.readouterr().out))
    named = set(re.findall(r"`(--[a-z][\w-]*)", (DOCS / "cli.md").read_text()))
    named |= set(re.findall(r" / `(--[a-z][\w-]*)`", (DOCS / "cli.md").read_text()))
    assert len(named) >= 20
    assert named - known == set()


def test_readme_script_runs_as_written(qtbot, monkeypatch):
    """The README's script, run as written; only ``actviz.explore`` returns at once instead of
    blocking, and the window it opened is checked and closed."""
    import torch

    from actviz.ui import explore as explore_module
    from actviz.ui.window.script import window_of

    (script,) = re.findall(r"```python\n(.*?)```", section(readme(), "From a script"), re.DOTALL)
    assert len(script.strip().splitlines()) <= 12
    opened = []
    real_explore = explore_module.explore

    def explore_and_return(*args, **kwargs):
        window = real_explore(*args, block=False, **kwargs)
        qtbot.addWidget(window_of(window))  # the façade's window
        opened.append(window)

    monkeypatch.setattr(explore_module, "explore", explore_and_return)
    namespace: dict = {}
    try:
        exec(compile(script, "README.md", "exec"), namespace)
        cap, edited = namespace["cap"], namespace["edited"]
        assert tuple(cap["layer4"].output.shape) == (1, 512, 7, 7)
        assert cap.input_grads.shape == (1, 3, 224, 224)
        assert not torch.equal(edited["layer1"].output, cap["layer1"].output)
        assert float(edited["layer1"].output[:, [0, 5]].abs().max()) == 0.0
        (window,) = opened
        assert window.wait_idle(120_000)
        shown = window.result.capture
        assert set(shown.names) == {"layer1", "layer4"}
        # The window ran the same model on the same input: the script's values.
        torch.testing.assert_close(shown["layer4"].output, cap["layer4"].output)
    finally:
        for window in opened:
            window.close()


def test_the_testing_page_examples_pass_as_a_user_runs_them(tmp_path):
    """docs/testing.md's tests, in a project of their own: no conftest, the fixture found
    through actviz's pytest11 entry point."""
    from importlib.metadata import entry_points

    if not any(ep.value == "actviz.testing.plugin" for ep in entry_points(group="pytest11")):
        pytest.skip("actviz's pytest11 entry point is not installed (pip install -e . again)")
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "testing.md").read_text(), re.DOTALL)
    # the first test, a per-feature driver's, a window of your own, the layout check's
    assert len(blocks) == 4
    (tmp_path / "test_example.py").write_text("\n\n".join(blocks))
    # This checkout's actviz (the entry point names the module; the path says which copy).
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "ACTVIZ_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\b5 passed\b", proc.stdout), proc.stdout[-2000:]


# -- docs/performance.md ----------------------------------------------------------------------


def test_performance_page_has_one_dated_table_and_the_bench_json():
    text = (DOCS / "performance.md").read_text()
    headers = re.findall(r"^\| figure[^\n]*\|\n\| ---", text, flags=re.MULTILINE)
    assert len(headers) == 1
    assert re.search(r"20\d\d-\d\d-\d\d", text)
    assert "2 cores" in text and "torch threads" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "---" not in ln]
    assert len(rows) >= 15
