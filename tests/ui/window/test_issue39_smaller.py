"""Issue 39, the smaller defects: what one part changed and another did not follow."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import tiny_window


def test_a_long_status_message_stops_before_the_run_time(actviz_window):
    win = tiny_window(actviz_window, size=(1024, 640))
    window = win.window
    timing = window.status.timing_label
    assert timing.text().startswith("ran in")
    long = "Opened " + "/very/long/folder/name" * 12 + "/model.pt and its 1000 class names"
    window.host.show_status(long)
    win.settle()
    label = window.status.status_label
    assert label.text() == long  # the whole message, for tests and the tooltip
    assert label.geometry().right() < timing.geometry().left()
    # The run time itself is whole, inside the window (laid out at its grown width).
    assert timing.geometry().right() <= window.statusBar().contentsRect().right()
    assert label.shown_text().endswith("…") and label.shown_text() != long
    assert label.minimumSizeHint().width() < window.width() // 4
    assert window.width() == 1024  # the message did not widen the window


def test_a_model_dialog_error_stays_with_its_tab(qtbot):
    from PySide6.QtCore import Qt

    from actviz.ui.window.dialogs import OpenModelDialog

    dialog = OpenModelDialog(names=["resnet18"], keep_open=True)
    qtbot.addWidget(dialog)
    dialog.show()
    bar = dialog.tabs.tabBar()

    def click_tab(i: int) -> None:
        qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(i).center())

    click_tab(1)  # File, nothing chosen: Open says so
    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert dialog.message() == "Choose a file first."
    click_tab(0)
    assert dialog.tabs.currentIndex() == 0 and dialog.message() == ""
    click_tab(1)  # back on its tab, the error shows again
    assert dialog.message() == "Choose a file first."
    dialog.close()


def test_file_dialogs_start_at_home_then_where_the_user_was(actviz_window, monkeypatch, tmp_path):
    from pathlib import Path

    from PySide6.QtWidgets import QFileDialog

    import actviz.ui.file_dialogs as dialogs

    monkeypatch.setattr(dialogs, "_last", None)
    monkeypatch.chdir(tmp_path)  # the working folder is not where a dialog starts
    picture = tmp_path / "pictures" / "in.pt"
    picture.parent.mkdir()
    torch.save(torch.randn(1, 3, 16, 16), picture)
    asked: list[tuple[str, str]] = []

    def open_name(_parent, title, folder, *_a, **_k):
        asked.append((title, folder))
        return (str(picture), "") if title == "Open input" else ("", "")

    def save_name(_parent, title, start, *_a, **_k):
        asked.append((title, start))
        return ("", "")

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(open_name))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_name))
    win = tiny_window(actviz_window, size=(1024, 640))
    window = win.window
    with win.qtbot.waitSignal(window.input_loaded, timeout=30_000):
        window.commands.open_input_action.trigger()  # File > Open input...
    assert asked[0] == ("Open input", str(Path.home()))
    # The next dialog starts where that file was.
    window.commands.export_png_action.trigger()  # File > Export > panel as PNG
    title, start = asked[-1]
    assert Path(start).parent == picture.parent, asked


def test_the_report_has_the_saliency_and_carries_the_input(actviz_window, tmp_path, monkeypatch):
    import base64
    import io
    import re

    from PySide6.QtWidgets import QFileDialog

    win = tiny_window(actviz_window, size=(1280, 720))
    window = win.window
    # The Overview was never shown: the run skipped the input gradient.
    assert window.session.result.capture.input_grads is None
    out = tmp_path / "r.html"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), ""))
    )
    reports = win.sessions.feature
    with win.qtbot.waitSignal(reports.report_written, timeout=60_000):
        reports.report_action.trigger()  # File > Export report...
    text = out.read_text()
    assert 'data-panel="saliency"' in text
    assert "reproduce_inputs.pt" in text
    m = re.search(
        r'<a download="reproduce_inputs.pt" href="data:application/octet-stream;base64,([^"]+)"',
        text,
    )
    assert m is not None
    carried = torch.load(io.BytesIO(base64.b64decode(m.group(1))), weights_only=True)
    assert torch.equal(carried, window.session.input.value)


def test_the_scale_legend_never_splits_a_hyphenated_word(actviz_window):
    from PySide6.QtGui import QTextLayout

    win = tiny_window(actviz_window, size=(1024, 640))
    for name in ("conv1", "conv2"):
        legend = win.reveal(name).activation_slot.legend
        text = legend.text()
        assert "min" in text or "max" in text
        # Laid out at narrow widths, as the label wraps it: no line ends in "-".
        for width in range(60, 400, 7):
            layout = QTextLayout(text, legend.font())
            layout.beginLayout()
            lines = []
            while True:
                line = layout.createLine()
                if not line.isValid():
                    break
                line.setLineWidth(width)
                lines.append(text[line.textStart() : line.textStart() + line.textLength()])
            layout.endLayout()
            assert not any(
                line.rstrip().endswith("-") and line.strip() != "-" for line in lines[:-1]
            ), (
                width,
                lines,
            )
