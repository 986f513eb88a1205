"""The layer panels as the "Channels that matter" dock changes them: :class:`PanelMarks`
outlines each ranked layer's top channels (turning to the page holding the first) and sorts
its tiles by effect, and puts back what was there before.
"""

from __future__ import annotations

from typing import Any

from actviz.analysis.concepts import layer_effects as units
from actviz.display.mosaic import ChannelOrder, page_start

__all__ = ["ORDER_LABEL", "PanelMarks"]

#: What the page read-out of a sorted layer panel calls the order.
ORDER_LABEL = "by effect"


class PanelMarks:
    """The outlines and orders one effects dock gave the window's layer panels."""

    def __init__(self, host: Any, session: Any) -> None:
        self.host = host
        self.session = session
        #: Layers sorted by effect, with the channel their page held before.
        self.sorted: dict[str, int | None] = {}
        #: ``{layer: channels}`` outlined by "Mark the top channels" (cleared when unticked).
        self.marked: dict[str, list[int]] = {}

    def mark(self, eff: Any, k: int) -> None:
        """Outline the top ``k`` channels of each layer of ``eff`` in its panel, turning a
        mosaic to the page holding the first."""
        s = self.session
        for layer in eff.layers:
            panel = self.host.panel(layer)
            if panel is None:
                continue
            top = list(eff.top_channels(layer, k))
            panel.set_selected_channels(top)
            self.marked[layer] = panel.selected_channels()
            if not top or units.dictionary_of(eff, layer) is not None:
                continue  # concept tiles have no pages: the most active come first
            size = max(1, self.host.page_channels(layer))
            order = s.channel_orders.get(layer)
            if page_start(top[0], size, order) != s.page_start(layer, size):
                s.set_channel_page(layer, top[0])
                self.host.refresh_panel(layer)

    def unmark(self) -> None:
        """Clear the outlines :meth:`mark` drew, where the user has not picked other channels
        since."""
        marked, self.marked = self.marked, {}
        for layer, channels in marked.items():
            panel = self.host.panel(layer)
            if panel is not None and panel.selected_channels() == channels:
                panel.set_selected_channels([])

    def sort(self, eff: Any, result: Any) -> None:
        """Give each layer of ``eff`` with a mosaic in ``result`` its order by effect, keeping
        the page (its place in the order) the user is on; the first time, the first page."""
        s = self.session
        for layer in eff.layers:
            shown = result.layers.get(layer)
            if shown is None or shown.mosaic is None or units.dictionary_of(eff, layer):
                continue  # bars, a token view, concepts (most active first): not ordered
            order = ChannelOrder(tuple(int(c) for c in eff[layer].order()), ORDER_LABEL)
            if not order.fits(shown.mosaic.total_channels):
                continue
            old = s.channel_orders.get(layer)
            if order == old:
                continue
            if layer in self.sorted and old is not None:
                size = max(1, self.host.page_channels(layer))
                at = min(s.page_start(layer, size), len(order.channels) - 1)
            else:
                self.sorted[layer] = s.channel_pages.get(layer)
                at = 0
            s.set_channel_order(layer, order)
            s.set_channel_page(layer, order.channels[at])
            self.host.refresh_panel(layer)

    def unsort(self) -> None:
        """Put back the natural order and the page shown before in every sorted panel."""
        s = self.session
        sorted_, self.sorted = self.sorted, {}
        for layer, before in sorted_.items():
            s.set_channel_order(layer, None)
            s.set_channel_page(layer, before or 0)
            self.host.refresh_panel(layer)
