"""The status bar's note about how a model was opened belongs to that model only.

Opening a bare state_dict shows "architecture guessed: resnet18 (...)" in the status bar for
20 s; opening another model within that time left it there, under a window now showing the
other model.
"""

from __future__ import annotations

import torch
import torchvision

from tests.ui.conftest import LOAD_TIMEOUT_MS


def test_the_guess_note_goes_when_another_model_is_opened(qtbot, actviz_window, tmp_path):
    win = actviz_window(size=(1280, 720))
    window = win.window
    torch.manual_seed(0)
    path = tmp_path / "r18.pt"
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), path)
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source(str(path))
    note = "architecture guessed: resnet18 (all 122 tensors match)"
    assert window.statusBar().currentMessage() == note

    # A failed open keeps the model, so the note about it stays true.
    (tmp_path / "empty.pt").write_bytes(b"")
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source(str(tmp_path / "empty.pt"))
    assert window.statusBar().currentMessage() == note

    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source("demo")
    assert window.session.model_name.startswith("demo")
    assert "guessed" not in window.statusBar().currentMessage()


def test_another_apps_status_message_is_left_alone(qtbot, actviz_window):
    win = actviz_window(size=(1280, 720))
    window = win.window
    window.statusBar().showMessage("Saved session to study.actviz", 20_000)
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source("demo")
    assert window.statusBar().currentMessage() == "Saved session to study.actviz"
