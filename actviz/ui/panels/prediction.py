"""PredictionPanel: the model's top answers (classes, next tokens, detections) as labelled bars;
PredictionChangeView: two runs' predictions side by side with their change."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase

if TYPE_CHECKING:  # pragma: no cover - the engine imports torch; panels never do
    from actviz.display.difference import PredictionChange

BAR_HEIGHT = 8  #: Height of a probability bar under its class name.
#: ``(index, name, p_a, p_b, dp, logit_a, logit_b, dlogit)`` as ``PredictionRow``, A minus B.
ChangeRow = tuple[int, str, float, float, float, float, float, float]
#: Colours of a change up / down.
UP_COLOUR = QtGui.QColor("#1e7b34")
DOWN_COLOUR = QtGui.QColor(style.BAR_BAD)
#: A probability change smaller than this reads "+0.0" (points): it is not coloured.
_DP_SHOWN = 5e-4


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
            rect.setWidth(max(rect.width() * self._value, 2.0))
            painter.setBrush(self._color)
            painter.drawRoundedRect(rect, 3, 3)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(160, 18)


class _Row:
    """One prediction: index, name and percentage on one line, the bar under the name."""

    def __init__(self, grid: QtWidgets.QGridLayout, row: int) -> None:
        right = QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter
        self.index = style.caption_label(alignment=right)
        self.label = style.ElidedLabel()
        self.bar = ProbabilityBar()
        font = QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont)
        self.percent = QtWidgets.QLabel(alignment=right, font=font)
        self.percent.setMinimumWidth(self.percent.fontMetrics().horizontalAdvance("100.0 %") + 4)
        self.bar.setFixedHeight(BAR_HEIGHT)
        for column, widget in enumerate((self.index, self.label, self.percent)):
            grid.addWidget(widget, 2 * row, column)
        grid.addWidget(self.bar, 2 * row + 1, 1, 1, 2)

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
        self._grid = QtWidgets.QGridLayout(horizontalSpacing=6, verticalSpacing=2)
        self._grid.setContentsMargins(0, 2, 0, 0)
        self._grid.setColumnStretch(1, 1)
        self.content.addLayout(self._grid)
        self.content.addStretch(1)
        self.placeholder = style.caption_label("no prediction yet")
        self.content.addWidget(self.placeholder)
        self._rows: list[_Row] = []
        self._data: list[tuple[int, str, float]] = []
        self._kind, self._bars_visible = "class", True
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

    def row_texts(self) -> list[str]:
        """The label text of every visible row, top first (what the user reads)."""
        return [row.label.text() for row in self._rows[: len(self._data)]]

    def clear(self) -> None:
        """Show no prediction."""
        self.set_predictions([], "class")
        self.set_target_text("")


def format_percent(p: float) -> str:
    """``83.1%``: a probability, compact for the table (``nan`` as is)."""
    return "nan" if math.isnan(p) else f"{100.0 * p:.1f}%"


def format_change(value: float, *, percent: bool) -> str:
    """A signed change: ``+12.3`` points when ``percent``, else a logit in six characters; one
    that rounds to nothing is ``±0.0`` (not ``-0.0``)."""
    if math.isnan(value):
        return "nan"
    size = abs(value := 100.0 * value if percent else value)
    text = f"{value:+.1f}" if percent or 10 <= size < 100 else f"{value:+.2f}"
    text = f"{value:+.0f}" if not percent and size >= 100 else text
    return "±" + text[1:] if not text.strip("+-0.") else text


class PredictionChangeView(PanelBase):
    """Per class, its probability in runs A and B and the change (A minus B); hidden when empty.

    ``names``/``tips``: headers and tooltips of A's and B's columns; ``reference_first``: B's
    first; ``caption``: a line above; ``empty_text``: :meth:`clear`'s message (empty: hidden);
    ``framed``: False inside another panel."""

    def __init__(
        self,
        title: str = "",
        *,
        names: tuple[str, str] = ("A", "B"),
        tips: tuple[str, str] = ("probability in run A", "probability in run B"),
        reference_first: bool = False,
        caption: str = "",
        empty_text: str = "",
        framed: bool = True,
        parent: QtWidgets.QWidget | None = None,
    ) -> None:
        super().__init__(title, parent)
        self.title_label.setVisible(bool(title))
        if not framed:
            self.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
            self.layout().setContentsMargins(0, 0, 0, 0)
            # Inside another panel's layout: as tall as its content, never more.
            policy = QtWidgets.QSizePolicy.Policy
            self.setSizePolicy(policy.Preferred, policy.Maximum)
        self._reference_first, self._empty_text = bool(reference_first), empty_text
        self.caption = style.caption_label(caption, wrap=True, visible=False)  # with the table
        self.content.addWidget(self.caption)

        (a, b), (a_tip, b_tip) = names, tips
        probabilities = [(b, b_tip), (a, a_tip)] if reference_first else [(a, a_tip), (b, b_tip)]
        columns = [
            *probabilities,
            ("Δp", f"change of the probability ({a} − {b}), in percentage points"),
            ("Δlogit", f"change of the logit, the raw output ({a} − {b})"),
        ]
        self.table = table = QtWidgets.QTableWidget(0, len(columns), showGrid=False, wordWrap=False)
        table.setHorizontalHeaderLabels([text for text, _ in columns])
        for col, (_, tip) in enumerate(columns):
            table.horizontalHeaderItem(col).setToolTip(tip)
        table.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.setVerticalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.NoSelection)
        table.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 4)
        table.setVisible(False)
        self.content.addWidget(table)
        self.message_label = style.caption_label(empty_text, wrap=True, visible=bool(empty_text))
        self.content.addWidget(self.message_label)
        # A panel taller than its table keeps the table at the top, the space below it.
        self.content.addStretch(1)

        self._rows: list[ChangeRow] = []
        self._target: ChangeRow | None = None
        #: What set_rows showed last, to skip a repeat: so far, what clear() shows.
        self._shown: tuple = ((), None, None, None, empty_text)
        if not empty_text:
            self.setVisible(False)  # Hidden until set_rows has something to show.

    def set_change(self, change: PredictionChange) -> None:
        """Show a :class:`~actviz.display.difference.PredictionChange`."""
        self.set_rows(
            change.rows,
            target=change.target,
            top_a=change.top_a,
            top_b=change.top_b,
            message="" if change.rows else change.message,
        )

    def set_rows(
        self,
        rows: Sequence[ChangeRow],
        *,
        target: ChangeRow | None = None,
        top_a: int | None = None,
        top_b: int | None = None,
        message: str = "",
    ) -> None:
        """Show ``rows``, then ``target``'s if missing; ``top_a``/``top_b`` bold; ``message``."""
        new_rows = list(rows)
        shown = (tuple(new_rows), target, top_a, top_b, message)
        if shown == self._shown:
            return  # live frames repeat it; a rebuild relays out the panel
        self._shown = shown
        self._rows, self._target = new_rows, target
        listed = list(new_rows)
        if target is not None and all(r[0] != target[0] for r in listed):
            listed.append(target)
        self._fill(listed, target[0] if target is not None else None, top_a, top_b)
        self.message_label.setText(message)
        self.message_label.setVisible(bool(message))
        self.setVisible(bool(listed or message))

    def _fill(
        self, listed: list[ChangeRow], target: int | None, top_a: int | None, top_b: int | None
    ) -> None:
        table = self.table
        columns = table.columnCount()
        table.clearSpans()
        table.setRowCount(2 * len(listed))
        bold = QtGui.QFont(table.font())
        bold.setBold(True)
        right = QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter
        for i, (index, name, p_a, p_b, dp, _la, _lb, dlogit) in enumerate(listed):
            is_target = index == target
            plain = not name or name in (str(index), f"class {index}")
            label = f"class {index}" if plain else f"{index}: {name}"
            title = QtWidgets.QTableWidgetItem(label + ("  (target)" if is_target else ""))
            title.setToolTip(
                f"class {index}: {name}" + (" - the target class" if is_target else "")
            )
            if is_target:
                title.setFont(bold)
            table.setItem(2 * i, 0, title)
            table.setSpan(2 * i, 0, 1, columns)
            first, second = ((p_b, top_b), (p_a, top_a))
            if not self._reference_first:
                first, second = second, first
            cells = [
                (format_percent(first[0]), index == first[1], math.nan),
                (format_percent(second[0]), index == second[1], math.nan),
                (format_change(dp, percent=True), False, 0.0 if abs(dp) < _DP_SHOWN else dp),
                (format_change(dlogit, percent=False), False, dlogit),
            ]
            for col, (text, strong, change) in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                item.setTextAlignment(right)
                if strong or is_target:
                    item.setFont(bold)
                if not math.isnan(change) and change != 0:
                    item.setForeground(UP_COLOUR if change > 0 else DOWN_COLOUR)
                table.setItem(2 * i + 1, col, item)
        # As tall as its rows: whatever holds the panel scrolls, not the table.
        height = table.horizontalHeader().sizeHint().height()
        height += table.verticalHeader().defaultSectionSize() * 2 * len(listed)
        table.setFixedHeight(height + 2 * table.frameWidth())
        table.setVisible(bool(listed))
        self.caption.setVisible(bool(listed) and bool(self.caption.text()))

    def rows(self) -> list[ChangeRow]:
        """The rows shown, as given (without the target's, unless it is one of them)."""
        return list(self._rows)

    def target_row(self) -> ChangeRow | None:
        """The target class's row (None without a target)."""
        return self._target

    def message(self) -> str:
        """The message line ("" when none is shown)."""
        return self.message_label.text()

    def set_message(self, text: str) -> None:
        """Show ``text`` instead of rows (outputs that are not class scores)."""
        self.set_rows([], message=text)

    def clear(self) -> None:
        """Show no rows: the ``empty_text`` message, or nothing (hidden) without one."""
        self.set_rows([], message=self._empty_text)
