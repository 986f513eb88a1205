"""How feature maps are shown, without widgets: :class:`DisplaySettings` (colour map,
normalisation, Grad-CAM layer, mosaic pages and channel orders), owned by the session,
announced through ``view_changed(what)`` and reset with the model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actviz.display.colormaps import AUTO
from actviz.display.mosaic import ChannelOrder, page_start


class DisplaySettings:
    """The display settings of one session; ``changed(what)`` announces each change, with
    ``what`` the name of the setting (its attribute name, as the session's)."""

    def __init__(self, changed: Callable[[str], Any]) -> None:
        self._changed = changed
        #: The colour-map choice of the feature maps ("auto": one per layer).
        self.colormap = AUTO
        self.normalize = "channel"
        self.gradcam_layer: str | None = None
        # {layer: first channel} of the mosaic page the user turned to; cleared with the model.
        self.channel_pages: dict[str, int] = {}
        # {layer: channels per page}: the window's choice from its panels' widths.
        self.page_channels: dict[str, int] = {}
        #: ``{layer: ChannelOrder}``: tile orders of their own (by effect); cleared with the model.
        self.channel_orders: dict[str, ChannelOrder] = {}

    def reset_for_model(self, gradcam_layer: str | None) -> None:
        """Forget the old model's pages, sizes and orders; take ``gradcam_layer`` (unannounced)."""
        self.gradcam_layer = gradcam_layer
        self.channel_pages, self.page_channels, self.channel_orders = {}, {}, {}

    def set_view(
        self,
        *,
        colormap: str | None = None,
        normalize: str | None = None,
        gradcam_layer: str | None | type[Ellipsis] = ...,
    ) -> None:
        """Change view settings (None / ``...`` leaves one as it is); announce each change."""
        asked = {"colormap": colormap, "normalize": normalize, "gradcam_layer": gradcam_layer}
        unset = {"colormap": None, "normalize": None, "gradcam_layer": ...}
        changed = [k for k, v in asked.items() if v is not unset[k] and v != getattr(self, k)]
        for what in changed:
            setattr(self, what, asked[what])
        for what in changed:
            self._changed(what)

    def _put(self, what: str, layer: str, value: Any) -> None:
        """Set ``layer``'s entry of the setting ``what`` (None: remove it); announce a change."""
        held = getattr(self, what)
        if value is None:
            if held.pop(layer, None) is None:
                return
        elif held.get(layer) == value:
            return
        else:
            held[layer] = value
        self._changed(what)

    def set_channel_page(self, layer: str, first: int) -> None:
        """Show the mosaic page of ``layer`` that starts at channel ``first``."""
        self._put("channel_pages", layer, first)

    def set_channel_order(self, layer: str, order: ChannelOrder | None) -> None:
        """Tile ``layer``'s channels in ``order`` (None: the natural order) and announce it.
        The page shown is the one holding the channel ``channel_pages[layer]`` names."""
        self._put("channel_orders", layer, order)

    def page_start(self, layer: str, size: int) -> int:
        """Where the page of ``size`` channels shown of ``layer`` starts: a channel, or a
        position in its channel order (:func:`~actviz.display.mosaic.page_start`)."""
        return page_start(self.channel_pages.get(layer, 0), size, self.channel_orders.get(layer))

    def set_page_channels(self, layer: str, count: int) -> None:
        """Channels per mosaic page of ``layer`` (the window's choice from the panel width)."""
        self._put("page_channels", layer, count)
