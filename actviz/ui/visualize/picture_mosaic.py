"""The "What channels want" dock (passive): a page of channels, each tile the picture its
channel wants, filled as the synthesis finishes them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.visualize.section import RunRow

#: Tiles are drawn at least this many pixels across (a narrow dock scrolls instead).
MIN_TILE = 48
#: ... and at most this many (a wide dock leaves room to the right).
MAX_TILE = 128
_GAP = 4
_PENDING = QtGui.QColor(220, 220, 220)
_POLICY = QtWidgets.QSizePolicy.Policy


class WantsMosaic(QtWidgets.QWidget):
    """Numbered channel tiles, grey until pictured; ``tile_clicked(int)``: the channel."""

    tile_clicked = QtCore.Signal(int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        #: The channels shown, in tile order.
        self.channels: tuple[int, ...] = ()
        self._images: dict[int, QtGui.QImage] = {}
        self.setMouseTracking(True)
        self.setSizePolicy(_POLICY.Expanding, _POLICY.Preferred)

    def set_channels(self, channels: Sequence[int]) -> None:
        """Show these channels' tiles, all pending."""
        self.channels = tuple(int(c) for c in channels)
        self._images = {}
        self.updateGeometry()
        self.update()

    def set_image(self, channel: int, image: np.ndarray) -> None:
        """The picture of ``channel``: ``(H, W, 3)`` uint8."""
        if int(channel) not in self.channels:
            return
        self._images[int(channel)] = style.rgb_image(image)
        self.update()

    def filled(self) -> tuple[int, ...]:
        """The channels whose picture is shown."""
        return tuple(c for c in self.channels if c in self._images)

    def _grid(self, width: int) -> tuple[int, int, int]:
        """``(columns, rows, tile side)`` for ``width`` pixels."""
        n = max(1, len(self.channels))
        fit = max(1, (width - _GAP) // (MIN_TILE + _GAP))
        cols = max(1, min(n, fit, math.ceil(math.sqrt(n * 1.5))))
        side = (width - _GAP) // cols - _GAP
        side = int(max(MIN_TILE, min(MAX_TILE, side)))
        return cols, math.ceil(n / cols), side

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt name
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt name
        _, rows, side = self._grid(width)
        return _GAP + rows * (side + _GAP) if self.channels else 0

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        width = 4 * (96 + _GAP) + _GAP
        return QtCore.QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(MIN_TILE + 2 * _GAP, MIN_TILE + 2 * _GAP)

    def tile_rect(self, index: int) -> QtCore.QRect:
        """Where tile ``index`` is drawn."""
        cols, _, side = self._grid(self.width())
        r, c = divmod(index, cols)
        return QtCore.QRect(_GAP + c * (side + _GAP), _GAP + r * (side + _GAP), side, side)

    def channel_at(self, pos: QtCore.QPoint) -> int | None:
        """The channel of the tile under ``pos`` (widget coordinates), or None."""
        hit = (c for i, c in enumerate(self.channels) if self.tile_rect(i).contains(pos))
        return next(hit, None)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        if self.heightForWidth(self.width()) != self.height():
            self.updateGeometry()  # the scroll area gives it the height its width needs

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        painter = QtGui.QPainter(self)
        try:
            font = painter.font()
            font.setPointSizeF(max(7.0, font.pointSizeF() * 0.85))
            painter.setFont(font)
            metrics = painter.fontMetrics()
            for i, channel in enumerate(self.channels):
                rect = self.tile_rect(i)
                image = self._images.get(channel)
                if image is None:
                    painter.fillRect(rect, _PENDING)
                else:
                    painter.drawImage(rect, image)
                label = str(channel)
                box = QtCore.QRect(
                    rect.left(), rect.top(), metrics.horizontalAdvance(label) + 6, metrics.height()
                )
                painter.fillRect(box, QtGui.QColor(255, 255, 255, 200))
                painter.setPen(QtGui.QColor(30, 30, 30))
                painter.drawText(box, QtCore.Qt.AlignmentFlag.AlignCenter, label)
        finally:
            painter.end()

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        channel = self.channel_at(event.position().toPoint())
        if channel is not None and event.button() == QtCore.Qt.MouseButton.LeftButton:
            self.tile_clicked.emit(channel)
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        channel = self.channel_at(event.position().toPoint())
        self.setToolTip(
            ""
            if channel is None
            else f"ch {channel}: click to open it in the channel view"
            + ("" if channel in self._images else " (not synthesised yet)")
        )
        super().mouseMoveEvent(event)


class MosaicDock(QtWidgets.QDockWidget, RunRow):
    """The dock's title, buttons, progress, mosaic and message. Signals: ``page_requested(int)``
    (-1 or +1), ``visualise_requested``, ``cancel_requested``, ``export_requested``."""

    page_requested = QtCore.Signal(int)
    visualise_requested = QtCore.Signal()
    cancel_requested = QtCore.Signal()
    export_requested = QtCore.Signal()
    hide_run_when_busy = True

    def __init__(
        self, parent: QtWidgets.QWidget | None = None, settings_menu: QtWidgets.QMenu | None = None
    ) -> None:
        super().__init__("What channels want", parent)
        self.setObjectName("WhatChannelsWantDock")
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        self.title_label = style.caption_label()
        self.title_label.setSizePolicy(_POLICY.Ignored, _POLICY.Preferred)
        layout.addWidget(self.title_label)
        self.visualise_button = QtWidgets.QPushButton("Visualise")
        self.visualise_button.setToolTip("Synthesise what each channel of this page wants")
        self.visualise_button.clicked.connect(self.visualise_requested)
        arrow = QtCore.Qt.ArrowType
        self.prev_button = style.tool_button(
            arrow.LeftArrow, "Previous channels", lambda: self.page_requested.emit(-1), raised=False
        )
        self.next_button = style.tool_button(
            arrow.RightArrow, "Next channels", lambda: self.page_requested.emit(1), raised=False
        )
        self.export_button = style.tool_button(
            "Export…", "Write the pictures as PNGs with visualize.json", self.export_requested.emit
        )
        row = self._run_row(
            self.visualise_button,
            "Stop the synthesis (Esc); finished tiles stay",
            settings_menu,
            ((self.prev_button, self.next_button), (self.export_button,)),
        )
        row.setSpacing(2)
        layout.addLayout(row)
        self.mosaic = WantsMosaic()
        self.scroll = style.scroll_area(self.mosaic, frameless=True, wrap=True)
        layout.addWidget(self.scroll, 1)
        layout.addWidget(self.message)
        self.setWidget(body)
        self.set_busy(False)
        self.set_page("", ())
        self.set_message("")

    def set_page(
        self,
        layer: str,
        channels: Sequence[int],
        caption: str = "",
        *,
        has_prev: bool = False,
        has_next: bool = False,
    ) -> None:
        """The layer and channels shown (tiles pending); ``caption`` says which page."""
        channels = tuple(int(c) for c in channels)
        self.mosaic.set_channels(channels)
        if not layer or not channels:
            self.title_label.setText("Visualise channels from a layer panel's tile menu")
            self.title_label.setToolTip("")
            for button in (self.prev_button, self.next_button, self.visualise_button):
                button.setEnabled(False)
            return
        text = f"{layer} · {caption}" if caption else layer
        self.title_label.setText(text)
        self.title_label.setToolTip(text)
        self.prev_button.setEnabled(has_prev)
        self.next_button.setEnabled(has_next)
        self.visualise_button.setEnabled(True)
