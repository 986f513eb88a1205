"""The Compare tab's difference panels, painted lazily: in view first, then those near it."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from actviz.display.colormaps import AUTO
from actviz.display.difference import DIFFERENCE_CMAP
from actviz.display.mosaic import MIN_PAGE_CHANNELS, page_channels_for
from actviz.display.prepared import PreparedLayer
from actviz.display.repage import with_page
from actviz.ui.compare.view import CompareView
from actviz.ui.panels.deferred import DeferredCall, TurnBudget
from actviz.ui.panels.feature_map import MIN_PANEL_HEIGHT
from actviz.workspace.run_request import CompareOutcome

#: How far outside the view (a fraction of its height) panels are painted, one per pass.
PAINT_MARGIN = 0.5
#: Seconds a turn's passes may paint panels (past the first); the rest follow on the next turns.
PAINT_BUDGET_S = 0.025


def panel_title(layer: PreparedLayer) -> str:
    """A difference panel's module type: ``Conv2d · A − B``."""
    return f"{layer.module_type} · A − B" if layer.module_type else "A − B"


class DiffPainter(QObject):
    """Paints ``view``'s difference panels lazily, with their pages and page sizes."""

    def __init__(self, view: CompareView, page: QWidget, parent: QObject) -> None:
        super().__init__(parent)
        self.view, self.page = view, page
        self.outcome: CompareOutcome | None = None
        self.pages: dict[str, int] = {}
        self.page_sizes: dict[str, int] = {}
        # Painted once near the view with the tab on screen (a hidden canvas keeps its size).
        self.unpainted: set[str] = set()
        self._reveal_name: str | None = None  # the first divergence, scrolled to once shown
        self._painting = self._closed = False
        self._paint_soon = DeferredCall(self, self.paint_in_view)
        self._margin_soon = DeferredCall(self, lambda: self.paint_in_view(near=True))
        self._widths_soon = DeferredCall(self, self._apply_widths)
        self._new_widths: dict[str, int] = {}
        # A first paint builds canvases (~20 ms): each is expected to cost what the last did.
        self._turn, self._cost = TurnBudget(self), 0.0
        view.page_requested.connect(self.turn_page)
        view.mosaic_width_changed.connect(self._on_width_changed)
        # Scrolled: painted at once (before the area is drawn); resized: once laid out.
        view.diffs.scrolled.connect(self.paint_in_view)
        view.diffs.resized.connect(self._paint_soon.request)

    def show(self, outcome: CompareOutcome, reveal: str | None) -> None:
        """Lay out ``outcome``'s panels and paint those in view (scrolled to ``reveal``)."""
        self.outcome = outcome
        order = list(outcome.differences)
        self.view.diffs.layout_panels(order)
        self.unpainted, self._reveal_name = set(order), reveal if reveal in order else None
        self.paint_in_view()
        for name in self.waiting():
            self.view.diffs.blank(name, panel_title(outcome.differences[name]))

    def clear(self) -> None:
        """Forget the comparison shown."""
        self.outcome = self._reveal_name = None
        self.unpainted = set()
        self.pages.clear()

    def tab_shown(self) -> None:
        """The tab came on screen: paint on the next pass (its widgets get geometry first)."""
        if self.unpainted:
            self._paint_soon.request()

    def paint_in_view(self, *, near: bool = False) -> None:
        """Paint the panels in view now (a new comparison scrolls to its divergence first);
        ``near`` ones follow, one a pass."""
        if self._closed or self._painting or not self.page.isVisible():
            return
        if not self.unpainted and self._reveal_name is None:
            return
        self._painting = True
        try:
            if self._reveal_name is not None:
                name, self._reveal_name = self._reveal_name, None
                self.view.diffs.reveal(name)
            if not self._paint_each(0):
                self._paint_soon.request()  # panels in view still wait: the next turn
            elif near:
                self._paint_each(self._margin_px(), most=1)
        finally:
            self._painting = False
        if self._near_view():
            self._margin_soon.request()

    def _paint_each(self, margin: int, most: int | None = None) -> bool:
        """Paint panels within ``margin`` of the view (``most``, in budget); False: some wait."""
        # One at a time, in depth order: a painted panel's height moves the others.
        v = self.view
        painted = 0
        while self.unpainted and not self._closed and (most is None or painted < most):
            if not (names := v.diffs.near_view(self.unpainted, margin)):
                break
            if not self._turn.allows(PAINT_BUDGET_S, self._cost):
                return False
            anchor = v.diffs.anchor()  # panels above grow as painted: what is in view stays
            self.unpainted.discard(names[0])
            self._timed_paint(names[0])
            v.diffs.keep_anchor(anchor)
            painted += 1
        return True

    def _margin_px(self) -> int:
        return int(PAINT_MARGIN * self.view.diffs.viewport().height())

    def _near_view(self) -> bool:
        return bool(self.unpainted and self.view.diffs.near_view(self.unpainted, self._margin_px()))

    def pending(self) -> bool:
        """Whether panels in (or near) the area's view wait to be painted or re-paged."""
        if self.outcome is not None and self._widths_soon.pending():  # (over several turns)
            return True
        soon = self._paint_soon.pending() or self._margin_soon.pending()
        return bool(self.unpainted) and (not self.page.isVisible() or soon or self._near_view())

    def waiting(self) -> list[str]:
        """The layers whose panels wait to be scrolled to, in depth order."""
        return [name for name in self.view.diffs.order() if name in self.unpainted]

    def paint_all(self) -> None:
        """Paint every panel now (the tab must be on screen)."""
        for name in self.waiting():
            self.unpainted.discard(name)
            self.paint(name)

    def paint(self, name: str) -> None:
        """Paint layer ``name``'s panel with its page of the comparison shown."""
        if (outcome := self.outcome) is None or name not in outcome.differences:
            return
        if not self.page.isVisible():
            self.unpainted.add(name)
            return
        layer: PreparedLayer = outcome.differences[name]
        panel = self.view.diffs.panel(name)
        panel.set_module_type(panel_title(layer))
        if panel.activation_slot.view is None:
            # Not the height it held while blank (see DifferenceArea.blank).
            panel.set_minimum_panel_height(MIN_PANEL_HEIGHT)
        # A - B on the diverging map, |A - B| on the sequential one |gradient| takes.
        panel.activation_slot.set_colormap(DIFFERENCE_CMAP)
        panel.gradient_slot.set_colormap(AUTO)
        size = self.page_sizes.get(name)
        layer = with_page(layer, self._page(name, layer)[0], page_size=size, symmetric=True)
        if layer.view is None:
            panel.clear()
            return
        panel.set_activation(layer.view, layer.mosaic)
        panel.set_gradient(layer.grad_view, layer.grad_mosaic)

    def _timed_paint(self, name: str) -> None:
        start = time.perf_counter()
        self.paint(name)
        self._cost = time.perf_counter() - start

    def _page(self, name: str, layer: PreparedLayer) -> tuple[int, int]:
        """Layer ``name``'s page: its first channel and its size."""
        if (size := self.page_sizes.get(name)) is None:
            size = layer.mosaic.page_size if layer.mosaic is not None else 1
        size = max(1, int(size))
        return (max(0, self.pages.get(name, 0)) // size) * size, size

    def turn_page(self, name: str, step: int) -> bool:
        """Show the previous (-1) or next (+1) page of layer ``name``'s difference mosaic."""
        outcome = self.outcome
        layer = outcome.differences.get(name) if outcome is not None else None
        if layer is None or layer.mosaic is None:
            return False
        first, size = self._page(name, layer)
        first += step * size
        if not 0 <= first < layer.mosaic.total_channels:
            return False
        self.pages[name] = first
        if name not in self.unpainted:
            self.paint(name)
        return True

    def _on_width_changed(self, name: str, width: int) -> None:
        self._new_widths[name] = width
        self._widths_soon.request()

    def _apply_widths(self) -> None:
        items, self._new_widths, outcome = list(self._new_widths.items()), {}, self.outcome
        for i, (name, width) in enumerate(items):
            if name in self.unpainted:
                continue  # painted with the page size its width takes once in view
            layer = outcome.differences.get(name) if outcome is not None else None
            if layer is None or layer.view is None or layer.view.kind != "maps":
                continue
            total, height, tile_w = layer.view.data.shape
            size = page_channels_for(total, height, tile_w, width, min_channels=MIN_PAGE_CHANNELS)
            if size != self.page_sizes.get(name):
                if not self._turn.allows(PAINT_BUDGET_S, self._cost):  # the rest next turn
                    self._new_widths = {**dict(items[i:]), **self._new_widths}
                    self._widths_soon.request()
                    return
                self.page_sizes[name] = size
                self._timed_paint(name)

    def stop(self) -> None:
        """The window closes: nothing more is painted."""
        self._closed = True
        self.outcome = None  # widths asked for before are not applied
