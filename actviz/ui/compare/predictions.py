"""PredictionsCompared: both runs' predictions side by side, with their change."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase

#: Columns of the table (changes are A minus B: the latest run against the reference).
COLUMNS = ("class", "A", "B", "Δp A−B", "Δlogit")
#: Colours of a probability that went up / down.
UP_COLOUR = "#1e7b34"
DOWN_COLOUR = "#b3261e"

#: One row: (class index, class name, p_a, p_b, dp, logit_a, logit_b, dlogit).
Row = tuple[int, str, float, float, float, float, float, float]


def _percent(p: float) -> str:
    return "nan" if math.isnan(p) else f"{100.0 * p:.1f} %"


def _signed(value: float, *, percent: bool = False) -> str:
    if math.isnan(value):
        return "nan"
    if percent:
        return f"{100.0 * value:+.1f} pt"
    return f"{value:+.3g}"


class PredictionsCompared(PanelBase):
    """The classes of both runs' top-k (and the target), with A's and B's probability and
    the change (A minus B) in probability and logit. Each run's top class is in bold."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Predictions: A vs B", parent)
        self.note_label = style.caption_label()
        self.note_label.setWordWrap(True)
        self.content.addWidget(self.note_label)
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.NoSelection)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        self.content.addWidget(self.table, 1)
        self._rows: list[Row] = []
        self.setMinimumWidth(260)
        self.clear()

    def set_change(self, change: Any) -> None:
        """Show a :class:`~actviz.display.difference.PredictionChange`: its rows, then the
        target's row when it is not among them."""
        rows = [tuple(r) for r in change.rows]
        target = change.target
        if target is not None and all(r[0] != target.index for r in rows):
            rows.append(tuple(target))
        self.set_rows(
            rows,  # type: ignore[arg-type]
            target=target.index if target is not None else None,
            top_a=change.top_a,
            top_b=change.top_b,
        )

    def set_rows(
        self,
        rows: Sequence[Row],
        *,
        target: int | None = None,
        top_a: int | None = None,
        top_b: int | None = None,
        note: str = "",
    ) -> None:
        """Show ``rows`` in the given order; the ``target`` class's row is marked, each run's
        top class (``top_a``, ``top_b``) in bold."""
        self._rows = [
            (int(r[0]), str(r[1]), *(float(v) for v in r[2:8]))  # type: ignore[misc]
            for r in rows
        ]
        table = self.table
        table.setRowCount(len(self._rows))
        for i, (index, name, p_a, p_b, dp, _la, _lb, dlogit) in enumerate(self._rows):
            label = name if name in ("", f"class {index}") else f"{index}: {name}"
            label = label or f"class {index}"
            if target is not None and index == target:
                label += "  (target)"
            cells = [
                label,
                _percent(p_a),
                _percent(p_b),
                _signed(dp, percent=True),
                _signed(dlogit),
            ]
            for column, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                if column:
                    item.setTextAlignment(
                        QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter
                    )
                if column == 0:
                    item.setToolTip(f"class {index}: {name}")
                if (column == 1 and index == top_a) or (column == 2 and index == top_b):
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                if column == 3 and not math.isnan(dp) and abs(dp) >= 5e-4:
                    item.setForeground(QtGui.QColor(UP_COLOUR if dp > 0 else DOWN_COLOUR))
                table.setItem(i, column, item)
        self.note_label.setText(note)
        self.note_label.setVisible(bool(note))

    def rows(self) -> list[Row]:
        """The rows shown."""
        return list(self._rows)

    def cell_text(self, row: int, column: int) -> str:
        """What the user reads in a cell."""
        item = self.table.item(row, column)
        return item.text() if item is not None else ""

    def set_message(self, text: str) -> None:
        """Show ``text`` instead of rows (outputs that are not class scores)."""
        self.set_rows([], note=text)

    def clear(self) -> None:
        """Show nothing."""
        self.set_rows([], note="no comparison yet")
