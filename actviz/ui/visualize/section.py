"""The visualize feature's passive widgets: the channel view's "What it wants" section
(settings, a button, progress, picture) and the "What channels want" dock (a page of channels,
each tile the picture its channel wants, filled as the synthesis finishes them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.analysis.visualize.visualization import VisualizeError, VisualizeSettings
from actviz.ui.host import StepsAndLine
from actviz.ui.panels import style

OBJECTIVES = ("channel", "neuron")  #: The objectives offered (those with one image per channel).
#: Smallest side the picture is drawn at (a small image is enlarged by a whole factor).
MIN_SHOWN = 96
#: Largest side it is drawn at, so the maps above keep their room (the export writes it whole).
MAX_SHOWN = 192
MIN_TILE = 48  #: Tiles are drawn at least this many pixels across (a narrow dock scrolls instead).
MAX_TILE = 128  #: ... and at most this many (a wide dock leaves room to the right).
_GAP = 4
_PENDING = QtGui.QColor(220, 220, 220)
_POLICY = QtWidgets.QSizePolicy.Policy


def read_saved_settings(saved: Any) -> VisualizeSettings | None:
    """The settings the window sets (objective, steps, size) as a session file keeps them, read
    back (None: not valid)."""
    keys = ("objective", "steps", "size")
    if not isinstance(saved, dict) or saved.get("objective") not in OBJECTIVES:
        return None
    if not all(type(saved.get(k)) is int for k in keys[1:]):  # not bool, not float
        return None
    try:
        return VisualizeSettings(**{k: saved[k] for k in keys})
    except VisualizeError:
        return None


class RunRow(StepsAndLine):
    """A run button, the ⚙ settings popover, progress and Cancel in a row, and a message."""

    hide_cancel_when_idle = True

    def _run_row(
        self,
        run: QtWidgets.QPushButton,
        cancel_tip: str,
        menu: QtWidgets.QMenu | None,
        around: tuple[tuple[QtWidgets.QWidget, ...], tuple[QtWidgets.QWidget, ...]] = ((), ()),
    ) -> QtWidgets.QHBoxLayout:
        """A row: ``around``'s first widgets, ``run``, ⚙, progress, Cancel, ``around``'s last."""
        self.run_button = run
        self.settings_button = QtWidgets.QToolButton(text="⚙")
        self.settings_button.setToolTip("Objective, steps and image size")
        self.settings_button.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        if menu is not None:
            self.settings_button.setMenu(menu)
        self.progress = style.ProgressBar(maximumHeight=12, textVisible=False)
        self.cancel_button = QtWidgets.QPushButton("Cancel", toolTip=cancel_tip)
        self.cancel_button.clicked.connect(self.cancel_requested)  # type: ignore[attr-defined]
        # Never narrower than their text: the row gives way in the settings and progress.
        policy = QtWidgets.QSizePolicy.Policy
        for button in (run, self.cancel_button):
            button.setSizePolicy(policy.Minimum, policy.Fixed)
        self.message = style.caption_label(wrap=True)
        row = QtWidgets.QHBoxLayout(spacing=4)
        for widget in (*around[0], run, self.settings_button):
            row.addWidget(widget)
        row.addWidget(self.progress, 1)
        row.addStretch(1)
        for widget in (self.cancel_button, *around[1]):
            row.addWidget(widget)
        return row

    def set_busy(self, busy: bool) -> None:
        """:meth:`StepsAndLine.set_busy`, the settings off too."""
        super().set_busy(busy)
        self.settings_button.setEnabled(not busy)


class WantsSection(QtWidgets.QWidget, RunRow):
    """ "What it wants" under the channel's maps: settings, a button, progress and picture."""

    requested = QtCore.Signal()
    cancel_requested = QtCore.Signal()
    settings_changed = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        defaults = VisualizeSettings()
        layout = QtWidgets.QVBoxLayout(self, spacing=2, contentsMargins=QtCore.QMargins(0, 4, 0, 0))
        spin = QtWidgets.QSpinBox
        self.steps_spin = spin(minimum=1, maximum=4096, value=defaults.steps)
        self.steps_spin.setToolTip("Optimisation steps")
        self.size_spin = spin(minimum=8, maximum=1024, singleStep=16, value=defaults.size[0])
        self.size_spin.setToolTip("Image side in pixels")
        self.size_spin.setSuffix(" px")
        tip = "channel: the channel's mean activation; neuron: its centre position"
        self.objective_box = QtWidgets.QComboBox(toolTip=tip)
        self.objective_box.addItems(OBJECTIVES)
        self.objective_box.setCurrentText(defaults.objective)
        # The settings in a popover, so that the row stays one button wide in a narrow view.
        form_box = QtWidgets.QWidget()
        form = QtWidgets.QFormLayout(form_box, contentsMargins=QtCore.QMargins(8, 6, 8, 6))
        form.addRow("objective", self.objective_box)
        form.addRow("steps", self.steps_spin)
        form.addRow("size", self.size_spin)
        self.settings_menu = QtWidgets.QMenu(self)
        holder = QtWidgets.QWidgetAction(self.settings_menu)
        holder.setDefaultWidget(form_box)
        self.settings_menu.addAction(holder)
        tip = "Synthesise the image this channel responds to most (activation maximisation)"
        self.button = QtWidgets.QPushButton("What it wants", toolTip=tip)
        self.button.clicked.connect(self.requested)
        layout.addLayout(self._run_row(self.button, "Stop the synthesis (Esc)", self.settings_menu))
        align = QtCore.Qt.AlignmentFlag
        self.picture = QtWidgets.QLabel(alignment=align.AlignLeft | align.AlignTop)
        layout.addWidget(self.picture)
        layout.addWidget(self.message)
        self.image: np.ndarray | None = None  #: The picture shown, ``(H, W, 3)`` uint8, or None.
        for spin in (self.steps_spin, self.size_spin):
            spin.valueChanged.connect(lambda _v: self.settings_changed.emit())
        self.objective_box.currentTextChanged.connect(lambda _t: self.settings_changed.emit())
        self.set_busy(False)
        self.show_image(None)

    def settings(self) -> VisualizeSettings:
        """The settings set: ``objective``, ``steps`` and ``size``, the others their defaults."""
        return VisualizeSettings(
            objective=self.objective_box.currentText(),
            steps=self.steps_spin.value(),
            size=self.size_spin.value(),
        )

    def set_settings(self, settings: VisualizeSettings) -> None:
        """Put :meth:`settings` back (a session's)."""
        self.objective_box.setCurrentText(settings.objective)
        self.steps_spin.setValue(settings.steps)
        self.size_spin.setValue(settings.size[0])

    def show_image(self, image: np.ndarray | None) -> None:
        """Show ``(H, W, 3)`` uint8 (None: no picture)."""
        if image is None:
            self.image = None
            self.picture.clear()
            self.picture.setToolTip("")
            self.picture.setVisible(False)
            return
        self.image = np.ascontiguousarray(image, dtype=np.uint8)
        h, w = self.image.shape[:2]
        big = max(h, w) > MAX_SHOWN
        pixmap = style.rgb_pixmap(self.image, MAX_SHOWN if big else None)
        if (factor := max(1, -(-MIN_SHOWN // max(1, min(h, w))))) > 1 and not big:
            fast = QtCore.Qt.TransformationMode.FastTransformation
            pixmap = pixmap.scaled(w * factor, h * factor, mode=fast)
        self.picture.setPixmap(pixmap)
        drawn = f"{w}x{h} px, drawn at {pixmap.width()}x{pixmap.height()} (Export writes it whole)"
        self.picture.setToolTip(drawn if big else "")
        self.picture.setVisible(True)


class WantsMosaic(QtWidgets.QWidget):
    """Numbered channel tiles, grey until pictured; ``tile_clicked(int)``: the channel."""

    tile_clicked = QtCore.Signal(int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.channels: tuple[int, ...] = ()  #: The channels shown, in tile order.
        self._images: dict[int, QtGui.QImage] = {}
        self.setMouseTracking(True)
        self.setSizePolicy(_POLICY.Expanding, _POLICY.Preferred)

    def set_channels(self, channels: Sequence[int]) -> None:
        """Show these channels' tiles, all pending."""
        self.channels, self._images = tuple(int(c) for c in channels), {}
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
        side = int(max(MIN_TILE, min(MAX_TILE, (width - _GAP) // cols - _GAP)))
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
                if (image := self._images.get(channel)) is None:
                    painter.fillRect(rect, _PENDING)
                else:
                    painter.drawImage(rect, image)
                label = str(channel)
                width = metrics.horizontalAdvance(label) + 6
                box = QtCore.QRect(rect.left(), rect.top(), width, metrics.height())
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
        tip = "" if channel is None else f"ch {channel}: click to open it in the channel view"
        if channel is not None and channel not in self._images:
            tip += " (not synthesised yet)"
        self.setToolTip(tip)
        super().mouseMoveEvent(event)


class MosaicDock(QtWidgets.QDockWidget, RunRow):
    """The dock's title, buttons, progress, mosaic and message; ``page_requested``: -1 or +1."""

    page_requested = QtCore.Signal(int)
    visualise_requested = QtCore.Signal()
    cancel_requested = QtCore.Signal()
    export_requested = QtCore.Signal()
    hide_run_when_busy = True

    def __init__(
        self, parent: QtWidgets.QWidget | None = None, settings_menu: QtWidgets.QMenu | None = None
    ) -> None:
        super().__init__("What channels want", parent, objectName="WhatChannelsWantDock")
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body, spacing=4, contentsMargins=QtCore.QMargins(4, 4, 4, 4))
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
        around = ((self.prev_button, self.next_button), (self.export_button,))
        tip = "Stop the synthesis (Esc); finished tiles stay"
        row = self._run_row(self.visualise_button, tip, settings_menu, around)
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
        shown = bool(layer and channels)
        text = (f"{layer} · {caption}" if caption else layer) if shown else ""
        self.title_label.setText(text or "Visualise channels from a layer panel's tile menu")
        self.title_label.setToolTip(text)
        self.prev_button.setEnabled(shown and has_prev)
        self.next_button.setEnabled(shown and has_next)
        self.visualise_button.setEnabled(shown)
