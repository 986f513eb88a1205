"""The dialog of "Clamp…" in the tile menu: the lowest and the highest value kept."""

from __future__ import annotations

import math

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from actviz.ui.panels import style

__all__ = ["RangeDialog", "ask_range"]


def _number(text: str) -> float | None:
    """``text`` as a finite number; None for an empty field; ValueError otherwise."""
    text = text.strip()
    if not text:
        return None
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


class RangeDialog(QDialog):
    """Ask for ``[min, max]`` (an empty field is no bound; one at least); what is wrong is said
    in the dialog, which stays open."""

    def __init__(self, parent: QWidget | None, prompt: str) -> None:
        super().__init__(parent)
        self.setWindowTitle("Clamp channels")
        self.setMinimumWidth(380)  # the prompt names the layer: on one or two lines, not four
        form = QFormLayout(self)
        intro = QLabel(prompt)
        intro.setWordWrap(True)
        form.addRow(intro)
        self.min_edit = QLineEdit("0")
        self.max_edit = QLineEdit()
        for edit in (self.min_edit, self.max_edit):
            edit.setPlaceholderText("no bound")
        form.addRow("Lowest", self.min_edit)
        form.addRow("Highest", self.max_edit)
        self.message_label = QLabel()
        self.message_label.setWordWrap(True)
        self.message_label.setStyleSheet(f"color: {style.ERROR_TEXT};")
        form.addRow(self.message_label)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._on_ok)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self._values: tuple[float | None, float | None] | None = None

    def values(self) -> tuple[float | None, float | None] | str:
        """``(min, max)`` as typed, or why they cannot be used (a sentence)."""
        bounds = []
        for what, edit in (("Lowest", self.min_edit), ("Highest", self.max_edit)):
            try:
                bounds.append(_number(edit.text()))
            except ValueError:
                return f"{what}: {edit.text().strip()!r} is not a number."
        low, high = bounds
        if low is None and high is None:
            return "Give a lowest or a highest value (or both)."
        if low is not None and high is not None and low > high:
            return f"The lowest value ({low:g}) is above the highest ({high:g})."
        return low, high

    def chosen(self) -> tuple[float | None, float | None] | None:
        """The accepted range (None until OK was pressed with a valid one)."""
        return self._values

    def _on_ok(self) -> None:
        values = self.values()
        if isinstance(values, str):
            self.message_label.setText(values)
            return
        self._values = values
        self.accept()


def ask_range(parent: QWidget, prompt: str) -> tuple[float | None, float | None] | None:
    """Ask for a clamp range (modal); None when cancelled."""
    dialog = RangeDialog(parent, prompt)
    try:
        return dialog.chosen() if dialog.exec() == QDialog.DialogCode.Accepted else None
    finally:
        dialog.deleteLater()
