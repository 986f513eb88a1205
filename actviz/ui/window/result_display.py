"""Pushing a finished run into the panels: layer mosaics, overview, channel view, selection.

Only numpy from a :class:`~actviz.workspace.session_state.RunResult` reaches a widget, through the panels'
typed ``set_`` methods; the raw capture stays in the result for export.

A result reaches the screen in small steps, one per event-loop pass: first the layer panels'
layout and the predictions, then the pictures, gradient flow, statistics and histogram, then
the on-screen layer panels one at a time. The steps run from a zero-interval timer, not from
posted events: Qt handles every posted event in one go (and with them the scene updates each
step causes), so timers, input and painting would wait for the whole result. Measured on
ResNet-50 in live mode, applying everything at once held the event loop for up to ~28 ms.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch
from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QWidget

from actviz.core.capture import format_bytes
from actviz.core.structures import first_tensor
from actviz.display.attribution import last_spatial_layer
from actviz.display.layer_views import class_units
from actviz.display.mosaic import MIN_PAGE_CHANNELS, page_channels_for
from actviz.display.prepared import PreparedLayer, RunResult
from actviz.display.repage import current_mosaics, symmetric_for, with_page
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.tokens.token_panel import TokenLayerPanel
from actviz.ui.tree.dock import ModelDock
from actviz.ui.window.actions import WindowActions
from actviz.ui.window.central import Centre, StatusWidgets
from actviz.workspace.session_state import Session

#: Minimum height of a layer panel showing a heatmap, in pixels (a mosaic's panel is as high
#: as its width needs: the mosaic fills the width).
MAPS_PANEL_MIN_HEIGHT = 300
#: Share of the Layers tab's width the channel view takes when it opens.
CHANNEL_VIEW_SHARE = 0.62
#: From this width of the Layers tab's viewport on, the layer panels go in two columns.
TWO_COLUMNS_PX = 1300
#: Layer panels updated per display step when a result arrives; steps run in a pass until
#: it took DISPLAY_PASS_S (a live frame's few panels: one repaint of the window, not one each).
PANELS_PER_PASS, DISPLAY_PASS_S = 1, 0.004
#: Time spent making new layer panels per event-loop pass (the rest follow on later passes).
CREATE_BUDGET_S = 0.04

log = logging.getLogger(__name__)

#: Least time between two timing read-outs for live frames (seconds): at 30 frames a second a
#: number that changes every frame cannot be read, and each change relays out the status bar.
HELD_TEXT_INTERVAL_S = 0.25


def default_selected_layer(result: RunResult) -> str | None:
    """The layer selected (histogram, export) after a run that did not keep the selection:
    the last shown layer with a spatial output larger than 1x1 (a ``fc``'s 8 values make a
    poor histogram), else the last shown layer."""
    shapes = {name: result.layers[name].shape for name in result.shown}
    found = last_spatial_layer(result.shown, shapes)
    return found or (result.shown[-1] if result.shown else None)


class ResultDisplay:
    """Shows results in the window's panels: the layer panels, the overview, the channel view.

    Parameters
    ----------
    session
        The window's session: its result is what the panels show.
    centre
        The banner, the Layers and Overview tabs and their panels.
    status
        The status bar's labels (status text, timing and memory held).
    actions
        The window's actions: the colour map, the gradients toggle and "Unpin this result".
    model_dock
        The module tree (updated with each result's tree) and the input preview.
    show_error
        ``(text, source)``: how a display error reaches the user (the window's banner).
    parent
        Owner of the timer that runs the display steps (the window).
    """

    def __init__(
        self,
        session: Session,
        centre: Centre,
        status: StatusWidgets,
        actions: WindowActions,
        model_dock: ModelDock,
        show_error: Callable[[str, str], None],
        parent: QObject,
    ) -> None:
        self.session = session
        self.centre = centre
        self.actions = actions
        self.model_dock = model_dock
        self.show_error = show_error
        # The widgets driven here, under the names they have on the window.
        self.banner = centre.banner
        self.tabs = centre.tabs
        self.layers_splitter = centre.layers_splitter
        self.layers_scroll = centre.layers_scroll
        self.layers_grid = centre.layers_grid
        self.layers_placeholder = centre.layers_placeholder
        self.channel_box = centre.channel_box
        self.channel_view = centre.channel_view
        self.prediction_panel = centre.prediction_panel
        self.saliency_panel = centre.saliency_panel
        self.gradcam_panel = centre.gradcam_panel
        self.grad_flow_panel = centre.grad_flow_panel
        self.stats_table = centre.stats_table
        self.histogram_panel = centre.histogram_panel
        self.input_preview = model_dock.input_preview
        self.status_label = status.status_label
        self.timing_label = status.timing_label
        #: The layer panels of the result shown, in execution order.
        self.layer_panels: dict[str, TokenLayerPanel] = {}
        #: The layer the histogram and the single-layer exports are about.
        self.selected_layer: str | None = None
        self._open_channel: tuple[str, int] | None = None
        #: Called with each new layer panel, and after a panel shows a layer (what-if: the
        #: tile menu, the edit badge and the difference view, actviz.ui.whatif).
        self.panel_created: list[Callable[[LayerPanel], None]] = []
        self.panel_updated: list[Callable[[LayerPanel, PreparedLayer], None]] = []
        #: ``fill(menu, layer, channels)`` of each feature adding entries to the tile menu.
        self.tile_menu_fillers: list[Callable[[Any, str, tuple[int, ...]], None]] = []
        # Display steps (see the module docstring): each carries the epoch of the result
        # it belongs to (None: shown even after a newer result), run by a zero-interval timer.
        self._display_steps: deque[tuple[int | None, Callable[[], None]]] = deque()
        self._display_epoch = 0
        self._display_timer = QTimer(parent)
        self._display_timer.setInterval(0)
        self._display_timer.timeout.connect(self._run_display_step)
        # Layer panels still showing an older result, filled a few per pass, on-screen first.
        self._pending_panels: dict[str, PreparedLayer] = {}
        # Panels of the result shown still to be made (a few per pass), and their epoch.
        self._to_create: list[str] = []
        self._create_epoch = 0
        # What the grid holds: ((name, id(panel)), ...) in order, and its column count.
        self._placed: tuple[tuple[tuple[str, int], ...], int] | None = None
        #: Steps waiting for every panel to exist: ``(display epoch, step)``.
        self._after_panels: list[tuple[int, Callable[[], None]]] = []
        self._pending_epoch = 0
        self._pending_scheduled = False
        # Panels' new mosaic widths, applied together on the next pass.
        self._new_widths: dict[str, int] = {}
        self._width_timer = QTimer(parent)
        self._width_timer.setSingleShot(True)
        self._width_timer.setInterval(0)
        self._width_timer.timeout.connect(self._apply_new_widths)
        for bar in (
            self.layers_scroll.verticalScrollBar(),
            self.layers_scroll.horizontalScrollBar(),
        ):
            bar.valueChanged.connect(self._schedule_panel_updates)
            # A resized window changes the range: it may bring waiting panels on screen.
            bar.rangeChanged.connect(self._schedule_panel_updates)
        # Back on the Layers tab, panels a change made on another tab left waiting come on
        # screen without scrolling: fill them now (else they keep a stale scale).
        centre.tabs.currentChanged.connect(self._schedule_panel_updates)
        # Live frames leave the hidden Overview waiting (apply_result): filled when it shows.
        self._overview_waiting = False
        # Live frames' timing read-out: at most every HELD_TEXT_INTERVAL_S, the last one
        # always (a trailing refresh), so it stays readable and ends on the frame shown.
        self._held_text_at = -1.0
        self._held_timer = QTimer(parent)
        self._held_timer.setSingleShot(True)
        self._held_timer.timeout.connect(self.refresh_held_text)
        centre.tabs.currentChanged.connect(self._show_waiting_overview)
        centre.gradcam_panel.layer_changed.connect(self._on_gradcam_layer_changed)
        # Two columns of panels on a wide tab, one beside the channel view or on a small
        # screen: laid out again when the tab's width crosses the line.
        self._grid_columns = 1
        centre.layers_scroll.viewport_resized.connect(self._on_layers_width_changed)
        centre.channel_view.step_requested.connect(self.step_channel)
        centre.stats_table.layer_selected.connect(self._on_stats_layer_selected)
        centre.histogram_panel.layer_changed.connect(self._on_stats_layer_selected)

    @property
    def colormap(self) -> str:
        """The colour map of the feature maps."""
        return self.actions.colormap

    @property
    def gradients_visible(self) -> bool:
        """Whether gradient magnitudes are shown beside activations."""
        return self.actions.gradients_action.isChecked()

    def set_colormap(self, name: str) -> None:
        """Show the feature maps and the channel view in colour map ``name`` ("auto": one per
        layer). Mosaics change their normalisation too where "auto" makes them symmetric
        about 0: new layers from the result's views, no new run; the result is not changed."""
        self.session.set_view(colormap=name)
        for panel in self.layer_panels.values():
            panel.set_colormap(name)
        for panel_name in self.layer_panels:  # re-made in the display passes, on screen first
            self.refresh_panel(panel_name)
        self.channel_view.set_colormap(name)

    def set_gradients_visible(self, visible: bool) -> None:
        """Show (or hide) the gradient magnitudes beside the activations."""
        for panel in self.layer_panels.values():
            panel.set_gradients_visible(visible)
        self.channel_view.set_gradients_visible(visible)

    def select_layer(self, name: str | None, *, reveal: bool = True) -> None:
        """Make ``name`` the selected layer: histogram, export target, tree selection.

        ``reveal`` scrolls its panel into view (not done for each new result, so a user
        scrolling through the panels while live frames arrive is not pulled back).
        """
        self.selected_layer = name
        for panel_name, panel in self.layer_panels.items():
            # set_selected repaints only a panel whose state changes; a style sheet would
            # re-polish every child of every panel on each result.
            panel.set_selected(panel_name == name)
        self._update_histogram()
        if reveal and name is not None and name in self.layer_panels:
            self.layers_scroll.ensureWidgetVisible(self.layer_panels[name])

    def open_channel(self, name: str, channel: int) -> bool:
        """Show channel ``channel`` of layer ``name`` large, beside its gradient magnitude,
        with the input picture for its overlay; the channel view takes most of the tab."""
        result = self.session.result
        if result is None or name not in result.layers:
            return False
        layer = result.layers[name]
        view = layer.view
        if view is None or view.kind != "maps" or not 0 <= channel < view.data.shape[0]:
            return False
        grad = None
        if layer.grad_view is not None and layer.grad_view.kind == "maps":
            grad = layer.grad_view.data[channel]
        self.channel_view.set_colormap(self.colormap)
        self.channel_view.set_gradients_visible(self.gradients_visible)
        self.channel_view.set_channel(
            name,
            channel,
            view.data[channel],
            grad,
            channels=int(view.data.shape[0]),
            signed=view.signed,
            image=result.image,
        )
        self._open_channel = (name, channel)
        # The layer's mosaic shows the page holding the channel opened (keys step past pages).
        before = self.page_first(name)
        if self.session.channel_pages.get(name, 0) != channel:
            self.session.set_channel_page(name, channel)
        panel = self.layer_panels.get(name)
        if panel is not None and self.page_first(name) != before:
            self._pending_panels.pop(name, None)
            self._update_panel(panel, layer)
        if not self.channel_box.isVisible():
            self.channel_box.setVisible(True)
            width = max(self.layers_splitter.width(), 600)
            # The channel large (CHANNEL_VIEW_SHARE of the tab), the mosaics beside it.
            share = int(width * CHANNEL_VIEW_SHARE)
            self.layers_splitter.setSizes([width - share, share])
        self.select_layer(name)
        return True

    def step_channel(self, step: int) -> bool:
        """Open the previous (``step`` -1) or next (+1) channel of the layer in the channel
        view (its [ ] / PageUp PageDown / arrow keys); in a layer sorted by effect, the
        previous or next in that order (the tiles' order)."""
        if self._open_channel is None:
            return False
        name, channel = self._open_channel
        order = self.session.channel_orders.get(name)
        at = order.position(channel) if order is not None else None
        if order is not None and at is not None:
            if not 0 <= at + step < len(order.channels):
                return False
            return self.open_channel(name, order.channels[at + step])
        return self.open_channel(name, channel + step)

    def turn_page(self, name: str, step: int) -> bool:
        """Show the previous (``step`` -1) or next (+1) page of layer ``name``'s channels.

        A page holds :meth:`page_size` channels (chosen from the panel's width); the page is
        built from the result's views at once (no new run) as a new layer, so the result
        itself (maybe pinned) is not changed, and kept for later runs and live frames of this
        model. Returns False when there is no such page.
        """
        result = self.session.result
        layer = result.layers.get(name) if result is not None else None
        if layer is None or layer.mosaic is None:
            return False
        first = self.page_first(name) + step * self.page_size(name)
        order = self.session.channel_orders.get(name)
        if order is not None:  # pages of the layer's own order: its channel at that place
            if not 0 <= first < len(order.channels):
                return False
            self.session.set_channel_page(name, order.channels[first])
        elif not 0 <= first < layer.mosaic.total_channels:
            return False
        else:
            self.session.set_channel_page(name, first)
        panel = self.layer_panels.get(name)
        if panel is not None:
            self._pending_panels.pop(name, None)
            self._update_panel(panel, layer)
        return True

    def page_size(self, name: str) -> int:
        """Channels per mosaic page of layer ``name``: the window's choice for its panel, else
        the page of the mosaic shown."""
        size = self.session.page_channels.get(name)
        if size is None:
            result = self.session.result
            layer = result.layers.get(name) if result is not None else None
            mosaic = layer.mosaic if layer is not None else None
            size = mosaic.page_size if mosaic is not None else 1
        return max(1, int(size))

    def page_first(self, name: str) -> int:
        """First channel of the page shown of layer ``name``: the page of :meth:`page_size`
        channels holding ``session.channel_pages[name]`` (the channel the user turned or
        stepped to), so a page size that follows the width keeps that channel in view. A
        layer with a channel order (sorted by effect): the position in it."""
        return self.session.page_start(name, self.page_size(name))

    def _on_mosaic_width_changed(self, name: str, width: int) -> None:
        # Handled on the next pass: the width changes while a panel is being filled (its
        # canvas is shown), and resizing the window sends many in a row.
        self._new_widths[name] = width
        if not self._width_timer.isActive():
            self._width_timer.start()

    def _apply_new_widths(self) -> None:
        widths, self._new_widths = self._new_widths, {}
        for name, width in widths.items():
            self.fit_page_to_width(name, width)

    def fit_page_to_width(self, name: str, width: int) -> None:
        """Layer ``name``'s mosaic fills ``width`` screen pixels: pick the page size that
        keeps tiles readable (at least :data:`~actviz.display.mosaic.MIN_TILE_SCREEN_PX`,
        at least :data:`MIN_PAGE_CHANNELS` channels) and re-page from the result's views (no
        new run); the page still holds the channel the user turned or stepped to."""
        result = self.session.result
        layer = result.layers.get(name) if result is not None else None
        if layer is None or layer.view is None or layer.view.kind != "maps":
            return
        total, height, tile_w = layer.view.data.shape
        size = page_channels_for(total, height, tile_w, width, min_channels=MIN_PAGE_CHANNELS)
        if size == self.session.page_channels.get(name):
            return
        # The page shown is still the one holding session.channel_pages[name] (page_first).
        self.session.set_page_channels(name, size)
        if name in self.layer_panels:
            # Re-paged with the other waiting updates, on-screen panels first: a resize that
            # changes every panel's width must not repaint them all in one event.
            self._pending_panels.setdefault(name, layer)
            self._schedule_panel_updates()

    # ========================================================================== results
    def apply_result(self, result: RunResult) -> None:
        """Make ``result`` the session's result and show it (in steps, see the module doc)."""
        self.session.set_result(result)
        messages = [("error", e) for e in result.errors]
        messages += [("warning", w) for w in result.warnings]
        self.banner.set_messages("run", messages)
        if result.tree is not None:
            self.model_dock.update_tree(result.tree)

        # Layer panels: exactly the ticked layers that ran, in execution order.
        for name in [n for n in self.layer_panels if n not in result.layers]:
            panel = self.layer_panels.pop(name)
            self.layers_grid.removeWidget(panel)
            panel.setParent(None)
            panel.deleteLater()
        # Panels that exist are kept; missing ones are made a few at a time (each a handful
        # of plots: 50 at once blocked the GUI thread for a second or more).
        self._to_create = [name for name in result.shown if name not in self.layer_panels]
        self._after_panels = []  # an older result's: it was replaced before it was shown
        self._create_epoch += 1
        for name in result.shown:
            if name in self.layer_panels:
                self._configure_panel(self.layer_panels[name], result.layers[name])
        self._create_panels(self._create_epoch, budget_s=CREATE_BUDGET_S)
        # Panels are filled a few per event-loop pass, on-screen first, so one result does not
        # paint every canvas in a single event.
        pending = {name: result.layers[name] for name in result.shown if name in self.layer_panels}
        self._queue_panel_updates(pending)

        # Overview: the predictions now, the rest in steps (see the module docstring). A live
        # frame (it has an origin) leaves a hidden Overview as it is until the tab is shown:
        # painting its panels for nobody cost a tenth of the GUI thread's time per frame.
        self._overview_waiting = bool(result.origin) and not self._overview_shown()
        if not self._overview_waiting:
            self._show_predictions(result)
        if self.selected_layer not in result.layers:
            self.selected_layer = default_selected_layer(result)
        self._display_epoch += 1
        overview = () if self._overview_waiting else self._overview_steps(result)
        for step in (*overview, lambda: self._show_selection(result)):
            self.defer_display(step)

        if result.origin:
            self._refresh_held_text_spaced()
        else:
            self.refresh_held_text()
        self.status_label.setText(f"{len(result.shown)} layer(s) · target {result.target_text}")

    def _refresh_held_text_spaced(self) -> None:
        wait = self._held_text_at + HELD_TEXT_INTERVAL_S - time.perf_counter()
        if wait <= 0:
            self.refresh_held_text()
        elif not self._held_timer.isActive():
            self._held_timer.start(int(wait * 1000) + 1)

    def _show_predictions(self, result: RunResult) -> None:
        self.prediction_panel.set_predictions(result.predictions, kind=result.prediction_kind)
        self.prediction_panel.set_target_text(f"Gradients of: {result.target_text}")

    def _overview_steps(self, result: RunResult) -> tuple[Callable[[], None], ...]:
        return (
            lambda: self._show_saliency(result),
            lambda: self._show_gradcam_result(result),
            lambda: self.grad_flow_panel.set_norms(result.grad_norm_names, result.grad_norms),
            lambda: self.stats_table.set_rows(result.stats_rows()),
        )

    def _overview_shown(self) -> bool:
        return self.tabs.currentWidget() is self.centre.overview_tab

    def _show_waiting_overview(self, *_args: object, now: bool = False) -> None:
        """Fill the Overview left waiting by live frames, once it is shown (``now``: at once)."""
        result = self.session.result
        if not self._overview_waiting or result is None or not (now or self._overview_shown()):
            return
        self._overview_waiting = False
        self._show_predictions(result)
        for step in (*self._overview_steps(result), self._update_histogram):
            if now:
                self._call_step(step)
            else:
                self.defer_display(step)

    def _configure_panel(self, panel: TokenLayerPanel, layer: PreparedLayer) -> None:
        panel.set_module_type(layer.module_type)
        panel.set_colormap(self.colormap)
        # Heatmaps need room to read; a mosaic's canvas asks for the height its width needs;
        # bars and numbers are fine at the panel's own minimum.
        if layer.view is not None and layer.view.kind == "heatmap":
            panel.set_minimum_panel_height(MAPS_PANEL_MIN_HEIGHT)

    def _create_panels(self, epoch: int, budget_s: float | None) -> None:
        """Make the panels still missing for the result shown, for at most ``budget_s``
        seconds (None: all) and lay the grid out (the rest on the next pass); the passes after
        fill them."""
        if epoch != self._create_epoch:
            return  # a newer result decides which panels to make
        result = self.session.result
        if result is None:
            self._to_create = []
            return
        start = time.perf_counter()

        def in_budget() -> bool:
            return budget_s is None or time.perf_counter() - start < budget_s

        made: list[str] = []
        while self._to_create and (in_budget() or not made):
            name = self._to_create.pop(0)
            layer = result.layers.get(name)
            if layer is None or name in self.layer_panels:
                continue
            panel = TokenLayerPanel(name, module_type=layer.module_type)
            panel.channel_clicked.connect(self.open_channel)
            panel.page_requested.connect(self.turn_page)
            panel.mosaic_width_changed.connect(self._on_mosaic_width_changed)
            self.layer_panels[name] = panel
            for hook in self.panel_created:
                hook(panel)
            self._configure_panel(panel, layer)
            made.append(name)
        # Execution order, whatever order the panels were made in.
        self.layer_panels = {
            n: self.layer_panels[n] for n in result.shown if n in self.layer_panels
        }
        self._layout_panels(list(self.layer_panels))
        # New panels are filled in later passes with the other waiting updates, on screen
        # first, one a pass: making panels and filling some in the same pass blocked the GUI
        # thread over 100 ms (a mosaic's canvases and first fit, a token panel's two plots).
        for name in made:
            self._pending_panels[name] = result.layers[name]
        self._schedule_panel_updates()
        if not self._to_create:
            self._release_after_panels()
        else:
            # Its own epoch says when it is stale (a newer result's panels differ).
            step = lambda: self._create_panels(epoch, CREATE_BUDGET_S)  # noqa: E731
            self.defer_display(step, stale_ok=True)

    def panels_pending(self) -> bool:
        """Whether panels of the result shown are still to be made."""
        return bool(self._to_create)

    def refresh_held_text(self) -> None:
        """The status bar's timing and memory: ``ran in 53 ms · 1.2 MiB held (2 pinned)``."""
        self._held_timer.stop()
        self._held_text_at = time.perf_counter()
        result = self.session.result
        if result is None:
            self.timing_label.clear()
            return
        took = (
            f"ran in {result.elapsed_s * 1000:.0f} ms"
            if result.elapsed_s < 10
            else f"ran in {result.elapsed_s:.1f} s"
        )
        text = f"{took} · {format_bytes(self.session.held_bytes())} held"
        if len(self.session.pins):
            text += f" ({len(self.session.pins)} pinned)"
        self.timing_label.setText(text)
        self.actions.unpin_action.setEnabled(self.session.pins.find(result) is not None)

    def _show_picture(self, panel: QWidget, result: RunResult) -> None:
        if result.image is not None:
            panel.set_image(result.image)  # type: ignore[attr-defined]
        else:
            panel.clear()  # type: ignore[attr-defined]  # no stale picture from an earlier input

    def _show_saliency(self, result: RunResult) -> None:
        self._show_picture(self.saliency_panel, result)
        inp = self.session.input
        if inp is not None and inp.image is None and result.image is not None and not result.origin:
            # A tensor input that looks like an image: preview it as the overlays show it
            # (a live frame's preview is live mode's: its own frame, not the opened input).
            self.input_preview.set_image(result.image, inp.description or "tensor input")
        tokens = result.token_saliency
        if result.saliency is not None:
            self.saliency_panel.set_heat(result.saliency)
        elif tokens is not None:  # a text input: |gradient x embedding| on its tokens
            described = [tokens.describe(i) for i in range(len(tokens.tokens))]
            self.saliency_panel.set_token_values(tokens.tokens, tokens.values, described)
        else:
            self.saliency_panel.set_heat(None)
            self.saliency_panel.set_message(result.saliency_message)

    def _show_gradcam_result(self, result: RunResult) -> None:
        self._show_picture(self.gradcam_panel, result)
        self.gradcam_panel.set_layers(list(result.grad_cams), result.gradcam_default)
        self._show_gradcam(result.gradcam_default)

    def _show_selection(self, result: RunResult) -> None:
        self.select_layer(self.selected_layer, reveal=False)
        if self.channel_box.isVisible() and self._open_channel is not None:
            # Keep the opened channel in step with the new values (or close it if it is gone).
            if not self.open_channel(*self._open_channel):
                self.channel_box.setVisible(False)
                self._open_channel = None

    # ========================================================================== display steps
    def defer_display(self, step: Callable[[], None], *, stale_ok: bool = False) -> None:
        """Run ``step`` on a later event-loop pass, after the steps already waiting.

        A step is skipped when a newer result arrived meanwhile (unless ``stale_ok``): the
        newer result's own steps replace it. Live mode puts its frame preview here too, so a
        frame is shown in small steps with timers and input served between them.
        """
        gen = None if stale_ok else self._display_epoch
        self._display_steps.append((gen, step))
        if not self._display_timer.isActive():
            self._display_timer.start()

    def after_panels(self, step: Callable[[], None]) -> None:
        """Run ``step`` (like :meth:`defer_display`) once every layer panel of the result
        shown exists: ``run_finished`` promises the panels are there."""
        if not self._to_create:
            self.defer_display(step)
        else:
            self._after_panels.append((self._display_epoch, step))

    def _release_after_panels(self) -> None:
        waiting, self._after_panels = self._after_panels, []
        for gen, step in waiting:
            if gen == self._display_epoch:  # else a newer result replaced it
                self._display_steps.append((gen, step))
        if self._display_steps and not self._display_timer.isActive():
            self._display_timer.start()

    def display_pending(self) -> bool:
        """Whether steps of showing a result are still waiting (see :meth:`flush_panel_updates`)."""
        return bool(self._display_steps)

    def _run_display_step(self) -> None:
        steps, t0, ran = self._display_steps, time.perf_counter(), False
        while steps and not (ran and time.perf_counter() - t0 >= DISPLAY_PASS_S):
            gen, step = steps.popleft()
            if gen is None or gen == self._display_epoch:  # else a newer result's came
                self._call_step(step)
                ran = True
        if not steps:
            self._display_timer.stop()

    def _call_step(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not display part of the result")
            self.show_error(f"Could not display the result: {exc}", "run")

    def _flush_display_steps(self) -> None:
        steps = self._display_steps
        while steps:
            gen, step = steps.popleft()
            if gen is None or gen == self._display_epoch:
                self._call_step(step)

    # ========================================================================== panel updates
    def _update_panel(self, panel: TokenLayerPanel, layer: PreparedLayer) -> None:
        # The page the user is on (a frame requested before a page turn, or a pinned result
        # made before it, holds the old page), its size and the colour map's symmetric range:
        # a new layer, the result is not changed. Mosaics kept from an earlier live frame (panel
        # off screen) are made for this one, except under concept tiles (no channels shown).
        layer = with_page(
            layer if panel.tile_unit() else current_mosaics(layer),
            self.page_first(layer.name),
            page_size=self.session.page_channels.get(layer.name),
            symmetric=symmetric_for(self.colormap, layer.view),
            order=self.session.channel_orders.get(layer.name),
        )
        if layer.view is not None:
            panel.set_unit_names(self._class_units(layer))
            panel.set_activation(layer.view, layer.mosaic)
            panel.set_gradient(layer.grad_view, layer.grad_mosaic)
        else:
            panel.clear()
        panel.set_tokens(layer.tokens)  # a token sequence: its token view (ui/tokens)
        panel.set_gradients_visible(self.gradients_visible)
        for hook in self.panel_updated:
            hook(panel, layer)

    def _class_units(self, layer: PreparedLayer) -> tuple[str, ...] | None:
        """The class names of ``layer``'s bars when it outputs the model's class scores."""
        result = self.session.result
        cap = result.capture if result is not None else None
        out = first_tensor(cap.output) if cap is not None else None
        shape = tuple(out.shape) if out is not None else None
        return class_units(layer.shape, shape, self.session.categories)

    def refresh_panel(self, name: str) -> None:
        """Show layer ``name`` of the current result in its panel again, in the display passes
        (on screen one a pass, off screen once scrolled to): features refresh every panel they
        decorate at once, which rebuilt them all in one event-loop turn (over a second)."""
        result = self.session.result
        if result is None or name not in self.layer_panels or name not in result.layers:
            return
        self._pending_panels.setdefault(name, result.layers[name])
        self._schedule_panel_updates()

    def _queue_panel_updates(self, pending: dict[str, PreparedLayer]) -> None:
        """Replace the panel updates still waiting (an older result's) with ``pending``."""
        self._pending_panels = pending
        self._pending_epoch += 1
        self._pending_scheduled = False
        self._schedule_panel_updates()

    def panel_updates_pending(self) -> bool:
        """Whether some layer panels still show an older result than ``session.result``, or
        are still to be made."""
        return bool(self._pending_panels) or bool(self._to_create)

    def flush_panel_updates(self) -> None:
        """Show the whole result now: every panel made, every waiting display step and every
        layer panel filled (on screen or not), e.g. before an export or a test reads them."""
        if self._to_create:
            self._create_panels(self._create_epoch, budget_s=None)
        self._flush_display_steps()
        self._show_waiting_overview(now=True)
        pending = self._pending_panels
        self._pending_panels = {}
        for name, layer in pending.items():
            if name in self.layer_panels:
                self._update_panel(self.layer_panels[name], layer)

    def _panel_on_screen(self, panel: QWidget) -> bool:
        return panel.isVisible() and not panel.visibleRegion().isEmpty()

    def _schedule_panel_updates(self, *_args: object) -> None:
        pending = self._pending_panels
        if not pending or self._pending_scheduled:
            return
        self._pending_scheduled = True
        epoch = self._pending_epoch
        self.defer_display(lambda: self._apply_panel_chunk(epoch), stale_ok=True)

    def _apply_panel_chunk(self, epoch: int) -> None:
        if epoch != self._pending_epoch:
            return  # a newer result replaced these updates
        self._pending_scheduled = False
        pending = self._pending_panels
        panels = self.layer_panels
        on_screen = [n for n in list(pending) if n in panels and self._panel_on_screen(panels[n])]
        for name in [n for n in pending if n not in panels]:
            del pending[name]
        # Off-screen panels wait until they are scrolled into view (scroll bar signal). A token
        # panel's first pass builds its plots, the next shows the tokens (~60 ms of CPU in one).
        for name in on_screen[:PANELS_PER_PASS]:
            if not panels[name].prepare_tokens(pending[name].tokens):
                self._update_panel(panels[name], pending.pop(name))
        if any(name in pending for name in on_screen):
            self._schedule_panel_updates()

    def update_placeholder(self, running: bool) -> None:
        """Say what the empty Layers tab waits for: a model, ticks, an input, or the run."""
        s = self.session
        if s.model is None:
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
        elif s.input is None:
            text = "Open an input (Ctrl+I) or pick a sample to run the ticked layers."
        elif running:
            text = f"Running the model on {len(s.ticked)} ticked layer(s)…"
        else:
            text = "Press Run (Ctrl+R) to see the ticked layers."
        self.layers_placeholder.setText(text)

    def _layout_panels(self, order: Sequence[str]) -> None:
        columns = _grid_columns(self.layers_scroll.viewport().width()) if order else 0
        placed = (tuple((name, id(self.layer_panels[name])) for name in order), columns)
        if placed == self._placed:
            # Every result (each live frame) comes here: taking the grid apart and putting it
            # back the same relaid out the Layers tab and cost ~1 ms of GUI time a frame.
            return
        self._placed = placed
        while self.layers_grid.count():
            widget = self.layers_grid.itemAt(0).widget()
            if widget is not None:
                # removeWidget deletes the layout item: a widget whose old item is still
                # alive (takeAt hands it to Python) is never tied to its new one, whose
                # cached height-for-width then never hears of the widget's changes (a panel
                # re-laid out at another width kept the height of its old arrangement).
                self.layers_grid.removeWidget(widget)
            else:
                self.layers_grid.takeAt(0)
        self.layers_placeholder.setVisible(not order)
        if not order:
            self.layers_grid.addWidget(self.layers_placeholder, 0, 0)
            return
        self._grid_columns = columns
        grid = self.layers_grid
        for row in range(grid.rowCount()):
            grid.setRowStretch(row, 0)
        for i, name in enumerate(order):
            grid.addWidget(self.layer_panels[name], i // columns, i % columns)
            self.layer_panels[name].setVisible(True)
        # Spare height goes below the last row: panels keep the height their mosaics ask
        # for (stretched rows were mostly blank, and a mosaic in them sat in a white band).
        grid.setRowStretch((len(order) + columns - 1) // columns, 1)

    def _on_layers_width_changed(self, width: int) -> None:
        if self.layer_panels and _grid_columns(width) != self._grid_columns:
            self._layout_panels(list(self.layer_panels))

    def clear_panels(self) -> None:
        """Empty every panel (another model was opened)."""
        self._pending_panels = {}
        self._display_epoch += 1
        for panel in self.layer_panels.values():
            self.layers_grid.removeWidget(panel)
            panel.setParent(None)
            panel.deleteLater()
        self.layer_panels.clear()
        self._layout_panels([])
        # Another model's panels start at the top: a hidden Layers tab keeps its old range
        # (and offset) until shown, which put the new grid's middle on screen.
        self.layers_scroll.verticalScrollBar().setValue(0)
        self.layers_scroll.horizontalScrollBar().setValue(0)
        self.channel_box.setVisible(False)
        self.selected_layer = None
        self._overview_waiting = False
        for panel in (
            self.prediction_panel,
            self.saliency_panel,
            self.gradcam_panel,
            self.grad_flow_panel,
            self.stats_table,
            self.histogram_panel,
        ):
            panel.clear()
        self.timing_label.clear()
        # "5 layer(s) · target class 7: arrow" spoke of the previous model's last run.
        self.status_label.clear()

    def _show_gradcam(self, name: str | None) -> None:
        result = self.session.result
        if result is None:
            return
        if name is None or name not in result.grad_cams:
            self.gradcam_panel.set_heat(None)
            self.gradcam_panel.set_message(
                "Grad-CAM needs a ticked layer with a spatial (N, C, H, W) output and an image input."
            )
            return
        self.gradcam_panel.set_heat(result.grad_cams[name])

    def _update_histogram(self) -> None:
        if self._overview_waiting:
            return  # hidden: shown with the rest of the Overview (_show_waiting_overview)
        result = self.session.result
        name = self.selected_layer
        layer = result.layers.get(name) if result is not None and name is not None else None
        if layer is None or layer.hist is None:
            self.histogram_panel.clear()
        else:
            counts, edges = layer.hist
            self.histogram_panel.set_histogram(f"{name} · values", counts, edges)
        self.histogram_panel.set_layers(list(result.layers) if result is not None else [], name)

    def selected_panel(self) -> QWidget:
        """The selected layer's panel (the current tab without one), as an export shows it:
        showing the current result, not an older one (only it: filling every waiting panel
        for one panel's picture took seconds with many token panels)."""
        name = self.selected_layer
        if self.tabs.currentWidget() is self.layers_splitter and name in self.layer_panels:
            self._flush_display_steps()
            if name in self._pending_panels:
                self._update_panel(self.layer_panels[name], self._pending_panels.pop(name))
            return self.layer_panels[name]
        self.flush_panel_updates()
        if self.tabs.currentWidget() is self.layers_splitter:
            return self.layers_scroll.widget()
        return self.tabs.currentWidget()

    # ========================================================================== panel events
    def _on_stats_layer_selected(self, name: str) -> None:
        self.select_layer(name)

    def _on_gradcam_layer_changed(self, name: str) -> None:
        if name:
            self.session.set_view(gradcam_layer=name)
            self._show_gradcam(name)


def _grid_columns(width: int) -> int:
    """Columns of layer panels in a Layers tab ``width`` pixels wide."""
    return 2 if width >= TWO_COLUMNS_PX else 1


__all__ = [
    "CHANNEL_VIEW_SHARE",
    "MIN_PAGE_CHANNELS",
    "MAPS_PANEL_MIN_HEIGHT",
    "PANELS_PER_PASS",
    "ResultDisplay",
    "default_selected_layer",
]
