"""A failed open names the file once: "Could not open model 'corrupt.pt': damaged or truncated
zip archive ...", not "Could not open model 'corrupt.pt': corrupt.pt: damaged ..." (with a long
path, the path twice filled the banner)."""

from __future__ import annotations

import torch

from tests.ui.conftest import LOAD_TIMEOUT_MS, frame


def _conv_window(actviz_window):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten())
    return actviz_window(model, frame(0), layers=["0"])


def test_a_model_error_names_the_file_once(qtbot, actviz_window, tmp_path):
    win = _conv_window(actviz_window)
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    with qtbot.waitSignal(win.window.model_load_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        win.window.files.open_model_source(str(path))
    assert failed.args[0] == f"Could not open model {str(path)!r}: file is empty"
    assert failed.args[0] in win.banner_messages()
    # The status bar's one line is not cut mid-sentence: the banner holds the reason.
    assert win.status_text() == "Could not open empty.pt: see the message above"


def test_an_input_error_names_the_file_once(qtbot, actviz_window, tmp_path):
    win = _conv_window(actviz_window)
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with qtbot.waitSignal(win.window.input_load_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        win.window.files.open_input_source(str(path))
    assert failed.args[0].startswith(f"Could not open input {str(path)!r}: not a readable image")
    assert failed.args[0].count("notes.txt") == 1
    assert win.status_text() == "Could not open notes.txt: see the message above"
