"""Before and after the edits, side by side: the prediction panel's comparison table.

Rows are ``(index, name, p_before, p_after, dp, logit_before, logit_after, dlogit)`` as
:func:`actviz.display.difference.prediction_change` makes them; the target's row comes last,
in bold. A passive widget: the controller pushes rows in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from actviz.ui.panels import style

__all__ = ["COLUMNS", "ChangeRow", "PredictionChangeView", "format_change"]

ChangeRow = tuple[int, str, float, float, float, float, float, float]

#: The number columns; each class has its name on a line of its own above its numbers, so a
#: narrow Overview keeps both readable.
COLUMNS = ("before", "after", "Δp", "Δlogit")
_TIPS = (
    "probability without the edits",
    "probability with the edits",
    "change of the probability, in percentage points",
    "change of the logit (the raw output)",
)
_UP, _DOWN = QColor("#1e7b34"), QColor(style.BAR_BAD)


def _percent(p: float) -> str:
    return "nan" if math.isnan(p) else f"{100.0 * p:.1f}%"


def format_change(value: float, *, percent: bool) -> str:
    """``+12.3`` (percentage points) / ``-0.042``: a signed change, compact for the table."""
    if math.isnan(value):
        return "nan"
    if percent:
        return f"{100.0 * value:+.1f}"
    return f"{value:+.3g}"


class PredictionChangeView(QWidget):
    """A compact table: per class, its name, then its probability before and after the
    edits and the changes of probability and logit."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setSpacing(2)
        self.caption = style.caption_label("Before → after the edits (Δp in points)")
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        for col, tip in enumerate(_TIPS):
            self.table.horizontalHeaderItem(col).setToolTip(tip)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        for col in range(len(COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        layout.addWidget(self.table, 1)
        self.target_label = style.caption_label()
        self.target_label.setWordWrap(True)
        layout.addWidget(self.target_label)
        self._rows: list[ChangeRow] = []
        self._target: ChangeRow | None = None
        self.setVisible(False)

    def set_rows(
        self, rows: Sequence[ChangeRow], target: ChangeRow | None = None, target_text: str = ""
    ) -> None:
        """Show ``rows`` (top classes of both runs) and ``target``'s row (bold, last)."""
        new_rows = [tuple(r) for r in rows]
        new_target = tuple(target) if target is not None else None
        if (new_rows, new_target) == (self._rows, self._target) and (
            self.target_label.text() == target_text
        ):
            # Every live frame clears the table: rebuilding an empty one still relaid out the
            # panel and cost the GUI thread time each frame.
            return
        self._rows = new_rows  # type: ignore[assignment]
        self._target = new_target  # type: ignore[assignment]
        shown = list(self._rows)
        if self._target is not None and all(r[0] != self._target[0] for r in shown):
            shown.append(self._target)
        self.table.clearSpans()
        self.table.setRowCount(2 * len(shown))
        bold = QFont(self.font())
        bold.setBold(True)
        for i, row in enumerate(shown):
            index, name, p_a, p_b, dp, _la, _lb, dlogit = row
            is_target = self._target is not None and index == self._target[0]
            plain = not name or name in (str(index), f"class {index}")
            label = f"class {index}" if plain else f"{index}: {name}"
            title = QTableWidgetItem(label + ("  (target)" if is_target else ""))
            title.setToolTip(
                f"class {index}: {name}" + (" - the gradient target" if is_target else "")
            )
            if is_target:
                title.setFont(bold)
            self.table.setItem(2 * i, 0, title)
            self.table.setSpan(2 * i, 0, 1, len(COLUMNS))
            cells = [
                _percent(p_a),
                _percent(p_b),
                format_change(dp, percent=True),
                format_change(dlogit, percent=False),
            ]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col >= 2:
                    value = dp if col == 2 else dlogit
                    if not math.isnan(value) and value != 0:
                        item.setForeground(_UP if value > 0 else _DOWN)
                if is_target:
                    item.setFont(bold)
                self.table.setItem(2 * i + 1, col, item)
        # As tall as its rows: the panel scrolls, not the table.
        height = self.table.horizontalHeader().sizeHint().height()
        height += self.table.verticalHeader().defaultSectionSize() * 2 * len(shown)
        self.table.setFixedHeight(height + 2 * self.table.frameWidth())
        self.target_label.setText(target_text)
        self.target_label.setVisible(bool(target_text))
        self.setVisible(bool(shown))

    def rows(self) -> list[ChangeRow]:
        """The top-class rows shown (without the target's, unless it is one of them)."""
        return list(self._rows)

    def target_row(self) -> ChangeRow | None:
        return self._target

    def cell_texts(self) -> list[list[str]]:
        """What the table says, one list per class: its name line, then its numbers."""
        table = self.table
        return [
            [table.item(r, 0).text()]
            + [table.item(r + 1, c).text() for c in range(table.columnCount())]
            for r in range(0, table.rowCount(), 2)
        ]

    def clear(self) -> None:
        self.set_rows([])
        self.target_label.clear()
