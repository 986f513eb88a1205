"""The Open model dialog's name lists: built off the GUI thread, searched best match first."""

from __future__ import annotations

import threading

import pytest

from actviz.ui.window import dialogs
from actviz.ui.window.dialogs import LOADING_TEXT, ModelSpec, OpenModelDialog


def _rows(widget) -> list[str]:
    return [widget.item(i).text() for i in range(widget.count())]


def test_the_first_dialog_shows_at_once_and_lists_names_off_the_gui_thread(qtbot, monkeypatch):
    monkeypatch.setattr(dialogs, "_MODEL_NAMES", None)  # as in a fresh process
    built_on: list[threading.Thread] = []
    release = threading.Event()
    real = dialogs.build_model_names

    def build():
        built_on.append(threading.current_thread())
        release.wait(30)  # the names take a while: the dialog must not wait for them
        return real()

    monkeypatch.setattr(dialogs, "build_model_names", build)
    try:
        dialog = OpenModelDialog()
        qtbot.addWidget(dialog)
        dialog.show()
        assert not dialog.names_ready()
        assert _rows(dialog.zoo.list) == ["demo", LOADING_TEXT]
        assert dialog.zoo.listed() == ["demo"]  # the loading row is no name
        if dialog.timm is not None:
            assert _rows(dialog.timm.list) == [LOADING_TEXT] and dialog.timm.listed() == []
        dialog.zoo.search.setText("ResNet18")  # typed while the names are listed
        assert dialog.spec() is None
        dialog.arch_combo.setEditText("net.py:Net")
    finally:
        release.set()
    qtbot.waitUntil(dialog.names_ready, timeout=60_000)
    assert len(built_on) == 1 and built_on[0] is not threading.main_thread()
    assert LOADING_TEXT not in _rows(dialog.zoo.list)
    # The search typed meanwhile applies, the exact name first and chosen.
    assert dialog.zoo.listed()[0] == "resnet18"
    assert dialog.spec() == ModelSpec("resnet18", None, "DEFAULT")
    assert dialog.arch_combo.findText("vit_b_16") > 0
    assert dialog.arch_combo.currentText() == "net.py:Net"  # what was typed is kept

    # The next dialog finds the names listed: filled at once, nothing built again.
    again = OpenModelDialog()
    qtbot.addWidget(again)
    assert again.names_ready() and len(built_on) == 1
    assert again.zoo.listed()[:2] == ["demo", "alexnet"]


def test_timm_search_lists_exact_and_prefix_matches_first(qtbot):
    timm = pytest.importorskip("timm")
    dialog = OpenModelDialog()
    qtbot.addWidget(dialog)
    qtbot.waitUntil(dialog.names_ready, timeout=60_000)
    dialog.tabs.setCurrentIndex(3)
    assert dialog.timm.listed() == sorted(timm.list_models())
    dialog.timm.search.setText("resnet18")
    assert dialog.timm.listed()[:2] == ["resnet18", "resnet18d"]
    assert "legacy_seresnet18" in dialog.timm.listed()[2:]
    assert dialog.spec() == ModelSpec("timm:resnet18", None, "DEFAULT")
    dialog.timm.search.setText("vit_tiny")
    names = dialog.timm.listed()
    assert names[0].startswith("vit_tiny")
    assert names.index("convit_tiny") > max(
        i for i, n in enumerate(names) if n.startswith("vit_tiny")
    )
