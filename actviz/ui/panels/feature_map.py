"""LayerPanel: one layer's activation (and gradient magnitude) in a cell of the layer grid, with
its small bars: the page buttons under its mosaic and the "edited" badge."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.colormaps import AUTO
from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.view_slot import Location, TileSelection, ViewSlot, data_shape, hover_text

if TYPE_CHECKING:  # the panels never import torch at run time; views.py does
    from actviz.display.layer_views import LayerView
    from actviz.display.mosaic import Mosaic

MIN_PANEL_HEIGHT = 220
#: A panel of mosaics may be this low: its canvases ask for the height their width needs.
MIN_MAPS_PANEL_HEIGHT = 120
#: Below this width a panel stacks its activation over its gradient (and its read-outs).
NARROW_PANEL_PX = 440
NARROW_MIN_PX = 150  #: A panel's least width, its sides stacked (one canvas, the page buttons).
#: The width a panel prefers (two canvases of 240 px side by side), whatever its arrangement.
PREFERRED_PANEL_PX = 500
#: The "edited: ..." badge is shortened with "…" past this width (its tooltip has it all).
EDIT_BADGE_MAX_PX = 260


class BadgeLabel(QtWidgets.QLabel):
    """The "edited: ..." badge, shortened with "…" so a long edit never widens its panel."""

    def __init__(self) -> None:
        super().__init__(styleSheet=style.EDITED_BADGE, visible=False)  # hidden until it has a text
        self._full = ""

    def show_edit(self, text: str) -> None:
        """Say which edit the layer has ("" hides the badge)."""
        self._full = f"edited: {text}" if text else ""
        self.updateGeometry()
        self._elide()
        self.setToolTip(text)
        self.setVisible(bool(text))

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


class PageBar(QtWidgets.QWidget):
    """Previous / next page of a mosaic's channels and where the page is (hidden on one page)."""

    requested = QtCore.Signal(int)  #: -1 (previous page) or +1 (next page).

    def __init__(self) -> None:
        super().__init__()
        layout = style.bare_box(self, spacing=2)
        arrow = QtCore.Qt.ArrowType
        self.prev_button = style.tool_button(
            arrow.LeftArrow, "Previous channels", lambda: self.requested.emit(-1), raised=False
        )
        self.label = style.caption_label()
        self.next_button = style.tool_button(
            arrow.RightArrow, "Next channels", lambda: self.requested.emit(1), raised=False
        )
        for widget in (self.prev_button, self.label, self.next_button):
            layout.addWidget(widget)
        self.setVisible(False)

    def text(self) -> str:
        """Where the page is, e.g. ``ch 256-511 of 2048`` ("" when every channel is shown)."""
        return self.label.text() if not self.isHidden() else ""

    def show_page(self, mosaic: Mosaic | None, unit: str = "") -> None:
        """Say which page of its channels (``unit``: "concept"...) ``mosaic`` shows (None: no
        mosaic, no bar)."""
        order, text, tip = mosaic.order if mosaic is not None else None, "", ""
        unit = unit or "channel"
        if self.prev_button.toolTip() != (previous := f"Previous {unit}s"):  # (as below)
            self.prev_button.setToolTip(previous)
            self.next_button.setToolTip(f"Next {unit}s")
        if mosaic is not None and order is not None:
            # Tiles in an order of their own: the bar says so (even on one page), with ranks.
            start, total = mosaic.position, len(order.channels)
            end = start + mosaic.channels
            text = f"{order.label}: {start + 1}-{end} of {total}"
            tip = f"Tiles in order {order.label} (ranks {start + 1}-{end}); each tile is labelled "
            tip += f"with its {unit}"
        elif mosaic is not None and mosaic.channels < mosaic.total_channels:
            # Other layers get the bar only with more channels than one mosaic holds.
            start, end, total = mosaic.first_channel, mosaic.last_channel + 1, mosaic.total_channels
            text = f"ch {start}-{end - 1} of {total}"
        if self.label.toolTip() != tip:  # (each setToolTip sends an event, same text or not)
            self.label.setToolTip(tip)
        if text:
            self.label.setText(text)
            self.prev_button.setEnabled(start > 0)
            self.next_button.setEnabled(end < total)
        self.setVisible(bool(text))


class LayerPanel(PanelBase):
    """One layer of the grid: its activation beside its gradient magnitude.

    Every signal carries the layer ``name`` first. ``mosaic_width_changed``: the pixels the
    mosaic may fill; ``tile_clicked`` / ``tiles_context_requested`` replace the channel signals
    while the tiles are another unit (:meth:`set_tile_unit`)."""

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
        self._module_type, self._shape_text = module_type, ""  # the title's
        self._gradients_visible, self._min_height = True, MIN_PANEL_HEIGHT
        self.title_label.setToolTip(name)
        #: Channels picked with Ctrl/Shift+click (the tile menu's edits apply to them).
        self._selection = TileSelection()
        self._unit_names: tuple[str, ...] = ()
        self._edited, self._difference_shown = "", False
        self._tile_unit = ""  #: What the tiles are when they are not channels ("concept"), else "".
        self.difference_button = QtWidgets.QToolButton(
            text="difference",
            checkable=True,
            autoRaise=True,
            visible=False,  # shown while there are edits
            toolTip="Show the edited activation minus the unedited one "
            "(diverging colours, 0 white)",
        )
        # No taller than the title: showing it must not change the panel's height.
        self.difference_button.setFixedHeight(self.title_label.sizeHint().height())
        self.difference_button.toggled.connect(
            lambda on: self.difference_toggled.emit(self.name, bool(on))
        )
        self.title_row.addWidget(self.difference_button)

        row = self._sides = style.bare_box(spacing=6)
        self.activation_slot = ViewSlot("activation", style.BAR_POSITIVE)
        self.gradient_slot = ViewSlot("|gradient|", style.BAR_GRADIENT, gradient=True)
        self.activation_slot.resized.connect(self._on_activation_resized)
        self._mosaic_width = 0
        row.addWidget(self.activation_slot, 1)
        row.addWidget(self.gradient_slot, 1)
        self.content.addLayout(row, 1)
        bottom = self._readouts = style.bare_box(spacing=2)
        self.status_label = style.readout_label()
        # The badge goes on the read-out line: beside the title it would squeeze a long name.
        self.edit_badge = BadgeLabel()
        bottom.addWidget(self.edit_badge)
        bottom.addWidget(self.status_label, 1)
        self.page_bar = PageBar()
        self.page_bar.requested.connect(lambda step: self.page_requested.emit(self.name, step))
        bottom.addWidget(self.page_bar)
        # As high with the page bar as without, so it coming or going moves no panel below.
        self.status_label.setMinimumHeight(self.page_bar.sizeHint().height())
        self.content.addLayout(bottom)
        self._narrow = False
        self._arrange = DeferredCall(self, lambda: self.arrange_for(self.width()))

        for slot in (self.activation_slot, self.gradient_slot):
            slot.hovered.connect(self._on_slot_hovered)
            slot.hover_left.connect(self._show_description)
            slot.clicked.connect(self._on_slot_clicked)
            slot.select_clicked.connect(self._on_slot_select_clicked)
            slot.context_requested.connect(self._on_slot_context)
        self._update_title()
        self._update_gradient_visibility()

    def set_module_type(self, type_name: str) -> None:
        """Set the module class name shown in the title (e.g. "Conv2d")."""
        if type_name == self._module_type:
            return  # set again with every result (every live frame): nothing to redo
        self._module_type = type_name
        self._update_title()

    def set_unit_names(self, names: tuple[str, ...] | None) -> None:
        """Name a bar layer's units (the model's classes): axis and read-out say "class"."""
        self._unit_names = names or ()
        for slot in (self.activation_slot, self.gradient_slot):
            slot.set_unit_label("class" if names else "unit")

    def set_activation(self, view: LayerView, mosaic: Mosaic | None) -> None:
        """Show the layer's activation (``mosaic``: for kind "maps")."""
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
        if (shape_text := style.format_shape(data_shape(view))) != self._shape_text:
            self._shape_text = shape_text
            self._update_title()  # not with every live frame: their shape is the same
        self.page_bar.show_page(mosaic if view.kind == "maps" else None, self._tile_unit)
        self._show_description()

    def expect_mosaic_shape(self, shape: tuple[int, int]) -> None:
        """Take the height a later mosaic of ``shape`` needs now, so filling it moves nothing."""
        for slot in (self.activation_slot, self.gradient_slot):
            if not slot.expect_mosaic_shape(shape):
                continue  # (a refresh on the same page: marks, colours) no height to take
            # Laid out up to the panel now: the grid's pass that re-paged sees the new height.
            widget = slot.image_canvas
            while widget is not None and widget is not self:
                if (widget := widget.parentWidget()) is not None and widget.layout() is not None:
                    widget.layout().activate()

    def set_tile_unit(self, unit: str = "") -> None:
        """Tiles of another unit (``"concept"``; "" for channels): tile signals, no page buttons."""
        if unit != self._tile_unit:
            self._tile_unit = unit
            self.set_selected_channels([])
        for button in (self.page_bar.prev_button, self.page_bar.next_button):
            button.setHidden(bool(unit))

    def tile_unit(self) -> str:
        """What the tiles are when not channels ("" for channels)."""
        return self._tile_unit

    def set_edit_badge(self, text: str) -> None:
        """Mark the panel as edited (``text``: "ablate ch 3"); "" removes the mark."""
        if text == self._edited:
            return
        self._edited = text
        self.edit_badge.show_edit(text)
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
        """No difference to offer (no edits at all): the toggle goes, unchecked (no signal)."""
        button = self.difference_button
        if button.isHidden() and not button.isChecked():
            return  # withdrawn already (every live frame without edits asks again)
        with QtCore.QSignalBlocker(button):
            button.setChecked(False)
        button.setVisible(False)

    def difference_wanted(self) -> bool:
        """Whether the user asked for the difference view."""
        return self.difference_button.isChecked() and not self.difference_button.isHidden()

    def set_difference(
        self, view: LayerView, mosaic: Mosaic | None, colormap: str | None = None
    ) -> None:
        """Show ``view`` (edited minus unedited) in the activation side, in ``colormap``."""
        slot = self.activation_slot
        slot.show_view(view, mosaic, colormap or AUTO)
        self._difference_shown = True
        slot.caption.setText("edited − unedited")
        slot.caption.setHidden(False)
        self._update_marks()
        self.page_bar.show_page(mosaic if view.kind == "maps" else None, self._tile_unit)

    def difference_shown(self) -> bool:
        """Whether the activation side shows the difference now."""
        return self._difference_shown

    def selected_channels(self) -> list[int]:
        """Channels picked with Ctrl/Shift+click, in order."""
        return list(self._selection.channels)

    def set_selected_channels(self, channels: list[int]) -> None:
        """Pick exactly ``channels`` (outlined on the mosaic)."""
        self._selection.set(channels)
        self._update_marks()

    def _update_marks(self) -> None:
        self.activation_slot.mark_channels(self._selection.channels)

    def _frame_colour(self) -> str | None:
        return super()._frame_colour() or (style.EDITED if self._edited else None)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        # After this layout pass: the arrangement changes the panel's height-for-width.
        self._arrange.request()

    def arrange_for(self, width: int) -> None:
        """Sides and read-outs side by side at ``width`` (or wider), else one above the other."""
        if (narrow := width < NARROW_PANEL_PX) == self._narrow:
            return
        self._narrow = narrow
        direction = QtWidgets.QBoxLayout.Direction
        for box in (self._sides, self._readouts):
            box.setDirection(direction.TopToBottom if narrow else direction.LeftToRight)
        left = QtCore.Qt.AlignmentFlag.AlignLeft
        for widget in (self.edit_badge, self.page_bar):
            self._readouts.setAlignment(widget, left if narrow else QtCore.Qt.AlignmentFlag(0))
        self.updateGeometry()  # the layout item caches the other arrangement's height

    def is_narrow(self) -> bool:
        """Whether the sides are stacked (the panel is under :data:`NARROW_PANEL_PX` wide)."""
        return self._narrow

    def set_minimum_panel_height(self, height: int) -> None:
        """The least height of the panel; its canvases may ask for more (mosaics do)."""
        if height != self._min_height:
            self._min_height = int(height)
            self.updateGeometry()

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        # A hint, not setMinimumHeight (it hides height-for-width); a width following the
        # arrangement would make the panel switch back and forth.
        hint = super().minimumSizeHint()
        width = hint.width() if self._narrow else min(hint.width(), NARROW_MIN_PX)
        return QtCore.QSize(max(width, NARROW_MIN_PX), max(hint.height(), self._min_height))

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        hint = super().sizeHint()
        return QtCore.QSize(max(hint.width(), PREFERRED_PANEL_PX), hint.height())

    def mosaic_width(self) -> int:
        """Screen pixels the activation mosaic fills across (0 before the panel is laid out)."""
        return self.activation_slot.image_width()

    def _on_activation_resized(self) -> None:
        if (width := self.mosaic_width()) and width != self._mosaic_width:
            self._mosaic_width = width
            self.mosaic_width_changed.emit(self.name, width)

    def set_gradient(self, view: LayerView | None, mosaic: Mosaic | None) -> None:
        """Show the gradient magnitude beside the activation; ``None`` hides the gradient side."""
        if view is None:
            self.gradient_slot.clear()
        else:
            self.gradient_slot.show_view(view, mosaic)
        self._update_gradient_visibility()
        self._show_description()

    def set_colormap(self, choice: str) -> None:
        """Use colour map ``choice`` for both sides ("auto": per side)."""
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
        self.page_bar.show_page(None)
        self.status_label.setText("")

    def _update_title(self) -> None:
        name = self.name or "(model)"
        parts = [name, *(part for part in (self._module_type, self._shape_text) if part)]
        # A narrow column leaves out the type, then the shape, before it cuts the layer's name.
        shorter = [f"{name} · … · {self._shape_text}"] if len(parts) == 3 else []
        fallbacks = [*shorter, f"{name} · …"] if len(parts) > 1 else []
        self.set_title(" · ".join(parts), fallbacks, name)

    def _update_gradient_visibility(self) -> None:
        show = self._gradients_visible and self.gradient_slot.view is not None
        self.gradient_slot.setHidden(not show)
        # With one side only, its caption says nothing the title does not.
        self.activation_slot.caption.setHidden(not show)
        self.gradient_slot.caption.setHidden(not show)

    def _show_description(self) -> None:
        self.status_label.setText(getattr(self.activation_slot.view, "description", ""))

    def hover_text(self, loc: Location, *, short: bool = False) -> str:
        """The read-out for a data location (:func:`~actviz.ui.panels.view_slot.hover_text`)."""
        gradient = self.gradient_slot.view if self.gradient_shown() else None
        return hover_text(
            loc,
            self.activation_slot.view,
            gradient,
            tile_unit=self._tile_unit,
            unit_names=self._unit_names,
            short=short,
        )

    def _on_slot_hovered(self, loc: Location) -> None:
        # Where the whole read-out does not fit, its short form, shortened with "…" at worst.
        self.status_label.set_text(self.hover_text(loc), (self.hover_text(loc, short=True),))

    def _on_slot_clicked(self, loc: Location) -> None:
        if loc.kind == "maps" and loc.channel is not None:
            if self._selection.channels:
                self.set_selected_channels([])
            signal = self.tile_clicked if self._tile_unit else self.channel_clicked
            signal.emit(self.name, int(loc.channel))

    def _on_slot_select_clicked(self, loc: Location, extend: bool) -> None:
        if loc.kind == "maps" and loc.channel is not None:
            self._selection.click(int(loc.channel), extend)
            self._update_marks()

    def _on_slot_context(self, loc: Location, screen: QtCore.QPoint) -> None:
        if loc.channel is None or loc.kind not in ("maps", "bars"):
            return
        channel = int(loc.channel)
        if loc.kind == "bars":  # a unit of an (N, C) output: its channel
            self.channels_context_requested.emit(self.name, [channel], screen)
            return
        if channel not in self._selection.channels:
            self.set_selected_channels([channel])
        signal = (
            self.tiles_context_requested if self._tile_unit else self.channels_context_requested
        )
        signal.emit(self.name, self.selected_channels(), screen)
