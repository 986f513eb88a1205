"""The panels' shared look, styled per item (never global ``pg.setConfigOptions``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.text import format_shape as format_shape

PLOT_BACKGROUND = "#ffffff"
TEXT = "#202124"
MUTED_TEXT = "#5f6368"
AXIS_PEN = "#9aa0a6"
GRID_ALPHA = 0.25

BAR_POSITIVE = "#3b6ea5"
BAR_NEGATIVE = "#c0504d"
BAR_GRADIENT = "#e07b39"
BAR_BAD = "#d93025"
BAR_ZERO = "#bdc1c6"
ROW_BAD_BACKGROUND = "#f8d7da"
#: Text of an error said in place (a dialog's or a dock's message line, the red banner).
ERROR_TEXT = "#842029"
SELECTION = "#3b6ea5"
#: Outline of selected tiles (a colour no activation or diverging map uses).
TILE_MARK = "#e0119d"
#: Frame and badge of a layer panel whose layer has edits switched on.
EDITED = "#d9480f"
EDITED_BADGE = f"color: white; background: {EDITED}; border-radius: 3px; padding: 0 4px;"

#: Margin around a page of panels (the Layers grid, the Overview) and around the banner.
PAGE_MARGIN = 4
PANEL_SPACING = 6  #: Gap between two panels of a page (grid spacing, splitter handles).

#: Least time between two refreshes of a read-out that follows live frames (fps, memory held):
#: twice a second reads at a glance, and each refresh counts memory and repaints.
READOUT_INTERVAL_S = 0.5

TICK_POINT_SIZE = 8
LABEL_POINT_SIZE = 9
_W = TypeVar("_W", bound=QtWidgets.QWidget)


def tick_font() -> QtGui.QFont:
    """Font for axis ticks and colour bar values."""
    font = QtGui.QFont()
    font.setPointSize(TICK_POINT_SIZE)
    return font


def style_axis(axis: pg.AxisItem, label: str | None = None) -> None:
    """Give ``axis`` dark tick labels on a light background and an optional label."""
    axis.setPen(pg.mkPen(AXIS_PEN))
    axis.setTextPen(pg.mkPen(TEXT))
    # SI prefixes turn 0.7 into "700 (x0.001)", which misreads as a different value.
    axis.enableAutoSIPrefix(False)
    axis.setStyle(tickFont=tick_font(), maxTickLevel=1, maxTextLevel=1)  # 3 levels: 2x the paint
    if label is not None:
        axis.setLabel(label, color=MUTED_TEXT, **{"font-size": f"{LABEL_POINT_SIZE}pt"})
        axis.resizeEvent()  # pyqtgraph centres a label only when resized: a new one ran off


def style_plot(
    plot: pg.PlotItem, *, x_label: str | None = None, y_label: str | None = None
) -> None:
    """Style a PlotItem: light look, no context menu or autoscale button, labelled axes."""
    plot.setMenuEnabled(False)
    # pyqtgraph builds the "Plot Options" menu without a parent: delete it with the plot.
    plot.destroyed.connect(plot.ctrlMenu.deleteLater)
    plot.hideButtons()
    style_axis(plot.getAxis("bottom"), x_label)
    style_axis(plot.getAxis("left"), y_label)


class ElidedLabel(QtWidgets.QLabel):
    """A one-line label elided with "…" rather than widen the layout (``text()`` is whole).
    ``steady``: a new text repaints it alone, without asking the layout again; ``grow``: as wide
    as its widest text so far, a fixed size, so that a new text never relays out (read-outs);
    ``lines``: steady, wrapped over that many reserved lines, the last one elided."""

    def __init__(
        self,
        text: str = "",
        parent: QtWidgets.QWidget | None = None,
        *,
        mode: QtCore.Qt.TextElideMode = QtCore.Qt.TextElideMode.ElideRight,
        keep_after: str | None = None,
        steady: bool = False,
        grow: bool = False,
        lines: int | None = None,
    ) -> None:
        super().__init__(text, parent)  # steady: QLabel's text stays the first, for its height
        self._mode = mode
        #: Text from the first ``keep_after`` on is never shortened ("features…ck1: scale ch 3").
        self._keep_after = keep_after
        self._lines = None if lines is None else max(1, int(lines))
        self._steady, self._grow = text if steady or lines is not None else None, grow
        policy = QtWidgets.QSizePolicy.Policy
        # grow: laid out at its own width (an ignored one left the status bar's run time cut)
        across = policy.Preferred if grow else policy.Ignored
        self.setSizePolicy(across, policy.Preferred if lines is None else policy.Fixed)
        self.setMinimumWidth(0 if grow else 40)
        self._fallbacks: tuple[str, ...] = ()
        self._last_resort: str | None = None
        self._fit(text)

    def text(self) -> str:
        return super().text() if self._steady is None else self._steady

    def setText(self, text: str) -> None:  # noqa: N802 - Qt name
        """Show ``text``; shorter versions set for the previous text are forgotten."""
        self.set_text(text)

    def clear(self) -> None:
        self.setText("")

    def set_text(
        self, text: str, fallbacks: Sequence[str] = (), last_resort: str | None = None
    ) -> None:
        """Show ``text``, else the first of ``fallbacks`` that fits, else ``last_resort`` elided."""
        new = (text, tuple(fallbacks), last_resort)
        if new == (self.text(), self._fallbacks, self._last_resort):
            return  # unchanged (set again with every live frame): no repaint
        if self._steady is None:
            super().setText(text)
            self._fit(text)
        else:
            self._steady = text
        _, self._fallbacks, self._last_resort = new
        self.update()  # QLabel repaints only for another text

    def shown_text(self) -> str:
        """The text as drawn at the label's current width ("…" where it is shortened)."""
        metrics, width, text = self.fontMetrics(), self.contentsRect().width(), self.text()
        text = _measurable(text, width, self._mode)
        if self._lines:  # the lines joined, or the text where they hold it whole
            joined = " ".join(self.shown_lines())
            return text if joined == " ".join(text.split()) else joined
        if self._fallbacks and metrics.horizontalAdvance(text) > width:
            for shorter in self._fallbacks:
                if metrics.horizontalAdvance(shorter) <= width:
                    return shorter
            if self._last_resort is not None:
                # Always marked: something was left out even where the rest fits whole.
                room = width - metrics.horizontalAdvance("…")
                shown = metrics.elidedText(self._last_resort, self._mode, room)
                return shown if shown != self._last_resort else shown + "…"
            text = self._fallbacks[-1]
        cut = text.find(self._keep_after) if self._keep_after else -1
        if cut > 0 and metrics.horizontalAdvance(text) > width:
            head, tail = text[:cut], text[cut:]
            room = width - metrics.horizontalAdvance(tail)
            if room > metrics.horizontalAdvance("M…M"):
                return metrics.elidedText(head, QtCore.Qt.TextElideMode.ElideMiddle, room) + tail
        return metrics.elidedText(text, self._mode, width)

    def shown_lines(self) -> list[str]:
        """The lines as drawn at the current width (the last one shortened with "…")."""
        if not self._lines:
            return [self.shown_text()]
        text, metrics, width = self.text(), self.fontMetrics(), max(1, self.contentsRect().width())
        # The lines hold at most that many widths of text: the rest is never measured.
        text = _measurable(text, width * self._lines, QtCore.Qt.TextElideMode.ElideRight)
        if metrics.horizontalAdvance(text) <= width and not text.startswith(" "):
            return [text] if text else []  # one line (a frame's caption): no wrap
        words, lines, line = text.split(" "), [], ""
        for i, word in enumerate(words):
            trial = f"{line} {word}" if line else word
            if metrics.horizontalAdvance(trial) <= width or not line:
                line = trial
                continue
            if len(lines) == self._lines - 1:  # the last line: it holds the rest
                line = " ".join([line, *words[i:]])
                break
            lines.append(line)
            line = word
        if line:
            lines.append(line)
        # The last line holds the rest; a single word wider than the widget is cut too.
        mode = QtCore.Qt.TextElideMode.ElideRight
        return [metrics.elidedText(text, mode, width) for text in lines]

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        painter = QtGui.QPainter(self)
        if self.testAttribute(QtCore.Qt.WidgetAttribute.WA_OpaquePaintEvent):
            # A new text then repaints this widget alone, not every parent.
            painter.fillRect(event.rect(), self.palette().brush(self.backgroundRole()))
        painter.setFont(self.font())
        painter.setPen(self.palette().color(QtGui.QPalette.ColorRole.WindowText))
        rect, text, shown = self.contentsRect(), self.text(), self.shown_lines()
        flag = QtCore.Qt.AlignmentFlag
        step, align = rect.height(), self.alignment() | flag.AlignVCenter
        if self._lines:  # top to bottom, a line's height each
            step, align = self.fontMetrics().lineSpacing(), flag.AlignLeft
        for i, line in enumerate(shown):
            row = QtCore.QRect(rect.left(), rect.top() + i * step, rect.width(), step)
            painter.drawText(row, int(align), line)
        cut = " ".join(shown) != (" ".join(text.split()) if self._lines else text)
        # One line: a tooltip of the owner's own stays while the text is cut.
        if cut != bool(self.toolTip()) or (cut and self._lines and self.toolTip() != text):
            self.setToolTip(text if cut else "")

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(40, self.fontMetrics().height())

    def _fit(self, text: str) -> None:
        metrics, margins = self.fontMetrics(), self.contentsMargins()
        if self._lines:
            self.setFixedHeight(
                metrics.lineSpacing() * self._lines + margins.top() + margins.bottom()
            )
        if not self._grow:
            return
        width = metrics.horizontalAdvance(text) + margins.left() + margins.right() + 4
        height = metrics.height() + margins.top() + margins.bottom()
        if width > self.minimumWidth() or height != self.minimumHeight():
            # Room for a digit more ("98 ms" -> "102 ms").
            width = max(width + metrics.horizontalAdvance("00"), self.minimumWidth())
            self.setFixedSize(width, height)

    def changeEvent(self, event: QtCore.QEvent) -> None:  # noqa: N802 - Qt name
        super().changeEvent(event)
        if event.type() == QtCore.QEvent.Type.FontChange and hasattr(self, "_grow"):
            if self._grow:
                self.setMinimumWidth(0)
            self._fit(self.text())


def _measurable(text: str, width: int, mode: QtCore.Qt.TextElideMode) -> str:
    """``text`` cut to what ``width`` pixels can show (no glyph is under half a pixel wide), on
    the side its elision keeps: shaping a long text for each paint took 16 ms per 20,000 words."""
    keep = 2 * max(1, width) + 16
    if len(text) <= keep:
        return text
    if mode == QtCore.Qt.TextElideMode.ElideLeft:
        return text[-keep:]
    if mode == QtCore.Qt.TextElideMode.ElideMiddle:
        return text[:keep] + text[-keep:]
    return text[:keep]


def _dress(
    widget: _W,
    color: str = MUTED_TEXT,
    point_size: int = LABEL_POINT_SIZE,
    font: QtGui.QFont | None = None,
) -> _W:
    font = widget.font() if font is None else font
    font.setPointSize(point_size)
    widget.setFont(font)
    # A palette (not a style sheet) so ElidedLabel's own painting picks the colour up.
    palette = widget.palette()
    palette.setColor(QtGui.QPalette.ColorRole.WindowText, QtGui.QColor(color))
    widget.setPalette(palette)
    return widget


def caption_text(text: str = "", *, lines: int = 2) -> ElidedLabel:
    """A small muted :class:`ElidedLabel` over ``lines``, for captions that change every frame."""
    return _dress(ElidedLabel(text, lines=lines))


def title_label(text: str = "", *, point_size: int = 10) -> ElidedLabel:
    """A bold one-line title; long titles are shortened in the middle (name start, shape end)."""
    label = ElidedLabel(text, mode=QtCore.Qt.TextElideMode.ElideMiddle)
    font = label.font()
    font.setBold(True)
    return _dress(label, TEXT, point_size, font)


def caption_label(text: str = "", *, wrap: bool = False, **props: Any) -> QtWidgets.QLabel:
    """A small muted label for captions and notes (``wrap``: over as many lines as it needs;
    ``props``: more of the label's Qt properties, e.g. ``visible=False``)."""
    return _dress(QtWidgets.QLabel(text, wordWrap=wrap, **props))


def readout_label() -> ElidedLabel:
    """A one-line fixed-pitch label for hover read-outs (digits do not jiggle as values change)."""
    font = QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont)
    label = _dress(ElidedLabel(), font=font)
    # Reserve the line even when empty so the layout does not jump while hovering.
    label.setMinimumHeight(label.fontMetrics().height())
    return label


def format_value(value: float) -> str:
    """Format a number for read-outs: fixed point for ordinary magnitudes, else scientific.

    Examples
    --------
    >>> format_value(0.5321)
    '0.532'
    >>> format_value(1.5e-05)
    '1.500e-05'"""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    magnitude = abs(value)
    return f"{value:.3f}" if magnitude == 0.0 or 1e-3 <= magnitude < 1e4 else f"{value:.3e}"


def tool_button(
    face: QtCore.Qt.ArrowType | str,
    tip: str,
    on_click: Callable[[], object],
    *,
    raised: bool = True,
) -> QtWidgets.QToolButton:
    """A tool button showing an arrow or a text (``face``) that calls ``on_click``."""
    button = QtWidgets.QToolButton(toolTip=tip, autoRaise=not raised)
    if isinstance(face, str):
        button.setText(face)
    else:
        button.setArrowType(face)
    button.clicked.connect(lambda: on_click())
    return button


def bare_box(
    parent: QtWidgets.QWidget | None = None, *, spacing: int | None = None, vertical: bool = False
) -> QtWidgets.QBoxLayout:
    """A box layout without margins (``spacing`` pixels between items where given)."""
    box = (QtWidgets.QVBoxLayout if vertical else QtWidgets.QHBoxLayout)(parent)
    box.setContentsMargins(0, 0, 0, 0)
    if spacing is not None:
        box.setSpacing(spacing)
    return box


def fit_combo(combo: QtWidgets.QComboBox, length: int) -> None:
    """Size ``combo`` for ``length`` characters, whatever its entries."""
    combo.setSizeAdjustPolicy(
        QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
    )
    combo.setMinimumContentsLength(length)


def scroll_area(
    widget: QtWidgets.QWidget | None = None,
    *,
    name: str = "",
    frameless: bool = False,
    wrap: bool = False,
    cls: type[QtWidgets.QScrollArea] = QtWidgets.QScrollArea,
) -> QtWidgets.QScrollArea:
    """``widget`` in a resizable scroll area (``wrap``: never sideways; ``cls``: a subclass)."""
    area = cls()
    area.setWidgetResizable(True)
    if name:
        area.setObjectName(name)
    if frameless:
        area.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
    if wrap:
        area.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    if widget is not None:
        area.setWidget(widget)
    return area


def checked_rgb(rgb: np.ndarray) -> np.ndarray:
    """``rgb`` as a C-contiguous ``(H, W, 3|4)`` uint8 picture (``ValueError`` otherwise)."""
    rgb = np.ascontiguousarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] not in (3, 4) or rgb.dtype != np.uint8:
        raise ValueError(f"expected (H, W, 3) uint8, got {rgb.shape} {rgb.dtype}")
    return rgb


def rgb_image(rgb: np.ndarray) -> QtGui.QImage:
    """An ``(H, W, 3+)`` uint8 picture as a QImage of its own (not pointing into ``rgb``)."""
    a = np.ascontiguousarray(np.asarray(rgb)[..., :3], dtype=np.uint8)
    h, w = a.shape[:2]
    return QtGui.QImage(a.data, w, h, 3 * w, QtGui.QImage.Format.Format_RGB888).copy()


def rgb_pixmap(rgb: np.ndarray, side: int | None = None, smooth: bool = True) -> QtGui.QPixmap:
    """:func:`rgb_image` as a pixmap, fitted in ``side`` x ``side`` when given."""
    pixmap = QtGui.QPixmap.fromImage(rgb_image(rgb))
    if side is None:
        return pixmap
    mode = QtCore.Qt.TransformationMode
    how = mode.SmoothTransformation if smooth else mode.FastTransformation
    return pixmap.scaled(side, side, QtCore.Qt.AspectRatioMode.KeepAspectRatio, how)


class ProgressBar(QtWidgets.QProgressBar):
    """A progress bar repainted with the window (``setValue`` would paint all waiting widgets)."""

    def _later(self, change: Callable[[], None]) -> None:
        was = self.updatesEnabled()
        self.setUpdatesEnabled(False)
        try:
            change()
        finally:
            self.setUpdatesEnabled(was)  # enabled again: an update() of the bar, not a paint

    def setValue(self, value: int) -> None:  # noqa: N802 - Qt name
        self._later(lambda: super(ProgressBar, self).setValue(value))

    def setRange(self, minimum: int, maximum: int) -> None:  # noqa: N802 - Qt name
        self._later(lambda: super(ProgressBar, self).setRange(minimum, maximum))

    def reset(self) -> None:
        self._later(super().reset)


class ThumbList(QtWidgets.QListWidget):
    """Captioned thumbnails across, wrapped; ``picked(key)`` when an enabled one is clicked."""

    picked = QtCore.Signal(object)

    def __init__(self, side: int, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setViewMode(QtWidgets.QListView.ViewMode.IconMode)
        self.setIconSize(QtCore.QSize(side, side))
        self.setResizeMode(QtWidgets.QListView.ResizeMode.Adjust)
        self.setMovement(QtWidgets.QListView.Movement.Static)
        self.itemClicked.connect(self._on_item_clicked)

    def add(
        self, key: Any, caption: str, tip: str, pixmap: QtGui.QPixmap | None, missing: bool = False
    ) -> QtWidgets.QListWidgetItem:
        """An item: ``pixmap`` (None: none yet) over ``caption``; ``missing``: grey, no click."""
        item = QtWidgets.QListWidgetItem(caption)
        item.setToolTip(tip)
        if pixmap is not None:
            item.setIcon(QtGui.QIcon(pixmap))
        item.setData(QtCore.Qt.ItemDataRole.UserRole, key)
        if missing:
            item.setFlags(item.flags() & ~QtCore.Qt.ItemFlag.ItemIsEnabled)
        self.addItem(item)
        return item

    def keys(self) -> list[Any]:
        """The items' keys, in order."""
        return [self.item(i).data(QtCore.Qt.ItemDataRole.UserRole) for i in range(self.count())]

    def _on_item_clicked(self, item: QtWidgets.QListWidgetItem) -> None:
        if item.flags() & QtCore.Qt.ItemFlag.ItemIsEnabled:
            self.picked.emit(item.data(QtCore.Qt.ItemDataRole.UserRole))
