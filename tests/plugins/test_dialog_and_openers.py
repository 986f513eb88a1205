"""Help > Plugins (every plugin, its version, contributions, status, a traceback under
Details, a tick kept in settings); model openers behind the trust question."""

from __future__ import annotations

import textwrap

import torch
from PySide6.QtCore import QSettings

from actviz.plugins import ModelOpener, Plugin
from tests.plugins.nets import TinyConvNet


def test_help_plugins_lists_them_and_a_tick_is_kept(
    actviz_window, install_plugin, installed_examples, tmp_path
):
    src = tmp_path / "src"
    src.mkdir()
    (src / "broken_dialog.py").write_text("raise ImportError('no such thing')\n")
    install_plugin("broken-dialog", {"broken": "broken_dialog:plugin"}, src)
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    win = actviz_window(plugins="installed", settings=settings)
    menu = win.window.host.menu("Help")
    action = next(a for a in menu.actions() if a.text() == "Plugins…")
    action.trigger()
    dialog = win.window.plugins.dialog
    assert dialog is not None and dialog.isVisible()
    rows = dialog.row_texts()
    assert "No plugin is installed" not in dialog.note.text()
    assert rows[1] == (
        "on", "correlation", "0.1.0", "layer view: Channel correlation", "loaded",
    )  # fmt: skip
    assert rows[2] == ("on", "wav", "0.1.0", "input opener: wav (.wav)", "loaded")
    assert rows[0][:3] == ("on", "broken", "") and rows[0][4].startswith(
        "Plugin broken failed (import)"
    )
    dialog.table.setCurrentCell(0, 1)
    assert "ImportError: no such thing" in dialog.details.toPlainText()
    # Unticked: off now (its views go) and at the next start (not even imported).
    win.window.plugins.open_view("conv1", "correlation")  # no result yet: nothing to open
    dialog.set_ticked(1, False)
    assert win.window.plugins.registry.records[1].status == "disabled"
    assert dialog.row_texts()[1][0] == "off"
    settings.sync()
    win.close()
    again = actviz_window(plugins="installed", settings=settings)
    records = {r.name: r for r in again.window.plugins.registry.records}
    assert records["correlation"].status == "disabled" and records["correlation"].plugin is None
    assert records["wav"].status == "active"
    assert again.window.plugins.registry.layer_views() == []


def test_help_plugins_says_when_none_is_installed(actviz_window):
    win = actviz_window(plugins=[])  # none (another test may install some in this process)
    menu = win.window.host.menu("Help")
    next(a for a in menu.actions() if a.text() == "Plugins…").trigger()
    dialog = win.window.plugins.dialog
    assert dialog.row_texts() == []
    assert (
        "No plugin is installed" in dialog.note.text() and "docs/plugins.md" in dialog.note.text()
    )


def test_a_model_opener_that_unpickles_asks_first(actviz_window, tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "net.lab"
    torch.save(TinyConvNet(), path)  # a whole pickled module: opening it runs code
    calls: list[bool] = []

    def open_lab(source: str, trust: bool):
        calls.append(trust)
        return torch.load(source, weights_only=False)

    opener = ModelOpener("lab", ("*.lab",), open_lab, needs_trust=True)
    answers = [False, True]
    asked: list[str] = []

    def confirm(parent, path_, message):
        asked.append(message)
        return answers.pop(0)

    win = actviz_window(plugins=[Plugin("lab", contributions=[opener])], confirm_untrusted=confirm)
    assert not win.window.files.open_model_source(str(path), wait=True)
    assert calls == [] and "net.lab" in asked[0]  # refused: never unpickled
    assert win.window.files.open_model_source(str(path), wait=True)
    assert calls == [True]
    assert type(win.window.session.model).__name__ == "TinyConvNet"
    assert win.window.session.model_name == "net.lab (lab)"


PUBLIC = {"actviz", "actviz.plugins", "actviz.testing"}
OTHERS = {"actviz_correlation", "actviz_wav", "numpy", "torch", "PySide6", "pytest", "PIL"}


def not_allowed(path) -> list[str]:
    """The modules ``path`` imports that a plugin may not: private actviz modules and
    packages that are neither the standard library nor the examples' dependencies."""
    import ast
    import sys

    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "actviz":
                ok = name in PUBLIC
            else:
                ok = top in OTHERS or top in sys.stdlib_module_names
            if not ok:
                bad.append(name)
    return bad


def test_examples_import_only_the_public_api():
    from tests.plugins.conftest import EXAMPLES

    # Only the sources: a pip build leaves copies under build/ that say nothing new.
    files = sorted(
        p for p in EXAMPLES.rglob("*.py") if "build" not in p.relative_to(EXAMPLES).parts
    )
    assert len(files) == 7  # both packages, their widget, tests and conftests
    for path in files:
        assert not_allowed(path) == [], path.relative_to(EXAMPLES)


def test_the_import_check_sees_a_private_import(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(
        textwrap.dedent(
            """
            import json, numpy
            from actviz.plugins import LayerView
            from actviz.ui.host import FeatureBase
            import actviz.io.export.capture_export
            def f():
                import requests
            """
        )
    )
    assert not_allowed(path) == ["actviz.ui.host", "actviz.io.export.capture_export", "requests"]
