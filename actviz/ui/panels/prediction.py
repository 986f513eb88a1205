"""PredictionPanel: the model's top answers (classes, next tokens, detections) as labelled bars."""

from __future__ import annotations

import math

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase

#: Height of a probability bar under its class name.
BAR_HEIGHT = 8


class ProbabilityBar(QtWidgets.QWidget):
    """A painted horizontal bar for a probability in [0, 1] (style-independent, unlike QProgressBar)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self._value = 0.0
        self._color = QtGui.QColor(style.BAR_POSITIVE)
        self.setMinimumSize(60, BAR_HEIGHT)
        policy = QtWidgets.QSizePolicy.Policy
        self.setSizePolicy(policy.Expanding, policy.Fixed)

    def set_value(self, value: float, color: str) -> None:
        """Fill ``value`` (clipped to [0, 1]; NaN draws nothing) of the bar in ``color``."""
        self._value = 0.0 if math.isnan(value) else min(max(float(value), 0.0), 1.0)
        self._color = QtGui.QColor(color)
        self.update()

    def value(self) -> float:
        """The fraction drawn."""
        return self._value

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        painter = QtGui.QPainter(self)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        rect = QtCore.QRectF(self.rect()).adjusted(0.5, 1.0, -0.5, -1.0)
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        painter.setBrush(QtGui.QColor("#e8eaed"))
        painter.drawRoundedRect(rect, 3, 3)
        if self._value > 0:
            filled = QtCore.QRectF(
                rect.x(), rect.y(), max(rect.width() * self._value, 2.0), rect.height()
            )
            painter.setBrush(self._color)
            painter.drawRoundedRect(filled, 3, 3)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(160, 18)


class _Row:
    """One prediction: index, name and percentage on one line, the bar under the name."""

    def __init__(self, grid: QtWidgets.QGridLayout, row: int) -> None:
        right = QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter
        self.index = style.caption_label()
        self.index.setAlignment(right)
        self.label = style.ElidedLabel()
        self.bar = ProbabilityBar()
        self.percent = QtWidgets.QLabel()
        self.percent.setAlignment(right)
        font = QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont)
        self.percent.setFont(font)
        self.percent.setMinimumWidth(self.percent.fontMetrics().horizontalAdvance("100.0 %") + 4)
        self.bar.setFixedHeight(BAR_HEIGHT)
        line = 2 * row
        grid.addWidget(self.index, line, 0)
        grid.addWidget(self.label, line, 1)
        grid.addWidget(self.percent, line, 2)
        grid.addWidget(self.bar, line + 1, 1, 1, 2)

    def set_visible(self, visible: bool) -> None:
        for widget in (self.index, self.label, self.bar, self.percent):
            widget.setVisible(visible)

    def empty(self) -> None:
        """Hide the row and forget its prediction (no stale labels of a previous model)."""
        self.set_visible(False)
        for label in (self.index, self.label, self.percent):
            label.setText("")
        self.label.setToolTip("")
        self.bar.set_value(0.0, style.BAR_POSITIVE)


class PredictionPanel(PanelBase):
    """Top-k predictions: index, label, a probability bar (the first, the answer, stronger)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Prediction", parent)
        self.target_label = style.caption_label(wrap=True)
        self.content.addWidget(self.target_label)
        self._grid = QtWidgets.QGridLayout()
        self._grid.setContentsMargins(0, 2, 0, 0)
        self._grid.setHorizontalSpacing(6)
        self._grid.setVerticalSpacing(2)
        self._grid.setColumnStretch(1, 1)
        self.content.addLayout(self._grid)
        self.content.addStretch(1)
        self.placeholder = style.caption_label("no prediction yet")
        self.content.addWidget(self.placeholder)
        self._rows: list[_Row] = []
        self._data: list[tuple[int, str, float]] = []
        self._kind = "class"
        self._bars_visible = True
        self.clear()

    def set_bars_visible(self, visible: bool) -> None:
        """Show or hide the bars (a before/after table added below takes their place)."""
        if bool(visible) == self._bars_visible:
            return  # asked again on every live frame: redrawing the bars is not free
        self._bars_visible = bool(visible)
        self.set_predictions(self._data)

    def bars_visible(self) -> bool:
        return self._bars_visible

    def add_row(self, widget: QtWidgets.QWidget) -> None:
        """Add ``widget`` under the bars, above the panel's stretch (a before/after table)."""
        stretch_at = next(
            i for i in range(self.content.count()) if self.content.itemAt(i).spacerItem()
        )
        self.content.insertWidget(stretch_at, widget)

    def set_predictions(self, rows: list[tuple[int, str, float]], kind: str | None = None) -> None:
        """Show ``rows`` (index, label, probability); ``kind`` names the index (None: unchanged)."""
        if kind is not None:
            self._kind = str(kind)
        self._data = [(int(i), str(label), float(p)) for i, label, p in rows]
        while len(self._rows) < len(self._data):
            self._rows.append(_Row(self._grid, len(self._rows)))
        for position, row in enumerate(self._rows):
            if position >= len(self._data):
                row.empty()
                continue
            index, label, probability = self._data[position]
            row.index.setText(str(index))
            row.label.setText(label)
            word = "label" if self._kind == "detection" else self._kind
            row.label.setToolTip(f"{word} {index}: {label}")
            row.bar.set_value(probability, style.BAR_POSITIVE if position == 0 else "#8fb3d9")
            row.percent.setText(
                "nan" if math.isnan(probability) else f"{100.0 * probability:.1f} %"
            )
            row.set_visible(self._bars_visible)
        self.placeholder.setVisible(not self._data and self._bars_visible)

    def set_target_text(self, text: str) -> None:
        """Describe the gradient target, e.g. "target: class 3 (top-1 logit)"."""
        self.target_label.setText(text)
        self.target_label.setVisible(bool(text))

    def predictions(self) -> list[tuple[int, str, float]]:
        """The rows currently shown."""
        return list(self._data)

    def kind(self) -> str:
        """What the rows' indices count: ``"class"``, ``"token"`` or ``"detection"``."""
        return self._kind

    def row_texts(self) -> list[str]:
        """The label text of every visible row, top first (what the user reads)."""
        return [row.label.text() for row in self._rows[: len(self._data)]]

    def clear(self) -> None:
        """Show no prediction."""
        self.set_predictions([], "class")
        self.set_target_text("")
