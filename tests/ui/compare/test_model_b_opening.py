"""Model B opens through the window's own model opening: a file not trusted is asked about (a
refusal said in the Open model B dialog, a yes loads it again with trust), and weights without
an architecture ask for one there, the path kept."""

from __future__ import annotations

import torch
from PySide6.QtCore import Qt

from actviz.io.errors import ArchitectureNeededError, UntrustedFileError
from actviz.io.models.loading import open_model
from tests.ui.conftest import frame
from tests.ui.tiny_models import TinyCNN

TIMEOUT_MS = 30_000
LAYERS = ["conv1", "conv2", "fc"]


def test_model_b_asks_for_trust_and_an_architecture_in_its_dialog(
    qtbot, actviz_window, tiny_cnn, tmp_path
):
    win = actviz_window(tiny_cnn, None, LAYERS)
    window, feature = win.window, win.compare.feature
    win.compare.show_page()
    window.script.set_input(frame(1))
    win.run_and_wait(TIMEOUT_MS)
    weights = tmp_path / "b.pt"
    torch.save(TinyCNN().state_dict(), weights)
    calls, asked, answers = [], [], [False, True]

    def loader(source, *, arch=None, weights="DEFAULT", trust=False):
        calls.append((arch, trust))
        if arch is None:
            raise ArchitectureNeededError(f"{source}: which one?", source)
        if not trust:
            raise UntrustedFileError(source)
        return open_model(source, arch=arch)

    window.model_loader = loader
    window.confirm_untrusted = lambda parent, path, message: asked.append(path) or answers.pop(0)
    qtbot.mouseClick(win.compare.view.open_model_button, Qt.MouseButton.LeftButton)
    dialog = feature.model_dialog
    assert dialog.windowTitle() == "Open model B (to compare) — actviz"
    dialog.tabs.setCurrentIndex(1)
    dialog.file_edit.setText(str(weights))
    with qtbot.waitSignal(feature.compare_failed, timeout=TIMEOUT_MS):
        qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert dialog.isVisible() and dialog.file_edit.text() == str(weights)
    assert dialog.message().startswith("b.pt holds only weights, not the architecture")
    assert "Type the architecture it belongs to" in dialog.message()
    # Named, but the file is not trusted: asked, refused, said in the dialog.
    dialog.arch_combo.setEditText("tests.ui.tiny_models:TinyCNN")
    with qtbot.waitSignal(feature.compare_failed, timeout=TIMEOUT_MS) as failed:
        qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert failed.args[0] == f"Not opened: {weights} was not trusted."
    assert dialog.message() == failed.args[0] and asked == [str(weights)]
    assert feature.model_b is None and not feature.is_busy()
    # Asked again and trusted: loaded again with trust, compared; the window's model stays.
    dialog.arch_combo.setEditText("tests.ui.tiny_models:TinyCNN")
    with qtbot.waitSignal(feature.compare_finished, timeout=TIMEOUT_MS):
        qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert calls[-2:] == [
        ("tests.ui.tiny_models:TinyCNN", False),
        ("tests.ui.tiny_models:TinyCNN", True),
    ]
    assert feature.model_dialog is None and feature.model_b is not None
    assert window.session.model is tiny_cnn and window.files.model_request is None
