"""The grid of layer panels, filled a few per display pass (off-screen ones once scrolled to)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from PySide6.QtWidgets import QWidget

from actviz.core.structures import first_tensor
from actviz.display.layer_views import class_units
from actviz.display.mosaic import page_image_shape
from actviz.display.prepared import PreparedLayer
from actviz.display.repage import current_mosaics, symmetric_for, with_page
from actviz.io.input_tensors import reads_text
from actviz.ui.panels.deferred import held_layouts
from actviz.ui.tokens.token_panel import TokenLayerPanel

MAPS_PANEL_MIN_HEIGHT = 300  #: Minimum height of a layer panel showing a heatmap, in pixels.
#: From this width of the Layers tab's viewport on, the layer panels go in two columns.
TWO_COLUMNS_PX = 1300
PANELS_PER_PASS = 1  #: Layer panels updated per display step when a result arrives.


def grid_columns(width: int) -> int:
    """Columns of layer panels in a Layers tab ``width`` pixels wide."""
    return 2 if width >= TWO_COLUMNS_PX else 1


class PanelGrid:
    """Lays out ``display``'s layer panels and fills them with the result shown."""

    def __init__(self, display: Any) -> None:
        self.display, self.session = display, display.session
        #: Layer panels still showing an older result, filled a few per pass, on-screen first.
        self.pending: dict[str, PreparedLayer] = {}
        self._epoch, self._scheduled = 0, False
        # What the grid holds: ((name, id(panel)), ...) in order, and its column count.
        self._placed: tuple[tuple[tuple[str, int], ...], int] | None = None
        self._columns = 1  # two on a wide tab: laid out again when the width crosses the line
        #: Waiting panels found off screen since the view last moved: asked once, not each pass.
        self._off_screen: set[str] = set()
        scroll = display.layers_scroll
        for bar in (scroll.verticalScrollBar(), scroll.horizontalScrollBar()):
            bar.valueChanged.connect(self._on_view_moved)
            # A resized window changes the range: it may bring waiting panels on screen.
            bar.rangeChanged.connect(self._on_view_moved)
        # Back on the Layers tab, panels left waiting come on screen without a scroll.
        display.tabs.currentChanged.connect(self._on_view_moved)
        scroll.viewport_resized.connect(self._on_width_changed)

    def flush(self) -> None:
        """Fill every waiting panel now (on screen or not)."""
        pending, self.pending = self.pending, {}
        panels = self.display.layer_panels
        for name, layer in pending.items():
            if name in panels:
                self.update(panels[name], layer)

    def configure(self, panel: TokenLayerPanel, layer: PreparedLayer) -> None:
        """Set ``panel`` up for ``layer`` (its type, colour map, least height)."""
        key = (layer.module_type, layer.view and layer.view.kind, self.display.colormap)
        if getattr(panel, "configured_for", None) == (*key, panel._min_height):  # noqa: SLF001
            return  # every panel, every live frame: set up alike already
        panel.set_module_type(layer.module_type)
        panel.set_colormap(self.display.colormap)
        # Heatmaps need room to read; a mosaic asks for the height its width needs.
        if layer.view is not None and layer.view.kind == "heatmap":
            panel.set_minimum_panel_height(MAPS_PANEL_MIN_HEIGHT)
        panel.configured_for = (*key, panel._min_height)  # noqa: SLF001

    def update(self, panel: TokenLayerPanel, layer: PreparedLayer) -> None:
        """Show ``layer`` in ``panel`` on the user's page and colour map."""
        slots = (panel.activation_slot.layout(), panel.gradient_slot.layout())
        with held_layouts(self.display.layers_grid, panel.layout(), *slots):
            # The result may hold an older page; earlier frames' mosaics are remade (not concepts').
            layer = with_page(
                layer if panel.tile_unit() else current_mosaics(layer),
                self.display.page_first(layer.name),
                page_size=self.session.page_channels.get(layer.name),
                symmetric=symmetric_for(self.display.colormap, layer.view),
                order=self.session.channel_orders.get(layer.name),
            )
            if layer.view is not None:
                panel.set_unit_names(self._class_units(layer))
                panel.set_activation(layer.view, layer.mosaic)
                panel.set_gradient(layer.grad_view, layer.grad_mosaic)
            else:
                panel.clear()
            panel.set_tokens(layer.tokens)  # a token sequence: its token view (ui/tokens)
            panel.set_gradients_visible(self.display.gradients_visible)
            for hook in self.display.panel_updated:
                hook(panel, layer)

    def show_now(self, name: str, layer: PreparedLayer) -> None:
        """Show ``layer`` in panel ``name`` now, in place of any waiting update."""
        self.pending.pop(name, None)
        self.update(self.display.layer_panels[name], layer)

    def _class_units(self, layer: PreparedLayer) -> tuple[str, ...] | None:
        """The class names of ``layer``'s bars when it outputs the model's class scores."""
        result = self.session.result
        cap = result.capture if result is not None else None
        out = first_tensor(cap.output) if cap is not None else None
        shape = tuple(out.shape) if out is not None else None
        return class_units(layer.shape, shape, self.session.categories)

    def refresh(self, name: str) -> None:
        """Show layer ``name`` in its panel again, in the display passes (off screen: when seen)."""
        result = self.session.result
        if result is None or name not in self.display.layer_panels or name not in result.layers:
            return
        layer = self.pending.setdefault(name, result.layers[name])
        panel = self.display.layer_panels[name]
        size = self.session.page_channels.get(name)
        if layer.mosaic is not None and size is not None and not panel.tile_unit():
            # Every panel's new height at once: one a pass would move those below each time.
            position = self.display.page_first(name)
            panel.expect_mosaic_shape(page_image_shape(layer.mosaic, size, position))
        self.schedule()

    def queue(self, pending: dict[str, PreparedLayer]) -> None:
        """Replace the panel updates still waiting (an older result's) with ``pending``."""
        self.pending, self._scheduled = pending, False
        self._epoch += 1
        self._off_screen.clear()
        self.schedule()

    def _on_screen(self, panel: QWidget) -> bool:
        return panel.isVisible() and not panel.visibleRegion().isEmpty()

    def _on_view_moved(self, *_args: object) -> None:
        self._off_screen.clear()  # a scroll, a resize, a tab: other panels may be on screen
        self.schedule()

    def schedule(self, *_args: object) -> None:
        """Fill the waiting panels on screen in the next display pass (a scroll, a resize)."""
        if not self.pending or self._scheduled:
            return
        self._scheduled = True
        epoch = self._epoch
        self.display.defer_display(lambda: self._apply_chunk(epoch), stale_ok=True)

    def _apply_chunk(self, epoch: int) -> None:
        if epoch != self._epoch:
            return  # a newer result replaced these updates
        self._scheduled = False
        pending, panels, off_screen = self.pending, self.display.layer_panels, self._off_screen
        for name in [n for n in pending if n not in panels]:
            del pending[name]
        # Off-screen panels wait to be scrolled to; a token panel builds its plots a pass at a time.
        filled, more = 0, False
        for name in list(pending):
            if name in off_screen:
                continue
            if not self._on_screen(panels[name]):
                off_screen.add(name)
                continue
            if filled == PANELS_PER_PASS:
                more = True
                break
            filled += 1
            if panels[name].prepare_tokens(pending[name].tokens):
                more = True
            else:
                self.update(panels[name], pending.pop(name))
        if more:
            self.schedule()

    def update_placeholder(self, running: bool, opening: str = "") -> None:
        """Say what the empty Layers tab waits for: a model (``opening``), ticks, input, a run."""
        s = self.session
        if opening:
            text = f"Opening {opening}…"
        elif s.model is None:
            text = "Open a model (Ctrl+O) or drop a checkpoint on the window."
        elif isinstance(s.model, torch.jit.ScriptModule):
            text = (
                "A TorchScript model runs its layers inside compiled code, where they cannot be "
                "recorded: Run shows its output and the input gradients (Overview tab)."
            )
        elif not s.ticked:
            text = (
                "Tick layers in the module tree and press Run (Ctrl+R) to see their feature maps."
            )
        elif s.input is None and reads_text(s.loaded_model):
            text = "Type a text in the box above and press Enter to run the ticked layers."
        elif s.input is None:
            text = "Open an input (Ctrl+I) or pick a sample to run the ticked layers."
        elif running:
            text = f"Running the model on {len(s.ticked)} ticked layer(s)…"
        else:
            text = "Press Run (Ctrl+R) to see the ticked layers."
        self.display.layers_placeholder.setText(text)

    def layout(self, order: Sequence[str]) -> None:
        """Put the panels named in ``order`` in the grid (nothing to do when they are there)."""
        # Laid out in Qt's pass, not once a panel shown (nor now: a resize calls this first).
        with held_layouts(self.display.layers_grid, now=False):
            grid, panels = self.display.layers_grid, self.display.layer_panels
            columns = grid_columns(self.display.layers_scroll.viewport().width()) if order else 0
            placed = (tuple((name, id(panels[name])) for name in order), columns)
            if placed == self._placed:
                return  # every live frame comes here: no relayout of the Layers tab
            self._placed = placed
            self._off_screen.clear()
            # Only panels that move leave the grid and only new ones join (re-placing all is slow).
            wanted = {id(panels[name]): (i // columns, i % columns) for i, name in enumerate(order)}
            placed_now: set[int] = set()
            for i in reversed(range(grid.count())):
                if (widget := grid.itemAt(i).widget()) is None:
                    grid.takeAt(i)
                elif wanted.get(id(widget)) != grid.getItemPosition(i)[:2]:
                    # Not takeAt: a kept item stays tied to the widget (stale height-for-width).
                    grid.removeWidget(widget)
                else:
                    placed_now.add(id(widget))
            self.display.layers_placeholder.setVisible(not order)
            if not order:
                grid.addWidget(self.display.layers_placeholder, 0, 0)
                return
            self._columns = columns
            for row in range(grid.rowCount()):
                grid.setRowStretch(row, 0)
            for i, name in enumerate(order):
                panel = panels[name]
                if id(panel) not in placed_now:
                    grid.addWidget(panel, i // columns, i % columns)
                panel.setVisible(True)
            # Spare height below the last row: panels keep the height their mosaics ask for.
            grid.setRowStretch((len(order) + columns - 1) // columns, 1)

    def _on_width_changed(self, width: int) -> None:
        self._on_view_moved()  # a taller viewport shows more panels
        if self.display.layer_panels and grid_columns(width) != self._columns:
            self.layout(list(self.display.layer_panels))
