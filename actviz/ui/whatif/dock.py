"""The passive Edits dock (each edit's box, value and remove button), and the Clamp… dialog."""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6 import QtWidgets
from PySide6.QtCore import QMargins, QSize, Qt, Signal

from actviz.ui.panels import style
from actviz.workspace.edits_board import EditEntry, edit_value

#: Preferred width of the dock (it shares the right side with Live).
PREFERRED_WIDTH = 250


class EditRow(QtWidgets.QWidget):
    """One edit: ``[x] layer · ablate ch 3   [value]  [remove]``."""

    def __init__(self, entry: EditEntry, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = entry.key
        self.signature = self.signature_of(entry)
        layout = QtWidgets.QHBoxLayout(self, spacing=4, contentsMargins=QMargins(0, 1, 0, 1))
        self.enabled_box = QtWidgets.QCheckBox(checked=entry.edit.enabled)
        self.enabled_box.setToolTip("Apply this edit (unticked: listed, not applied)")
        layout.addWidget(self.enabled_box)
        # The layer name gives way (in the middle) before the edit itself does.
        self.label = style.ElidedLabel(keep_after=": ")
        # Asks for its whole text (the dock's width follows), shortened only below it.
        preferred = QtWidgets.QSizePolicy.Policy.Preferred
        self.label.setSizePolicy(preferred, preferred)
        self.label.setText(entry.describe())
        self.label.setToolTip(entry.describe())
        layout.addWidget(self.label, 1)
        self.value_box: QtWidgets.QDoubleSpinBox | None = None
        value = edit_value(entry.edit)
        if value is not None:
            self.value_box = box = QtWidgets.QDoubleSpinBox(
                decimals=3, minimum=-1e6, maximum=1e6, singleStep=0.1, value=value, maximumWidth=80
            )
            box.setKeyboardTracking(False)  # one change per finished value, not per keystroke
            box.setToolTip("Factor the channels are multiplied by")
            layout.addWidget(box)
        self.remove_button = QtWidgets.QToolButton(
            text="✕", autoRaise=True, toolTip="Remove this edit"
        )
        layout.addWidget(self.remove_button)

    @staticmethod
    def signature_of(entry: EditEntry) -> tuple:
        """What the row shows of ``entry``: a row is reused while this stays the same."""
        return entry.describe(), entry.edit.enabled, edit_value(entry.edit)


class _RowsArea(QtWidgets.QScrollArea):
    """A scroll area as wide as its rows ask now (Qt keeps the hint its widget had when set)."""

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt name
        hint = super().sizeHint()
        bar = self.verticalScrollBar().sizeHint().width()
        rows = self.widget().sizeHint().width() + bar + 2 * self.frameWidth()
        return QSize(max(hint.width(), rows), hint.height())


class EditsDock(QtWidgets.QDockWidget):
    """The "Edits" dock: ``enabled_changed(key, on)``, ``value_changed(key, value)``,
    ``remove_requested(key)``, ``clear_requested``."""

    enabled_changed = Signal(int, bool)
    value_changed = Signal(int, float)
    remove_requested = Signal(int)
    clear_requested = Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Edits", parent, objectName="editsDock")  # restoreState finds it by name
        body = QtWidgets.QWidget()
        outer = QtWidgets.QVBoxLayout(body, spacing=4, contentsMargins=QMargins(6, 4, 6, 4))
        self.hint = style.caption_label(
            "Right-click a tile of a layer to ablate, scale, keep only or patch its channel "
            "(Ctrl/Shift+click picks several).",
            wrap=True,
        )
        outer.addWidget(self.hint)
        self.rows_box = QtWidgets.QWidget()
        self.rows_layout = style.bare_box(self.rows_box, spacing=0, vertical=True)
        self.rows_area = style.scroll_area(self.rows_box, cls=_RowsArea)
        self.rows_area.setMinimumHeight(60)
        outer.addWidget(self.rows_area, 1)
        #: Before -> after of the top class (or why there is none).
        self.summary = QtWidgets.QLabel(wordWrap=True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.summary)
        #: The last run's error with these edits (bad channel, shape mismatch...).
        self.error_label = QtWidgets.QLabel(
            wordWrap=True, styleSheet=f"color: {style.BAR_BAD};", visible=False
        )
        outer.addWidget(self.error_label)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        self.clear_button = QtWidgets.QPushButton("Clear all")
        self.clear_button.setToolTip("Remove every edit and show the unedited run")
        self.clear_button.clicked.connect(self.clear_requested)
        buttons.addWidget(self.clear_button)
        outer.addLayout(buttons)
        self.setWidget(body)
        self.rows: list[EditRow] = []
        self.set_entries(())

    def set_entries(self, entries: Sequence[EditEntry]) -> None:
        """Show exactly ``entries``; a row whose edit reads the same is kept (boards grow long)."""
        kept = {row.key: row for row in self.rows}
        while self.rows_layout.count():  # the rows and the stretch after them
            self.rows_layout.takeAt(0)
        self.rows = []
        for entry in entries:
            row = kept.pop(entry.key, None)
            if row is None or row.signature != EditRow.signature_of(entry):
                if row is not None:
                    kept[entry.key] = row  # replaced: dropped below
                row = self._new_row(entry)
            self.rows_layout.addWidget(row)
            self.rows.append(row)
        for old in kept.values():
            old.setParent(None)
            old.deleteLater()
        self.rows_layout.addStretch(1)
        self.rows_area.updateGeometry()  # the dock's hint follows its rows
        self.clear_button.setEnabled(bool(self.rows))
        self.hint.setVisible(not self.rows)
        if not self.rows:
            self.set_summary("")
            self.set_error("")

    def _new_row(self, entry: EditEntry) -> EditRow:
        row = EditRow(entry)
        key = entry.key
        row.enabled_box.toggled.connect(lambda on, k=key: self.enabled_changed.emit(k, on))
        if row.value_box is not None:
            row.value_box.valueChanged.connect(
                lambda value, k=key: self.value_changed.emit(k, float(value))
            )
        row.remove_button.clicked.connect(lambda _=False, k=key: self.remove_requested.emit(k))
        return row

    def row(self, key: int) -> EditRow:
        """The row of edit ``key``."""
        return next(r for r in self.rows if r.key == key)

    def set_summary(self, text: str) -> None:
        _set_note(self.summary, text)

    def set_error(self, text: str) -> None:
        _set_note(self.error_label, text)


def _set_note(label: QtWidgets.QLabel, text: str) -> None:
    """A label shown only when it says something (untouched when unchanged)."""
    if label.text() != text:
        label.setText(text)
    if label.isHidden() == bool(text):
        label.setVisible(bool(text))


class RangeDialog(QtWidgets.QDialog):
    """Ask for ``[min, max]`` (an empty field: no bound; one at least)."""

    def __init__(self, parent: QtWidgets.QWidget | None, prompt: str) -> None:
        super().__init__(parent)
        self.setWindowTitle("Clamp channels")
        self.setMinimumWidth(380)  # the prompt names the layer: on one or two lines, not four
        form = QtWidgets.QFormLayout(self)
        form.addRow(QtWidgets.QLabel(prompt, wordWrap=True))
        self.min_edit = QtWidgets.QLineEdit("0")
        self.max_edit = QtWidgets.QLineEdit()
        for edit in (self.min_edit, self.max_edit):
            edit.setPlaceholderText("no bound")
        form.addRow("Lowest", self.min_edit)
        form.addRow("Highest", self.max_edit)
        self.message_label = QtWidgets.QLabel(
            wordWrap=True, styleSheet=f"color: {style.ERROR_TEXT};"
        )
        form.addRow(self.message_label)
        buttons = QtWidgets.QDialogButtonBox(
            QtWidgets.QDialogButtonBox.StandardButton.Ok
            | QtWidgets.QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._on_ok)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.ok_button = buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok)
        self._values: tuple[float | None, float | None] | None = None

    def values(self) -> tuple[float | None, float | None] | str:
        """``(min, max)`` as typed, or why they cannot be used (a sentence)."""
        bounds = []
        for what, edit in (("Lowest", self.min_edit), ("Highest", self.max_edit)):
            text = edit.text().strip()
            try:
                value = float(text) if text else None
            except ValueError:
                value = math.nan
            if value is not None and not math.isfinite(value):  # (inf, nan: no bound to use)
                return f"{what}: {text!r} is not a number."
            bounds.append(value)
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


def ask_range(parent: QtWidgets.QWidget, prompt: str) -> tuple[float | None, float | None] | None:
    """Ask for a clamp range (modal); None when cancelled."""
    dialog = RangeDialog(parent, prompt)
    try:
        return dialog.chosen() if dialog.exec() == QtWidgets.QDialog.DialogCode.Accepted else None
    finally:
        dialog.deleteLater()
