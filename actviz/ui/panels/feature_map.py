"""LayerPanel: one layer's activation (and gradient magnitude) in a cell of the layer grid."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.colormaps import AUTO, resolve
from actviz.ui.panels import style
from actviz.ui.panels.bar_canvas import BarCanvas
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.deferred import DeferredCall

if TYPE_CHECKING:  # the panels never import torch at run time; views.py does
    from actviz.display.layer_views import LayerView
    from actviz.display.mosaic import Mosaic

logger = logging.getLogger(__name__)

MIN_PANEL_HEIGHT = 220
#: A panel of mosaics may be this low: its canvases ask for the height their width needs.
MIN_MAPS_PANEL_HEIGHT = 120
#: Below this width a panel stacks its activation over its gradient (and its read-outs): side
#: by side, each mosaic would get under 200 px, too few for a page of tiles and the read-out.
NARROW_PANEL_PX = 440
#: A panel's least width, its sides stacked (one canvas, the page buttons).
NARROW_MIN_PX = 150
#: The width a panel prefers (two canvases of 240 px side by side), whatever its arrangement.
PREFERRED_PANEL_PX = 500
#: The "edited: ..." badge is shortened with "…" past this width (its tooltip has it all).
EDIT_BADGE_MAX_PX = 260


#: A hyphen a wrapped line never breaks after (U+2011): "min-max" wrapped as "min-" / "max".
NB_HYPHEN = "\u2011"


def scale_legend(mosaic: Mosaic) -> str:
    """What a mosaic's colour bar means, in words (shown under the mosaic; its hyphenated
    words never split over two lines)."""
    if mosaic.normalize == "channel":
        if mosaic.symmetric:
            return f"per{NB_HYPHEN}channel: each tile -1..1 of its own max |x| (0 in the middle)"
        return f"per{NB_HYPHEN}channel: each tile 0-1 of its own min{NB_HYPHEN}max"
    if mosaic.symmetric:
        return "shared: one scale for all tiles, symmetric about 0"
    return "shared: one scale for all tiles"


@dataclass(frozen=True)
class _Location:
    """Where the mouse is, in the data of a view (not in mosaic pixels)."""

    kind: str  # "maps" | "heatmap" | "bars"
    channel: int | None = None  # maps: channel; bars: unit
    x: int = 0
    y: int = 0


def _locate_in_mosaic(view: LayerView, mosaic: Mosaic, x: float, y: float) -> _Location | None:
    """Map mosaic pixel (x, y) to (channel, column, row) in ``view.data`` (C, H, W)."""
    channel = mosaic.channel_at(x, y)
    if channel is None or channel >= view.data.shape[0]:
        return None
    height, width = view.data.shape[1], view.data.shape[2]
    y0, x0 = mosaic.tile_origin(channel)
    # Tiles can be downsampled (max_tile): one tile pixel covers scale x scale data pixels.
    scale = getattr(mosaic, "scale", None)
    if scale is None:
        scale_y, scale_x = height / mosaic.tile_h, width / mosaic.tile_w
    else:
        scale_y = scale_x = scale
    data_y = min(int(int(y - y0) * scale_y), height - 1)
    data_x = min(int(int(x - x0) * scale_x), width - 1)
    if data_y < 0 or data_x < 0:
        return None
    return _Location("maps", channel, data_x, data_y)


def _value_at(view: LayerView | None, loc: _Location) -> float | None:
    """Raw value of ``view`` at ``loc`` if the view has that kind and the index exists."""
    if view is None or view.kind != loc.kind:
        return None
    data = view.data
    try:
        if loc.kind == "maps":
            return float(data[loc.channel, loc.y, loc.x])
        if loc.kind == "heatmap":
            return float(data[loc.y, loc.x])
        if loc.kind == "bars":
            return float(data[loc.channel])
    except IndexError:
        return None
    return None


def _data_shape(view: LayerView) -> tuple[int, ...]:
    """Per-sample shape for titles: the original shape without its batch dimension."""
    if view.kind == "scalar":
        return ()
    shape = tuple(int(d) for d in view.shape)
    return shape[1:] if len(shape) >= 2 else shape


class _ViewSlot(QtWidgets.QWidget):
    """One side of a LayerPanel (activation or gradient): a caption and a stack of canvases.

    Canvases are created on first use and then only updated, so a layer that always shows
    maps owns exactly one ImageItem for its whole life.
    """

    hovered = QtCore.Signal(object)  # _Location
    hover_left = QtCore.Signal()
    clicked = QtCore.Signal(object)  # _Location
    select_clicked = QtCore.Signal(object, bool)  # _Location, extend (Shift)
    context_requested = QtCore.Signal(object, QtCore.QPoint)  # _Location, screen position
    resized = QtCore.Signal()

    def __init__(
        self,
        caption: str,
        bar_color: str,
        parent: QtWidgets.QWidget | None = None,
        *,
        gradient: bool = False,
    ):
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(1)
        self.caption = style.caption_label(caption)
        layout.addWidget(self.caption)
        self.stack = QtWidgets.QStackedWidget()
        layout.addWidget(self.stack, 1)
        self.placeholder = style.caption_label("no data")
        self.placeholder.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.stack.addWidget(self.placeholder)
        #: What the colour bar means (mosaics only).
        self.legend = style.caption_label()
        self.legend.setWordWrap(True)
        self.legend.setVisible(False)
        layout.addWidget(self.legend)
        self._bar_color = bar_color
        self._unit_label = "unit"
        self._gradient = gradient
        self._choice = AUTO
        self.image_canvas: ImageCanvas | None = None
        self.bar_canvas: BarCanvas | None = None
        self.scalar_label: QtWidgets.QLabel | None = None
        self.view: LayerView | None = None
        self.mosaic: Mosaic | None = None

    # -- lazily built pages ------------------------------------------------------------------
    def _images(self) -> ImageCanvas:
        if self.image_canvas is None:
            self.image_canvas = ImageCanvas(passive=True, cmap=self.colormap(), fit_width=True)
            self.image_canvas.resized.connect(self.resized)
            self.image_canvas.hovered.connect(self._on_image_hovered)
            self.image_canvas.hover_left.connect(self.hover_left)
            self.image_canvas.clicked.connect(self._on_image_clicked)
            self.image_canvas.select_clicked.connect(self._on_image_select_clicked)
            self.image_canvas.context_requested.connect(self._on_image_context)
            self.stack.addWidget(self.image_canvas)
        return self.image_canvas

    def _bars(self) -> BarCanvas:
        if self.bar_canvas is None:
            self.bar_canvas = BarCanvas(
                passive=True,
                positive_color=self._bar_color,
                x_label=self._unit_label,
            )
            self.bar_canvas.hovered.connect(
                lambda index: self.hovered.emit(_Location("bars", int(index)))
            )
            self.bar_canvas.hover_left.connect(self.hover_left)
            self.bar_canvas.context_requested.connect(
                lambda index, pos: self.context_requested.emit(_Location("bars", int(index)), pos)
            )
            self.stack.addWidget(self.bar_canvas)
        return self.bar_canvas

    def set_unit_label(self, label: str) -> None:
        """The bars' axis label ("unit", or "class" for the model's class scores)."""
        self._unit_label = label
        if self.bar_canvas is not None:
            style.style_axis(self.bar_canvas.bottom_axis, label)

    def _scalar(self) -> QtWidgets.QLabel:
        if self.scalar_label is None:
            self.scalar_label = QtWidgets.QLabel()
            font = self.scalar_label.font()
            font.setPointSize(22)
            font.setBold(True)
            self.scalar_label.setFont(font)
            self.scalar_label.setStyleSheet(f"color: {style.TEXT};")
            self.scalar_label.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            self.scalar_label.setTextInteractionFlags(
                QtCore.Qt.TextInteractionFlag.TextSelectableByMouse
            )
            self.stack.addWidget(self.scalar_label)
        return self.scalar_label

    # -- data ----------------------------------------------------------------------------------
    def show_view(self, view: LayerView | None, mosaic: Mosaic | None) -> None:
        self.view, self.mosaic = view, mosaic
        if view is None:
            self.stack.setCurrentWidget(self.placeholder)
            return
        if view.kind == "maps":
            if mosaic is None:
                logger.warning("maps view without a mosaic: nothing to draw")
                self.placeholder.setText("no mosaic")
                self.stack.setCurrentWidget(self.placeholder)
                return
            canvas = self._images()
            canvas.set_colormap(self.colormap())
            # Shared: the layer's values on the bar. Per channel: every tile has its own
            # scale, so the bar reads 0..1 (-1..1) of a tile's own range, and the legend says so.
            # The painted indices; the float image is made only if someone reads it.
            canvas.set_image(
                mosaic.indices,
                mosaic.levels,
                mosaic.scale_range,
                lock_aspect=True,
                source=lambda m=mosaic: m.image,
            )
            canvas.set_tiles(
                mosaic.rows,
                mosaic.cols,
                mosaic.tile_h,
                mosaic.tile_w,
                mosaic.pad,
                mosaic.channels,
                mosaic.first_channel,
                mosaic.tile_channels if mosaic.order is not None else None,
            )
            self.legend.setText(scale_legend(mosaic))
            self.legend.setVisible(True)
            self.stack.setCurrentWidget(canvas)
        elif view.kind == "heatmap":
            data = np.ascontiguousarray(view.data, dtype=np.float32)
            levels = style.finite_range(data) or (0.0, 1.0)
            if levels[1] <= levels[0]:
                levels = (levels[0], levels[0] + 1.0)
            canvas = self._images()
            canvas.clear_tiles()
            canvas.set_colormap(self.colormap())
            canvas.set_image(data, levels, levels, lock_aspect=False)
            self.legend.setVisible(False)
            self.stack.setCurrentWidget(canvas)
        elif view.kind == "bars":
            canvas = self._bars()
            canvas.set_values(view.data)
            self.stack.setCurrentWidget(canvas)
        elif view.kind == "scalar":
            label = self._scalar()
            label.setText(f"{float(np.asarray(view.data).reshape(-1)[0]):.6g}")
            self.stack.setCurrentWidget(label)
        else:
            logger.warning("unknown view kind %r", view.kind)
            self.placeholder.setText(f"cannot show {view.kind!r}")
            self.stack.setCurrentWidget(self.placeholder)

    def colormap(self) -> str:
        """The map this side paints with: the choice, resolved for what it shows."""
        mosaic = self.mosaic if self.view is not None and self.view.kind == "maps" else None
        signed = mosaic is not None and mosaic.symmetric
        return resolve(self._choice, signed=signed, gradient=self._gradient)

    def set_colormap(self, choice: str) -> None:
        """Paint with ``choice``: a map's name, or "auto" (see :func:`resolve`)."""
        self._choice = choice
        if self.image_canvas is not None:
            self.image_canvas.set_colormap(self.colormap())

    def clear(self) -> None:
        self.view = self.mosaic = None
        self.legend.setVisible(False)
        if self.image_canvas is not None:
            self.image_canvas.clear_image()
        if self.bar_canvas is not None:
            self.bar_canvas.set_values(np.zeros(0, dtype=np.float32))
        self.placeholder.setText("no data")
        self.stack.setCurrentWidget(self.placeholder)

    def locate(self, x: float, y: float) -> _Location | None:
        """Map a pixel of the image canvas to a location in the view's data."""
        view = self.view
        if view is None:
            return None
        if view.kind == "maps" and self.mosaic is not None:
            return _locate_in_mosaic(view, self.mosaic, x, y)
        if view.kind == "heatmap":
            rows, cols = view.data.shape
            if 0 <= int(y) < rows and 0 <= int(x) < cols:
                return _Location("heatmap", None, int(x), int(y))
        return None

    def _on_image_hovered(self, x: float, y: float) -> None:
        loc = self.locate(x, y)
        if loc is None:
            self.hover_left.emit()
        else:
            self.hovered.emit(loc)

    def _on_image_clicked(self, x: float, y: float) -> None:
        loc = self.locate(x, y)
        if loc is not None:
            self.clicked.emit(loc)

    def _on_image_select_clicked(self, x: float, y: float, extend: bool) -> None:
        loc = self.locate(x, y)
        if loc is not None:
            self.select_clicked.emit(loc, extend)

    def _on_image_context(self, x: float, y: float, screen: QtCore.QPoint) -> None:
        loc = self.locate(x, y)
        if loc is not None:
            self.context_requested.emit(loc, screen)


class _BadgeLabel(QtWidgets.QLabel):
    """The "edited: ..." badge: shortened with "…" to the width it gets (at most
    :data:`EDIT_BADGE_MAX_PX`), so a long edit never widens its panel beyond a narrow column
    (a plain label's minimum width is its whole text)."""

    def __init__(self) -> None:
        super().__init__()
        self._full = ""
        self.setSizePolicy(
            QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Preferred
        )

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.updateGeometry()
        self._elide()

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        hint = super().sizeHint()
        width = self.fontMetrics().horizontalAdvance(self._full) + 12
        return QtCore.QSize(min(width, EDIT_BADGE_MAX_PX), hint.height())

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(min(60, self.sizeHint().width()), super().minimumSizeHint().height())

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        room = max(1, self.contentsRect().width() - 8)  # the style sheet's side padding
        shown = self.fontMetrics().elidedText(self._full, QtCore.Qt.TextElideMode.ElideRight, room)
        if shown != self.text():
            self.setText(shown)


class LayerPanel(PanelBase):
    """One layer of the grid: its activation and, beside it, its gradient magnitude.

    Parameters
    ----------
    name
        Qualified module name (as in ``named_modules()``); sent back in ``channel_clicked``.
    parent
        Parent widget.
    module_type
        Module class name for the title (e.g. "Conv2d"); can be set later with
        :meth:`set_module_type`.

    Signals
    -------
    channel_clicked(str, int)
        The user clicked channel ``c`` of a mosaic (activation or gradient side).
    page_requested(str, int)
        The user asked for the previous (-1) or next (+1) page of channels of a layer with
        more channels than one mosaic shows.
    mosaic_width_changed(str, int)
        The activation mosaic may now fill this many screen pixels across (the window picks
        the channels per page from it).
    channels_context_requested(str, list, QPoint)
        Right click on a tile: the channels it is about (the selection when the tile is in
        it, else that tile's channel) and the screen position for a menu. Right click on a
        bar (an ``(N, C)`` output): that unit.
    difference_toggled(str, bool)
        The user switched the "difference" view of this layer on or off.
    tile_clicked(str, int), tiles_context_requested(str, list, QPoint)
        Sent instead of ``channel_clicked`` / ``channels_context_requested`` while the tiles
        are units of another kind than channels (:meth:`set_tile_unit`: concepts).
    """

    channel_clicked = QtCore.Signal(str, int)
    page_requested = QtCore.Signal(str, int)
    mosaic_width_changed = QtCore.Signal(str, int)
    channels_context_requested = QtCore.Signal(str, list, QtCore.QPoint)
    difference_toggled = QtCore.Signal(str, bool)
    tile_clicked = QtCore.Signal(str, int)
    tiles_context_requested = QtCore.Signal(str, list, QtCore.QPoint)

    def __init__(
        self, name: str, parent: QtWidgets.QWidget | None = None, *, module_type: str = ""
    ) -> None:
        super().__init__(name, parent)
        self.name = name
        self._module_type = module_type
        self._shape_text = ""
        self._gradients_visible = True
        self._min_height = MIN_PANEL_HEIGHT
        self.title_label.setToolTip(name)
        #: Channels picked with Ctrl/Shift+click (the tile menu's edits apply to them).
        self._selected_channels: list[int] = []
        self._unit_names: tuple[str, ...] = ()
        self._anchor: int | None = None
        self._edited = ""
        self._difference_shown = False
        #: What the tiles are when they are not channels ("concept"), else "".
        self._tile_unit = ""
        self._build_edit_bar()

        row = QtWidgets.QHBoxLayout()
        self._sides = row
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(6)
        self.activation_slot = _ViewSlot("activation", style.BAR_POSITIVE)
        self.gradient_slot = _ViewSlot("|gradient|", style.BAR_GRADIENT, gradient=True)
        self.activation_slot.resized.connect(self._on_activation_resized)
        self._mosaic_width = 0
        row.addWidget(self.activation_slot, 1)
        row.addWidget(self.gradient_slot, 1)
        self.content.addLayout(row, 1)
        bottom = QtWidgets.QHBoxLayout()
        self._readouts = bottom
        bottom.setContentsMargins(0, 0, 0, 0)
        bottom.setSpacing(2)
        self.status_label = style.readout_label()
        bottom.addWidget(self.edit_badge)
        bottom.addWidget(self.status_label, 1)
        self.page_bar = self._build_page_bar()
        bottom.addWidget(self.page_bar)
        self.content.addLayout(bottom)
        self._narrow = False
        self._arrange = DeferredCall(self, self._arrange_to_width)

        for slot in (self.activation_slot, self.gradient_slot):
            slot.hovered.connect(self._on_slot_hovered)
            slot.hover_left.connect(self._show_description)
            slot.clicked.connect(self._on_slot_clicked)
            slot.select_clicked.connect(self._on_slot_select_clicked)
            slot.context_requested.connect(self._on_slot_context)
        self._update_title()
        self._update_gradient_visibility()

    def _build_edit_bar(self) -> None:
        # The title line becomes: title ... [difference] (shown while there are edits); the
        # "edited: ablate ch 3" badge shows on edited layers.
        outer = self.layout()
        assert isinstance(outer, QtWidgets.QBoxLayout)
        position = outer.indexOf(self.title_label)
        outer.removeWidget(self.title_label)
        layout = QtWidgets.QHBoxLayout()
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.title_label, 1)
        outer.insertLayout(position, layout)
        # The badge goes on the read-out line (see __init__): beside the title it would squeeze
        # a long layer name to nothing; a line of its own would change the panel's height.
        self.edit_badge = _BadgeLabel()
        self.edit_badge.setStyleSheet(
            f"color: white; background: {style.EDITED}; border-radius: 3px; padding: 0 4px;"
        )
        self.edit_badge.setVisible(False)
        self.difference_button = QtWidgets.QToolButton()
        self.difference_button.setText("difference")
        self.difference_button.setCheckable(True)
        self.difference_button.setAutoRaise(True)
        self.difference_button.setToolTip(
            "Show the edited activation minus the unedited one (diverging colours, 0 white)"
        )
        self.difference_button.toggled.connect(
            lambda on: self.difference_toggled.emit(self.name, bool(on))
        )
        self.difference_button.setVisible(False)
        # No taller than the title: showing it must not change the panel's height.
        self.difference_button.setFixedHeight(self.title_label.sizeHint().height())
        layout.addWidget(self.difference_button)

    def _build_page_bar(self) -> QtWidgets.QWidget:
        bar = QtWidgets.QWidget()
        layout = QtWidgets.QHBoxLayout(bar)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.prev_page_button = QtWidgets.QToolButton()
        self.prev_page_button.setArrowType(QtCore.Qt.ArrowType.LeftArrow)
        self.prev_page_button.setToolTip("Previous channels")
        self.prev_page_button.setAutoRaise(True)
        self.prev_page_button.clicked.connect(lambda: self.page_requested.emit(self.name, -1))
        self.page_label = style.caption_label()
        self.next_page_button = QtWidgets.QToolButton()
        self.next_page_button.setArrowType(QtCore.Qt.ArrowType.RightArrow)
        self.next_page_button.setToolTip("Next channels")
        self.next_page_button.setAutoRaise(True)
        self.next_page_button.clicked.connect(lambda: self.page_requested.emit(self.name, 1))
        for widget in (self.prev_page_button, self.page_label, self.next_page_button):
            layout.addWidget(widget)
        bar.setVisible(False)
        return bar

    # -- public setters ------------------------------------------------------------------------
    def set_module_type(self, type_name: str) -> None:
        """Set the module class name shown in the title (e.g. "Conv2d")."""
        if type_name == self._module_type:
            return  # set again with every result (every live frame): nothing to redo
        self._module_type = type_name
        self._update_title()

    def set_unit_names(self, names: tuple[str, ...] | None) -> None:
        """Name a bar layer's units (the model's classes, see
        :func:`actviz.display.layer_views.class_units`): its axis and read-out say "class"."""
        self._unit_names = names or ()
        for slot in (self.activation_slot, self.gradient_slot):
            slot.set_unit_label("class" if names else "unit")

    def set_activation(self, view: LayerView, mosaic: Mosaic | None) -> None:
        """Show the layer's activation.

        Parameters
        ----------
        view
            The activation as prepared by ``actviz.display.layer_views.layer_view``; ``view.data`` is kept
            to read raw values under the mouse.
        mosaic
            The mosaic of ``view.data`` for kind "maps" (ignored for other kinds).
        """
        self._difference_shown = False
        self.activation_slot.show_view(view, mosaic)
        # Back from the difference view: the caption names the activation again.
        self.activation_slot.caption.setText("activation")
        self._update_gradient_visibility()
        self._update_marks()
        # A mosaic's canvas asks for its own height (its width decides it); others get room.
        self.set_minimum_panel_height(
            MIN_MAPS_PANEL_HEIGHT
            if view.kind == "maps"
            else max(self._min_height, MIN_PANEL_HEIGHT)
        )
        self._shape_text = style.format_shape(_data_shape(view))
        self._update_title()
        self._update_page_bar(mosaic if view.kind == "maps" else None)
        self._show_description()

    def set_tile_unit(self, unit: str = "") -> None:
        """Tiles of another kind than channels (``"concept"``): clicks and right clicks send
        :attr:`tile_clicked` / :attr:`tiles_context_requested`, the read-out names the unit,
        the page buttons are off; "" (channels) puts everything back."""
        if unit != self._tile_unit:
            self._tile_unit = unit
            self.set_selected_channels([])
        self.prev_page_button.setHidden(bool(unit))
        self.next_page_button.setHidden(bool(unit))

    def tile_unit(self) -> str:
        """What the tiles are when not channels ("" for channels)."""
        return self._tile_unit

    # -- what-if -------------------------------------------------------------------------------
    def set_edit_badge(self, text: str) -> None:
        """Mark the panel as edited (``text``: "ablate ch 3"); "" removes the mark."""
        if text == self._edited:
            return
        self._edited = text
        self.edit_badge.set_full_text(f"edited: {text}" if text else "")
        self.edit_badge.setToolTip(text)
        self.edit_badge.setVisible(bool(text))
        self.update()  # the frame colour

    def edit_badge_text(self) -> str:
        """What the badge says ("" when the layer has no edit switched on)."""
        return self._edited

    def set_difference_available(self, available: bool, tooltip: str = "") -> None:
        """Offer the difference toggle (a run with an unedited twin), or grey it out."""
        self.difference_button.setVisible(True)
        self.difference_button.setEnabled(available)
        if tooltip:
            self.difference_button.setToolTip(tooltip)

    def hide_difference_toggle(self) -> None:
        """No difference to offer (no edits at all): the toggle goes, unchecked."""
        self.difference_button.blockSignals(True)
        self.difference_button.setChecked(False)
        self.difference_button.blockSignals(False)
        self.difference_button.setVisible(False)

    def difference_wanted(self) -> bool:
        """Whether the user asked for the difference view."""
        return self.difference_button.isChecked() and not self.difference_button.isHidden()

    def set_difference(
        self, view: LayerView, mosaic: Mosaic | None, colormap: str | None = None
    ) -> None:
        """Show ``view`` (edited minus unedited) in the activation side, painted with
        ``colormap`` (None: the diverging map "auto" gives a symmetric mosaic) whatever the
        colour-map choice."""
        slot = self.activation_slot
        choice = slot._choice
        slot._choice = colormap or AUTO
        try:
            slot.show_view(view, mosaic)
        finally:
            slot._choice = choice
        self._difference_shown = True
        slot.caption.setText("edited − unedited")
        slot.caption.setHidden(False)
        self._update_marks()
        self._update_page_bar(mosaic if view.kind == "maps" else None)

    def difference_shown(self) -> bool:
        """Whether the activation side shows the difference now."""
        return self._difference_shown

    def selected_channels(self) -> list[int]:
        """Channels picked with Ctrl/Shift+click, in order."""
        return list(self._selected_channels)

    def set_selected_channels(self, channels: list[int]) -> None:
        """Pick exactly ``channels`` (outlined on the mosaic)."""
        self._selected_channels = sorted(dict.fromkeys(int(c) for c in channels))
        self._anchor = self._selected_channels[-1] if self._selected_channels else None
        self._update_marks()

    def _update_marks(self) -> None:
        slot = self.activation_slot
        canvas, mosaic = slot.image_canvas, slot.mosaic
        if canvas is None:
            return
        rects = []
        if mosaic is not None and slot.view is not None and slot.view.kind == "maps":
            for channel in self._selected_channels:
                if mosaic.shows(channel):
                    y0, x0 = mosaic.tile_origin(channel)
                    rects.append(QtCore.QRectF(x0, y0, mosaic.tile_w, mosaic.tile_h))
        canvas.set_marks(rects)

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        super().paintEvent(event)
        if self._edited and not self.is_selected():
            painter = QtGui.QPainter(self)
            painter.setPen(QtGui.QPen(QtGui.QColor(style.EDITED), 2))
            painter.drawRect(QtCore.QRectF(self.rect()).adjusted(1, 1, -1, -1))

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        # Re-arranging the sides changes the panel's height-for-width: done after this
        # layout pass, so the grid's answer never resizes the panel from inside its resize.
        self._arrange.request()

    def _arrange_to_width(self) -> None:
        self._set_narrow(self.width() < NARROW_PANEL_PX)

    def _set_narrow(self, narrow: bool) -> None:
        """Side by side (activation | gradient; badge, read-out, pages on one line) in a wide
        panel; one above the other in a narrow one (the column beside the channel view), so
        the panel's least width is one canvas, not two plus every read-out."""
        if narrow == self._narrow:
            return
        self._narrow = narrow
        down, across = (
            QtWidgets.QBoxLayout.Direction.TopToBottom,
            QtWidgets.QBoxLayout.Direction.LeftToRight,
        )
        self._sides.setDirection(down if narrow else across)
        self._readouts.setDirection(down if narrow else across)
        left = QtCore.Qt.AlignmentFlag.AlignLeft
        for widget in (self.edit_badge, self.page_bar):
            self._readouts.setAlignment(widget, left if narrow else QtCore.Qt.AlignmentFlag(0))
        # The grid keeps the height-for-width it asked this panel for at this width (cached
        # by the layout item): the other arrangement needs another height.
        self.updateGeometry()

    def is_narrow(self) -> bool:
        """Whether the sides are stacked (the panel is under :data:`NARROW_PANEL_PX` wide)."""
        return self._narrow

    def set_minimum_panel_height(self, height: int) -> None:
        """The least height of the panel; its canvases may ask for more (mosaics do)."""
        if height != self._min_height:
            self._min_height = int(height)
            self.updateGeometry()

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        # A hint, not setMinimumHeight: an explicit minimum would hide the layout's own
        # (a mosaic's height follows its width) from the grid around the panel.
        hint = super().minimumSizeHint()
        # The width does not depend on the sides' arrangement, which follows the width: a
        # least width that grew as the sides went side by side could make a grid column
        # narrower again, and the panel would switch back and forth.
        width = hint.width() if self._narrow else min(hint.width(), NARROW_MIN_PX)
        return QtCore.QSize(max(width, NARROW_MIN_PX), max(hint.height(), self._min_height))

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        hint = super().sizeHint()
        return QtCore.QSize(max(hint.width(), PREFERRED_PANEL_PX), hint.height())

    def mosaic_width(self) -> int:
        """Screen pixels the activation mosaic fills across (0 before the panel is laid out)."""
        canvas = self.activation_slot.image_canvas
        if canvas is None or not canvas.isVisible():
            return 0
        return canvas.image_area_width()

    def _on_activation_resized(self) -> None:
        width = self.mosaic_width()
        if width and width != self._mosaic_width:
            self._mosaic_width = width
            self.mosaic_width_changed.emit(self.name, width)

    def page_text(self) -> str:
        """The page read-out, e.g. ``ch 256-511 of 2048`` ("" when every channel is shown)."""
        return self.page_label.text() if not self.page_bar.isHidden() else ""

    def set_gradient(self, view: LayerView | None, mosaic: Mosaic | None) -> None:
        """Show the gradient magnitude beside the activation; ``None`` hides the gradient side."""
        if view is None:
            self.gradient_slot.clear()
        else:
            self.gradient_slot.show_view(view, mosaic)
        self._update_gradient_visibility()
        self._show_description()

    def set_colormap(self, choice: str) -> None:
        """Use colour map ``choice`` (a name of ``colormaps.COLORMAPS``) for both sides, or
        "auto": per side, the diverging map for a symmetric (signed) mosaic, a sequential one
        otherwise and for |gradient| (:func:`actviz.display.colormaps.resolve`)."""
        self.activation_slot.set_colormap(choice)
        self.gradient_slot.set_colormap(choice)

    def set_gradients_visible(self, visible: bool) -> None:
        """Show or hide the gradient side (it stays hidden while there is no gradient)."""
        self._gradients_visible = bool(visible)
        self._update_gradient_visibility()

    def gradient_shown(self) -> bool:
        """Whether the gradient side is currently part of the panel."""
        return not self.gradient_slot.isHidden()

    def clear(self) -> None:
        """Forget both views and show the empty panel."""
        self.activation_slot.clear()
        self.gradient_slot.clear()
        self._shape_text = ""
        self._update_title()
        self._update_gradient_visibility()
        self._update_page_bar(None)
        self.status_label.setText("")

    # -- helpers ---------------------------------------------------------------------------
    def _update_title(self) -> None:
        name = self.name or "(model)"
        parts = [name]
        if self._module_type:
            parts.append(self._module_type)
        if self._shape_text:
            parts.append(self._shape_text)
        # A narrow column leaves out the type, then the shape, before it cuts the layer's name.
        shorter = [f"{name} · … · {self._shape_text}"] if len(parts) == 3 else []
        fallbacks = [*shorter, f"{name} · …"] if len(parts) > 1 else []
        self.set_title(" · ".join(parts), fallbacks, name)

    def _update_page_bar(self, mosaic: Mosaic | None) -> None:
        if mosaic is not None and mosaic.order is not None:
            # Tiles in an order of their own: the bar says so (even on one page), with ranks.
            start, total = mosaic.position, len(mosaic.order.channels)
            end = start + mosaic.channels
            self.page_label.setText(f"{mosaic.order.label}: {start + 1}-{end} of {total}")
            self.page_label.setToolTip(
                f"Tiles in order {mosaic.order.label} (ranks {start + 1}-{end}); each tile "
                "is labelled with its channel"
            )
            self.prev_page_button.setEnabled(start > 0)
            self.next_page_button.setEnabled(end < total)
            self.page_bar.setVisible(True)
            return
        if self.page_label.toolTip():  # (each setToolTip sends an event, same text or not)
            self.page_label.setToolTip("")
        # Only layers with more channels than one mosaic holds get the page bar.
        if mosaic is None or mosaic.channels >= mosaic.total_channels:
            self.page_bar.setVisible(False)
            return
        first, last, total = mosaic.first_channel, mosaic.last_channel, mosaic.total_channels
        self.page_label.setText(f"ch {first}-{last} of {total}")
        self.prev_page_button.setEnabled(first > 0)
        self.next_page_button.setEnabled(last + 1 < total)
        self.page_bar.setVisible(True)

    def _update_gradient_visibility(self) -> None:
        show = self._gradients_visible and self.gradient_slot.view is not None
        self.gradient_slot.setHidden(not show)
        # With one side only, its caption says nothing the title does not.
        self.activation_slot.caption.setHidden(not show)
        self.gradient_slot.caption.setHidden(not show)

    def _show_description(self) -> None:
        view = self.activation_slot.view
        self.status_label.setText(view.description if view is not None else "")

    def hover_text(self, loc: _Location, *, short: bool = False) -> str:
        """The read-out for a data location, e.g. ``ch 12  (x=3, y=7)  value 0.532``;
        ``short``: the same numbers in fewer characters (``ch 12 (3,7) 0.532 |g| 0.1``), for
        a narrow panel (the column beside the channel view)."""
        if loc.kind == "maps":
            unit = self._tile_unit or "ch"
            where = (
                f"{unit} {loc.channel} ({loc.x},{loc.y})"
                if short
                else f"{unit} {loc.channel}  (x={loc.x}, y={loc.y})"
            )
        elif loc.kind == "heatmap":
            where = f"({loc.y},{loc.x})" if short else f"(row={loc.y}, col={loc.x})"
        elif self._unit_names and loc.channel is not None and loc.channel < len(self._unit_names):
            where = f"class {loc.channel}: {self._unit_names[loc.channel]}"
        else:
            where = f"unit {loc.channel}"
        parts = [where]
        value = _value_at(self.activation_slot.view, loc)
        if value is not None:
            parts.append(_short_value(value) if short else f"value {style.format_value(value)}")
        if self.gradient_shown():
            grad = _value_at(self.gradient_slot.view, loc)
            if grad is not None:
                parts.append(
                    f"|g| {_short_value(grad)}" if short else f"|grad| {style.format_value(grad)}"
                )
        return (" " if short else "  ").join(parts)

    def _on_slot_hovered(self, loc: _Location) -> None:
        # Where the whole read-out does not fit, its short form, shortened with "…" at worst.
        self.status_label.set_text(self.hover_text(loc), (self.hover_text(loc, short=True),))

    def _on_slot_clicked(self, loc: _Location) -> None:
        if loc.kind == "maps" and loc.channel is not None:
            if self._selected_channels:
                self.set_selected_channels([])
            if self._tile_unit:
                self.tile_clicked.emit(self.name, int(loc.channel))
                return
            self.channel_clicked.emit(self.name, int(loc.channel))

    def _on_slot_select_clicked(self, loc: _Location, extend: bool) -> None:
        if loc.kind != "maps" or loc.channel is None:
            return
        channel = int(loc.channel)
        chosen = list(self._selected_channels)
        if extend and self._anchor is not None:
            low, high = sorted((self._anchor, channel))
            chosen = sorted(set(chosen) | set(range(low, high + 1)))
            anchor = self._anchor
        elif channel in chosen:
            chosen.remove(channel)
            anchor = channel
        else:
            chosen.append(channel)
            anchor = channel
        self.set_selected_channels(chosen)
        self._anchor = anchor

    def _on_slot_context(self, loc: _Location, screen: QtCore.QPoint) -> None:
        if loc.channel is None or loc.kind not in ("maps", "bars"):
            return
        channel = int(loc.channel)
        if loc.kind == "bars":  # a unit of an (N, C) output: its channel
            self.channels_context_requested.emit(self.name, [channel], screen)
            return
        if channel not in self._selected_channels:
            self.set_selected_channels([channel])
        if self._tile_unit:
            self.tiles_context_requested.emit(self.name, self.selected_channels(), screen)
            return
        self.channels_context_requested.emit(self.name, self.selected_channels(), screen)


def _short_value(value: float) -> str:
    """:func:`~actviz.ui.panels.style.format_value` in fewer characters (a narrow read-out):
    three significant digits in scientific notation, its exponent without padding
    (``2.74e-6`` for ``2.743e-06``)."""
    text = style.format_value(value)
    if "e" not in text or "n" in text:  # ordinary magnitudes, nan and inf stay
        return text
    mantissa, exponent = f"{float(value):.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"
