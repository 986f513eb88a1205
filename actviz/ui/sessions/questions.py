"""The questions opening and saving a session may ask; the feature holds them as attributes,
so tests and scripts answer them."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

__all__ = [
    "Ask",
    "AskCaptures",
    "Locate",
    "ask_pin_captures",
    "ask_restore",
    "confirm_changed",
    "locate_checkpoint",
]

#: ``(parent, text) -> bool``: questions answered yes or no.
Ask = Callable[[QWidget, str], bool]
#: ``(parent, text) -> bool | None``: keep the pins' captures (True), leave them out (False)
#: or do not save (None).
AskCaptures = Callable[[QWidget, str], "bool | None"]
#: ``(parent, text) -> str | None``: where the checkpoint is now (None: not located).
Locate = Callable[[QWidget, str], "str | None"]


def _yes(parent: QWidget, text: str, title: str) -> bool:
    answer = QMessageBox.question(parent, title, text)
    return answer == QMessageBox.StandardButton.Yes


def ask_restore(parent: QWidget, text: str) -> bool:
    """Default question at start: restore the session kept on quit?"""
    return _yes(parent, text, "Restore the last session")


def confirm_changed(parent: QWidget, text: str) -> bool:
    """Default question: open a session whose checkpoint changed anyway?"""
    return _yes(parent, f"{text}\n\nOpen the session with this checkpoint anyway?", "Checkpoint")


def locate_checkpoint(parent: QWidget, text: str) -> str | None:
    """Default: say the checkpoint is gone and let the user pick where it is now."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Checkpoint not found")
    box.setText(f"{text}.\n\nLocate it to open the session.")
    locate = box.addButton("Locate…", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    if box.clickedButton() is not locate:
        return None
    path, _ = QFileDialog.getOpenFileName(parent, "Locate the checkpoint")
    return path or None


def ask_pin_captures(parent: QWidget, text: str) -> bool | None:
    """Default question before saving pins that hold captures: keep them, leave them out."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Save session")
    box.setText(text)
    keep = box.addButton("Keep the captures", QMessageBox.ButtonRole.AcceptRole)
    drop = box.addButton("Leave them out", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(keep)
    box.exec()
    clicked = box.clickedButton()
    return True if clicked is keep else False if clicked is drop else None
