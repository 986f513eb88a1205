"""The channel view and the mosaic pages: channels opened and stepped, pages turned and sized."""

from __future__ import annotations

import statistics
from typing import Any

from PySide6.QtCore import QObject

from actviz.display.mosaic import MIN_PAGE_CHANNELS, page_channels_for
from actviz.ui.panels.deferred import DeferredCall

#: Share of the Layers tab's width the channel view takes when it opens.
CHANNEL_VIEW_SHARE = 0.62


class ChannelPages:
    """The channel view's channel and the mosaic pages of ``display``'s panels."""

    def __init__(self, display: Any, parent: QObject) -> None:
        self.display, self.session = display, display.session
        #: ``(layer, channel)`` shown in the channel view (None: none opened).
        self.opened: tuple[str, int] | None = None
        # Panels' new mosaic widths, applied together on the next pass.
        self._new_widths: dict[str, int] = {}
        self._apply_widths_soon = DeferredCall(parent, self._apply_new_widths)
        display.channel_view.step_requested.connect(self.step_channel)
        # In the pass that sent the widths: laid out and painted once, at the pages' heights.
        display.layers_grid.after_pass = self._apply_new_widths

    def keep_open(self) -> None:
        """After a new result: the channel opened shows its new values (closed if it is gone)."""
        if self.display.channel_box.isVisible() and self.opened is not None:
            if not self.open_channel(*self.opened):
                self.display.channel_box.setVisible(False)
                self.opened = None

    def open_channel(self, name: str, channel: int) -> bool:
        """Show channel ``channel`` of layer ``name`` large, beside its gradient magnitude."""
        if (result := self.session.result) is None or name not in result.layers:
            return False
        layer = result.layers[name]
        view = layer.view
        if view is None or view.kind != "maps" or not 0 <= channel < view.data.shape[0]:
            return False
        gv, shown = layer.grad_view, self.display.channel_view
        grad = gv.data[channel] if gv is not None and gv.kind == "maps" else None
        shown.set_colormap(self.display.colormap)
        shown.set_gradients_visible(self.display.gradients_visible)
        data, image = view.data, result.image
        shown.set_channel(
            name, channel, data[channel], grad, channels=len(data), signed=view.signed, image=image
        )
        self.opened = (name, channel)
        # The layer's mosaic shows the page holding the channel opened (keys step past pages).
        before = self.page_first(name)
        if self.session.channel_pages.get(name, 0) != channel:
            self.session.set_channel_page(name, channel)
        if name in self.display.layer_panels and self.page_first(name) != before:
            self.display.grid.show_now(name, layer)
        if not self.display.channel_box.isVisible():
            # Its share set first: shown, the Layers tab is laid out once, at its new width.
            width = max(self.display.layers_splitter.width(), 600)
            share = int(width * CHANNEL_VIEW_SHARE)
            self.display.layers_splitter.setSizes([width - share, share])
            self.display.channel_box.setVisible(True)
        self.display.select_layer(name)
        return True

    def step_channel(self, step: int) -> bool:
        """Open the previous (``step`` -1) or next (+1) channel, in the layer's order."""
        if self.opened is None:
            return False
        name, channel = self.opened
        order = self.session.channel_orders.get(name)
        at = order.position(channel) if order is not None else None
        if order is not None and at is not None:
            if not 0 <= at + step < len(order.channels):
                return False
            return self.open_channel(name, order.channels[at + step])
        return self.open_channel(name, channel + step)

    def turn_page(self, name: str, step: int) -> bool:
        """Show the previous (-1) or next (+1) page of ``name`` (no new run); False if none."""
        if (layer := self._layer(name)) is None or layer.mosaic is None:
            return False
        first = self.page_first(name) + step * self.page_size(name)
        order = self.session.channel_orders.get(name)
        count = len(order.channels) if order is not None else layer.mosaic.total_channels
        if not 0 <= first < count:
            return False
        # Pages of the layer's own order (sorted): its channel at that place.
        self.session.set_channel_page(name, order.channels[first] if order is not None else first)
        if name in self.display.layer_panels:
            self.display.grid.show_now(name, layer)
        return True

    def page_size(self, name: str) -> int:
        """Channels per mosaic page of layer ``name`` (the panel's, else the mosaic's)."""
        if (size := self.session.page_channels.get(name)) is None:
            layer = self._layer(name)
            mosaic = layer.mosaic if layer is not None else None
            size = mosaic.page_size if mosaic is not None else 1
        return max(1, int(size))

    def page_first(self, name: str) -> int:
        """First channel (or order position) of ``name``'s page the user turned or stepped to."""
        return self.session.page_start(name, self.page_size(name))

    def _layer(self, name: str) -> Any:
        result = self.session.result
        return result.layers.get(name) if result is not None else None

    def on_mosaic_width_changed(self, name: str, width: int) -> None:
        """Re-page ``name`` for ``width`` on the next pass (a resize sends many in a row)."""
        self._new_widths[name] = width
        self._apply_widths_soon.request()

    def _apply_new_widths(self) -> bool:
        """Re-page the panels whose mosaic width changed; True if any page size changed."""
        widths, self._new_widths, changed = self._new_widths, {}, False
        # Panels not filled yet get their row-mates' width: filled once, not again for it.
        guess = statistics.mode(widths.values()) if widths else 0
        if guess:  # and the next run's new layers come paged for it
            self.session.set_mosaic_width(guess)
        for name, panel in self.display.layer_panels.items():
            if guess and name not in widths and not panel.mosaic_width():
                widths[name] = guess
        for name, width in widths.items():  # tiles readable in that width (no new run)
            layer = self._layer(name)
            if layer is None or layer.view is None or layer.view.kind != "maps":
                continue
            total, height, tile_w = layer.view.data.shape
            size = page_channels_for(total, height, tile_w, width, min_channels=MIN_PAGE_CHANNELS)
            if size != self.session.page_channels.get(name):
                self.session.set_page_channels(name, size)
                self.display.grid.refresh(name)  # with the other waiting updates, on screen first
                changed = True
        return changed
