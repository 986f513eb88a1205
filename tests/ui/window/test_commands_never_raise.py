"""Every command of the window says when it fails and never raises into Qt: two pins made in
the same second get their own labels and the session saves; then every menu action, toolbar
action and dock button is triggered with a failing backend (file dialogs answer with places
that cannot be written or read, message boxes and dialogs answer at once) and nothing reaches
``sys.excepthook``."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import (
    QDialog,
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QMessageBox,
    QPushButton,
    QToolBar,
)

#: Commands the walk leaves alone: they end the test's window.
SKIPPED = ("Quit",)


def test_two_pins_in_one_second_save(actviz_window, tmp_path, monkeypatch):
    from tests.ui.conftest import small_conv_window

    win = small_conv_window(actviz_window)
    import actviz.ui.window.runs as pin_actions

    monkeypatch.setattr(pin_actions.time, "strftime", lambda *_a: "12:00:00")  # one second
    window = win.window
    first = window.pins_ui.pin_result()
    win.run_and_wait()
    second = window.pins_ui.pin_result()
    assert first is not None and second is not None and first is not second
    assert second.label == first.label + " (2)"
    sessions = win.sessions.feature
    sessions.ask_pin_captures = lambda *_: True  # the user keeps the pins' captures
    path = tmp_path / "two.actviz"
    assert sessions.save_session(path, wait=True) and path.is_file()


def _leaves(menu, prefix=""):
    for action in menu.actions():
        if action.isSeparator():
            continue
        if action.menu() is not None:
            yield from _leaves(action.menu(), f"{prefix}{menu.title()} > ")
        else:
            yield f"{prefix}{menu.title()} > {action.text()}", action


def _wait_or_cancel(win) -> None:
    """Wait for what the command started; a long job (a synthesis) is cancelled with Esc, as
    a user who does not wait for it would."""
    if not win.wait_idle(5_000):
        win.window.cancel()
        assert win.wait_idle(30_000), "the window stayed busy after Esc"


@pytest.mark.slow
def test_every_command_with_a_failing_backend(actviz_window, demo_resources, tmp_path, monkeypatch):
    win = actviz_window(size=(1280, 720))
    window = win.window
    assert window.files.load_demo()
    win.wait_idle()
    win.run_and_wait()
    unwritable = "/proc/actviz-nowhere/out"  # neither a file nor a folder can be made there
    missing = str(tmp_path / "gone" / "missing.png")
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (unwritable, ""))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (missing, ""))
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([missing], ""))
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: unwritable)
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("a b c", True))
    monkeypatch.setattr(QDialog, "exec", lambda self: QDialog.DialogCode.Rejected)
    for name in ("question", "warning", "information", "critical"):
        monkeypatch.setattr(QMessageBox, name, lambda *a, **k: QMessageBox.StandardButton.No)
    monkeypatch.setattr(QMessageBox, "exec", lambda self: QMessageBox.StandardButton.No)
    win.sessions.feature.ask_pin_captures = lambda *_: None  # the user cancels
    commands = [(path, a) for m in window.menuBar().actions() for path, a in _leaves(m.menu())]
    for bar in window.findChildren(QToolBar):
        commands += [(f"toolbar > {a.text()}", a) for a in bar.actions() if a.text()]
    done = []
    with win.qtbot.captureExceptions() as raised:
        for path, action in commands:
            if any(path.endswith(s) for s in SKIPPED) or not action.isEnabled():
                continue
            action.trigger()
            _wait_or_cancel(win)
            done.append(path)
            assert not raised, f"{path} raised: {raised[0][1]!r}"
        for dock in window.findChildren(QDockWidget):
            for button in dock.findChildren(QPushButton):
                if button.isEnabled() and button.isVisibleTo(dock):
                    button.click()
                    _wait_or_cancel(win)
                    done.append(f"{dock.windowTitle()} > {button.text()}")
                    assert not raised, f"{done[-1]} raised: {raised[0][1]!r}"
    assert len(done) > 30
    assert not window.is_closed()
