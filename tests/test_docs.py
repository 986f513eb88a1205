"""Every python block of README.md and docs/*.md runs as written.

A page's blocks run in order, each in a fresh namespace, in a scratch working folder (files a
block writes land there). A block preceded by ``<!-- continues -->`` runs in the namespace of
the block before it on the same page (its setup is shown once). A block preceded by
``<!-- no-run: reason -->`` is not run; the reason says why, and such marks stay rare.
``actviz.explore`` returns its window at once instead of blocking; the test waits for it and
closes it. Shell (``bash``) blocks are not run here (tests/test_readme.py parses their command
lines).
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Blocks another test runs as written, with what it checks of them.
RUN_ELSEWHERE = {
    "README.md": "tests/test_readme.py::test_readme_script_runs_as_written",
    "testing.md": "tests/test_readme.py::test_the_testing_page_examples_pass_as_a_user_runs_them",
    # The guide's blocks are the files of a plugin package (``<!-- file: ... -->``): that
    # test writes them into a folder, installs the package and runs its tests.
    "plugins.md": "tests/plugins/test_docs.py",
}
#: At most this many blocks may say they cannot run.
MAX_NO_RUN = 3

_BLOCK = re.compile(
    r"(?:<!--\s*(?P<mark>[^>]*?)\s*-->[ \t]*\n(?:[ \t]*\n)?)?```(?P<lang>[\w+-]*)\n(?P<code>.*?)```",
    re.DOTALL,
)


@dataclass(frozen=True)
class Script:
    page: str
    first_line: int
    code: str
    no_run: str | None


def scripts(page: pathlib.Path) -> list[Script]:
    """The page's python blocks, each joined with the blocks that continue it."""
    text = page.read_text()
    out: list[Script] = []
    for m in _BLOCK.finditer(text):
        if m["lang"] not in ("python", "py"):
            continue
        mark = (m["mark"] or "").strip()
        line = text.count("\n", 0, m.start("code")) + 1
        if mark == "continues":
            assert out, f"{page.name}:{line}: the first python block cannot continue another"
            prev = out[-1]
            code = prev.code + "\n" * (line - prev.first_line - prev.code.count("\n")) + m["code"]
            out[-1] = Script(prev.page, prev.first_line, code, prev.no_run)
            continue
        no_run = None
        if mark.startswith("no-run"):
            no_run = mark.partition(":")[2].strip()
            assert no_run, f"{page.name}:{line}: a no-run mark says why"
        out.append(Script(page.name, line, m["code"], no_run))
    return out


ALL = [s for page in PAGES for s in scripts(page)]


def test_the_blocks_are_found_and_no_run_marks_are_rare():
    assert len(ALL) >= 12
    pages = {s.page for s in ALL}
    assert {"scripting.md", "whatif.md", "effects.md", "visualize.md"} <= pages
    no_run = [s for s in ALL if s.no_run]
    assert len(no_run) <= MAX_NO_RUN, [f"{s.page}:{s.first_line}" for s in no_run]


@pytest.mark.parametrize(
    "script",
    [s for s in ALL if s.page not in RUN_ELSEWHERE],
    ids=lambda s: f"{s.page}:{s.first_line}",
)
def test_the_block_runs_as_written(script, qtbot, monkeypatch, tmp_path):
    if script.no_run:
        pytest.skip(f"marked no-run: {script.no_run}")
    # A block that opens a timm or Hugging Face model runs where that extra is installed (CI).
    for extra in ("timm", "transformers"):
        if extra in script.code and importlib.util.find_spec(extra) is None:
            pytest.skip(f"needs the optional {extra} (actviz's extras)")
    from actviz.ui import explore as explore_module
    from actviz.ui.window.script import window_of

    opened = []
    real_explore = explore_module.explore

    def explore_and_return(*args, **kwargs):
        kwargs["block"] = False
        window = real_explore(*args, **kwargs)
        qtbot.addWidget(window_of(window))  # the façade's window
        opened.append(window)
        return window

    monkeypatch.setattr(explore_module, "explore", explore_and_return)
    monkeypatch.chdir(tmp_path)
    # Line numbers of tracebacks are the page's own.
    code = "\n" * (script.first_line - 1) + script.code
    try:
        exec(compile(code, str(ROOT / "docs" / script.page), "exec"), {"__name__": "__doc__"})
        for window in opened:
            assert window.wait_idle(120_000)
    finally:
        for window in opened:
            window.close()
