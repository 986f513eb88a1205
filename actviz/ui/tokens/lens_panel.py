"""The logit-lens table (passive): top tokens of every block at the chosen position (the last
by default), ``token (probability)`` per column."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from actviz.display.logit_lens import LogitLens
from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase

__all__ = ["LogitLensPanel"]


class LogitLensPanel(PanelBase):
    """Logit lens of one run (see the module docstring)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Logit lens", parent)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(style.caption_label("position"))
        self.position_combo = QtWidgets.QComboBox()
        row.addWidget(self.position_combo, 1)
        self.content.addLayout(row)
        self.table = QtWidgets.QTableWidget(0, 0)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.content.addWidget(self.table, 1)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        self.lens: LogitLens | None = None
        self.position_combo.currentIndexChanged.connect(self._show)
        self.clear()

    def set_lens(self, lens: LogitLens | None) -> None:
        """Show ``lens`` (None: the empty panel); the position chosen stays when it exists."""
        if lens is None:
            self.clear()
            return
        self.lens = lens
        keep = self.position_combo.currentIndex()
        tokens = lens.tokens if lens.tokens and len(lens.tokens) == lens.positions else None
        last = lens.positions - 1
        with QtCore.QSignalBlocker(self.position_combo):
            self.position_combo.clear()
            for p in range(lens.positions):
                self.position_combo.addItem(f"{p}  {tokens[p]!r}" if tokens else str(p))
            self.position_combo.setCurrentIndex(keep if 0 <= keep <= last else last)
        self._show()

    def position(self) -> int:
        return self.position_combo.currentIndex()

    def set_position(self, position: int) -> None:
        self.position_combo.setCurrentIndex(position % max(1, self.position_combo.count()))

    def cell_text(self, row: int, column: int) -> str:
        item = self.table.item(row, column)
        return item.text() if item is not None else ""

    def _show(self, *_args: object) -> None:
        lens = self.lens
        if lens is None or self.position() < 0:
            return
        rows = lens.rows(self.position())
        k = lens.ids.shape[2]
        self.table.clear()
        self.table.setRowCount(len(rows))
        self.table.setColumnCount(k)
        self.table.setHorizontalHeaderLabels([f"top {j + 1}" for j in range(k)])
        self.table.setVerticalHeaderLabels([layer for layer, _ in rows])
        for i, (_layer, top) in enumerate(rows):
            for j, (token_id, text, prob) in enumerate(top):
                item = QtWidgets.QTableWidgetItem(f"{text!r} {prob:.3f}")
                item.setToolTip(f"token id {token_id}, p = {prob:.6f}")
                item.setData(QtCore.Qt.ItemDataRole.UserRole, token_id)
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self.status_label.setText(
            f"each block's hidden state at position {self.position()} through the final norm "
            "and the unembedding"
        )

    def clear(self) -> None:
        self.lens = None
        with QtCore.QSignalBlocker(self.position_combo):
            self.position_combo.clear()
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.status_label.setText("The logit lens appears for decoder language models.")
