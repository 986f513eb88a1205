"""Pushing a finished run into the panels (numpy only, through their ``set_`` methods), in steps
one per event-loop pass: layout and predictions, the Overview (a hidden one waits for its tab to
be shown), then on-screen layer panels; and the channel view and the mosaic pages, which follow
the user's clicks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget

from actviz.core.capture import format_bytes
from actviz.display.attribution import last_spatial_layer
from actviz.display.mosaic import MIN_PAGE_CHANNELS, page_channels_for
from actviz.display.prepared import PreparedLayer, RunResult
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.panels.style import READOUT_INTERVAL_S
from actviz.ui.tokens.token_panel import TokenLayerPanel
from actviz.ui.window.display_steps import DisplaySteps
from actviz.ui.window.panel_grid import PanelGrid
from actviz.ui.worker import CAPTURE_NICE, Worker

#: Time spent making new layer panels per event-loop pass (the rest follow on later passes):
#: the pass that makes them is the longest the GUI waits while a result with many layers shows.
CREATE_BUDGET_S = 0.012
#: Dropped panels deleted per event-loop pass (all at once blocks a model switch).
DELETES_PER_PASS = 4
CHANNEL_VIEW_SHARE = 0.62  #: Share of the Layers tab's width the channel view takes when it opens.


def default_selected_layer(result: RunResult) -> str | None:
    """The layer selected after a run that lost the selection: the last one with a spatial
    output larger than 1x1 (a poor histogram otherwise), else the last."""
    shapes = {name: result.layers[name].shape for name in result.shown}
    return last_spatial_layer(result.shown, shapes) or (result.shown[-1] if result.shown else None)


class OverviewDisplay:
    """Fills the Overview's panels in display ``steps``; the histogram is ``selected_layer()``'s."""

    def __init__(self, display: Any, parent: Any) -> None:
        self.session, self.centre, self.steps = display.session, display.centre, display.steps
        self.input_preview = display.model_dock.input_preview
        self._selected_layer = lambda: display.selected_layer
        self.waiting = False  #: Live frames left the hidden Overview waiting: filled when it shows.
        #: Computes what a live frame left for a read (statistics, a histogram, Grad-CAM) off
        #: the GUI thread; the Overview fills once it is there.
        self.lazies = Worker(parent, nice=CAPTURE_NICE)
        parent.closed.connect(lambda: self.lazies.shutdown(timeout_ms=0))
        self.centre.tabs.currentChanged.connect(self.show_waiting)
        self.centre.gradcam_panel.layer_changed.connect(self._on_gradcam_layer_changed)

    def shown(self) -> bool:
        """Whether the Overview is the tab on screen."""
        return self.centre.tabs.currentWidget() is self.centre.overview_tab

    def show(self, result: RunResult) -> None:
        """Show ``result``: the predictions now, the rest in steps (a live frame: when shown)."""
        self.waiting = bool(result.origin) and not self.shown()
        if not self.waiting:
            self._fill(result, self.steps.defer)

    def show_waiting(self, *_args: object, now: bool = False) -> None:
        """Fill the Overview left waiting by live frames, once it is shown (``now``: at once)."""
        result = self.session.result
        if not self.waiting or result is None or not (now or self.shown()):
            return
        self.waiting = False
        run = self.steps.call if now else self.steps.defer
        self._fill(result, run, lambda: self.show_histogram(now=now), now=now)

    def show_histogram(self, *, now: bool = False) -> None:
        """The selected layer's histogram (a hidden Overview: with the rest, when it shows);
        one still to compute is made off the GUI thread first (``now``: here)."""
        if self.waiting:
            return
        result, name = self.session.result, self._selected_layer()
        if not now and result is not None and not result.overview_ready(name):
            return self._when_ready(result, name, lambda: self.show_histogram(now=True))
        layer = result.layers.get(name) if result is not None and name is not None else None
        panel = self.centre.histogram_panel
        if layer is None or layer.hist is None:
            panel.clear()
        else:
            counts, edges = layer.hist
            panel.set_histogram(f"{name} · values", counts, edges)
        panel.set_layers(list(result.layers) if result is not None else [], name)

    def clear(self) -> None:
        """Empty every Overview panel (another model was opened)."""
        self.waiting = False
        c = self.centre
        maps = (c.prediction_panel, c.saliency_panel, c.gradcam_panel, c.grad_flow_panel)
        for panel in (*maps, c.stats_table, c.histogram_panel):
            panel.clear()

    def _when_ready(self, result: RunResult, name: str | None, then: Callable[[], None]) -> None:
        """Compute what the Overview reads of ``result`` off the GUI thread, then ``then()`` if
        ``result`` is still shown (after a failure too: the panels compute it and say why)."""
        # Not superseding: a histogram asked for must not drop the fill waiting before it.
        job = self.lazies.submit(lambda *_: result.warm_overview(name), supersede=False)
        again = lambda *_: self.session.result is result and then()  # noqa: E731
        job.on(finished=again, failed=again)

    def _fill(
        self,
        result: RunResult,
        run: Callable[..., None],
        *more: Callable[[], None],
        now: bool = False,
    ) -> None:
        """The predictions now, the other panels by ``run`` (then ``more``) once what they read
        exists: made off the GUI thread when a live frame left it for a read (``now``: here)."""
        c = self.centre
        c.prediction_panel.set_predictions(result.predictions, kind=result.prediction_kind)
        c.prediction_panel.set_target_text(f"Gradients of: {result.target_text}")
        if not now and not result.overview_ready(name := self._selected_layer()):
            return self._when_ready(result, name, lambda: self._fill(result, run, *more, now=True))
        for step in (
            lambda: self._show_saliency(result),
            lambda: self._show_gradcam_result(result),
            lambda: c.grad_flow_panel.set_norms(result.grad_norm_names, result.grad_norms),
            lambda: c.stats_table.set_rows(result.stats_rows()),
            *more,
        ):
            run(step)

    def _show_saliency(self, result: RunResult) -> None:
        panel = self.centre.saliency_panel
        # No stale picture from an earlier input (here and on the Grad-CAM panel).
        panel.set_image(result.image) if result.image is not None else panel.clear()
        inp = self.session.input
        if inp is not None and inp.image is None and result.image is not None and not result.origin:
            # A tensor input that looks like an image: preview it as the overlays show it.
            self.input_preview.set_image(result.image, inp.description or "tensor input")
        tokens = result.token_saliency
        if result.saliency is not None:
            panel.set_heat(result.saliency)
        elif tokens is not None:  # a text input: |gradient x embedding| on its tokens
            described = [tokens.describe(i) for i in range(len(tokens.tokens))]
            panel.set_token_values(tokens.tokens, tokens.values, described)
        else:
            panel.set_heat(None)
            panel.set_message(result.saliency_message)

    def _show_gradcam_result(self, result: RunResult) -> None:
        panel = self.centre.gradcam_panel
        panel.set_image(result.image) if result.image is not None else panel.clear()
        panel.set_layers(list(result.grad_cams), result.gradcam_default)
        self._show_gradcam(result.gradcam_default)

    def _show_gradcam(self, name: str | None) -> None:
        if (result := self.session.result) is None:
            return
        panel = self.centre.gradcam_panel
        if name is None or name not in result.grad_cams:
            panel.set_heat(None)
            panel.set_message(
                "Grad-CAM needs a ticked layer with a spatial (N, C, H, W) output and an image input."
            )
            return
        panel.set_heat(result.grad_cams[name])

    def _on_gradcam_layer_changed(self, name: str) -> None:
        if name:
            self.session.set_view(gradcam_layer=name)
            self._show_gradcam(name)


class ResultDisplay:
    """Shows ``window``'s session's result in the centre's panels, the status bar, the actions
    and the model dock; the host's ``show_error`` reports a display error."""

    def __init__(self, window: Any) -> None:
        self.session, self.actions = window.session, window.commands
        self.centre, self.model_dock = window.centre, window.model_dock
        centre, status, parent = window.centre, window.status, window
        # The widgets driven here, under the names they have on the window.
        self.tabs, self.layers_splitter = centre.tabs, centre.layers_splitter
        self.layers_scroll, self.layers_grid = centre.layers_scroll, centre.layers_grid
        self.layers_placeholder, self.channel_box = centre.layers_placeholder, centre.channel_box
        self.channel_view, self.status_label = centre.channel_view, status.status_label
        self.timing_label = status.timing_label
        #: The layer panels of the result shown, in execution order.
        self.layer_panels: dict[str, TokenLayerPanel] = {}
        #: The layer the histogram and the single-layer exports are about.
        self.selected_layer: str | None = None
        #: Called with each new layer panel, and after a panel shows a layer (what-if).
        self.panel_created: list[Callable[[LayerPanel], None]] = []
        self.panel_updated: list[Callable[[LayerPanel, PreparedLayer], None]] = []
        #: ``fill(menu, layer, channels)`` of each feature adding entries to the tile menu.
        self.tile_menu_fillers: list[Callable[[Any, str, tuple[int, ...]], None]] = []
        #: The steps of showing a result (see the module docstring).
        self.steps = DisplaySteps(parent, window.host.show_error)
        # Panels of the result shown still to be made (a few per pass), and their epoch.
        self._to_create: list[str] = []
        self._create_epoch = 0
        #: Steps held until every panel of the result exists: ``(steps' epoch, step)``.
        self._after_panels: list[tuple[int, Callable[[], None]]] = []
        #: The grid of layer panels and their waiting updates (:mod:`.panel_grid`).
        self.grid = PanelGrid(self)
        # Live timing read-out: at most every READOUT_INTERVAL_S, the last always.
        self._held_text_at = -1.0
        self._held_timer = QTimer(parent, singleShot=True)
        self._held_timer.timeout.connect(self.refresh_held_text)
        self._to_delete: list[QWidget] = []  # dropped panels, deleted a few a pass
        self._delete_soon = DeferredCall(parent, self._delete_some)
        self.overview = OverviewDisplay(self, window)
        #: ``(layer, channel)`` shown in the channel view (None: none opened).
        self.opened_channel: tuple[str, int] | None = None
        # Panels' new mosaic widths, applied together on the next pass.
        self._new_widths: dict[str, int] = {}
        self._apply_widths_soon = DeferredCall(parent, self._apply_new_widths)
        self.channel_view.step_requested.connect(self.step_channel)
        # In the pass that sent the widths: laid out and painted once, at the pages' heights.
        self.layers_grid.after_pass = self._apply_new_widths
        centre.stats_table.layer_selected.connect(self.select_layer)
        centre.histogram_panel.layer_changed.connect(self.select_layer)

    @property
    def colormap(self) -> str:
        """The colour map of the feature maps."""
        return self.actions.colormap

    @property
    def gradients_visible(self) -> bool:
        """Whether gradient magnitudes are shown beside activations."""
        return self.actions.gradients_action.isChecked()

    def set_colormap(self, name: str) -> None:
        """Show the maps in colour map ``name`` ("auto": one per layer); mosaics re-made from
        the result's views where it changes their symmetry (no new run)."""
        self.session.set_view(colormap=name)
        for layer, panel in self.layer_panels.items():
            panel.set_colormap(name)
            self.grid.refresh(layer)  # re-made in the display passes, on screen first
        self.channel_view.set_colormap(name)

    def set_gradients_visible(self, visible: bool) -> None:
        """Show (or hide) the gradient magnitudes beside the activations."""
        for panel in self.layer_panels.values():
            panel.set_gradients_visible(visible)
        self.channel_view.set_gradients_visible(visible)

    def select_layer(self, name: str | None, *, reveal: bool = True) -> None:
        """Make ``name`` the selected layer (histogram, export, tree); ``reveal`` scrolls to it
        (not for each new result: live frames must not pull the user back)."""
        self.selected_layer = name
        for panel_name, panel in self.layer_panels.items():
            panel.set_selected(panel_name == name)  # repaints only a panel that changes
        self.overview.show_histogram()
        if reveal and name is not None and name in self.layer_panels:
            self.layers_scroll.ensureWidgetVisible(self.layer_panels[name])

    def apply_result(self, result: RunResult) -> None:
        """Make ``result`` the session's result and show it (in steps, see the module doc)."""
        self.session.set_result(result)
        messages = [("error", e) for e in result.errors]
        messages += [("warning", w) for w in result.warnings]
        self.centre.banner.set_messages("run", messages)
        if result.tree is not None:
            self.model_dock.update_tree(result.tree)
        # Layer panels: exactly the ticked layers that ran, in execution order.
        for name in [n for n in self.layer_panels if n not in result.layers]:
            self._drop_panel(self.layer_panels.pop(name))
        # Panels that exist are kept; missing ones are made a few per pass (not all in one).
        self._to_create = [name for name in result.shown if name not in self.layer_panels]
        self._after_panels = []  # an older result's: it was replaced before it was shown
        self._create_epoch += 1
        for name in result.shown:
            if name in self.layer_panels:
                self.grid.configure(self.layer_panels[name], result.layers[name])
        self._create_panels(self._create_epoch, budget_s=CREATE_BUDGET_S)
        pending = {name: result.layers[name] for name in result.shown if name in self.layer_panels}
        self.grid.queue(pending)  # filled a few per pass, on-screen first
        if self.selected_layer not in result.layers:
            self.selected_layer = default_selected_layer(result)
        self.steps.epoch += 1
        self.overview.show(result)  # the predictions now, the rest in steps
        self.steps.defer(self._show_selection)

        wait = self._held_text_at + READOUT_INTERVAL_S - time.perf_counter()
        if not result.origin or wait <= 0:
            self.refresh_held_text()
        elif not self._held_timer.isActive():
            self._held_timer.start(int(wait * 1000) + 1)
        self.status_label.setText(f"{len(result.shown)} layer(s) · target {result.target_text}")

    def _create_panels(self, epoch: int, budget_s: float | None) -> None:
        """Make missing panels for at most ``budget_s`` (None: all) and lay the grid out."""
        if epoch != self._create_epoch:
            return  # a newer result decides which panels to make
        if (result := self.session.result) is None:
            self._to_create = []
            return
        end = time.perf_counter() + (float("inf") if budget_s is None else budget_s)
        made: list[str] = []
        while self._to_create and (time.perf_counter() < end or not made):
            name = self._to_create.pop(0)
            if (layer := result.layers.get(name)) is None or name in self.layer_panels:
                continue
            panel = TokenLayerPanel(name, module_type=layer.module_type)
            panel.channel_clicked.connect(self.open_channel)
            panel.page_requested.connect(self.turn_page)
            panel.mosaic_width_changed.connect(self.on_mosaic_width_changed)
            self.layer_panels[name] = panel
            for hook in self.panel_created:
                hook(panel)
            self.grid.configure(panel, layer)
            made.append(name)
        panels = self.layer_panels  # Execution order, whatever order the panels were made in.
        self.layer_panels = {n: panels[n] for n in result.shown if n in panels}
        self.grid.layout(list(self.layer_panels))
        # New panels are filled in later passes, not in the pass that made them.
        for name in made:
            self.grid.pending[name] = result.layers[name]
        self.grid.schedule()
        if not self._to_create:  # every panel exists: the steps held for the result shown
            held, self._after_panels = self._after_panels, []
            for at, step in held:
                if at == self.steps.epoch:  # else a newer result replaced it
                    self.steps.defer(step)
        else:
            # Its own epoch says when it is stale (a newer result's panels differ).
            self.defer_display(lambda: self._create_panels(epoch, CREATE_BUDGET_S), stale_ok=True)

    def panels_pending(self) -> bool:
        """Whether panels of the result shown are still to be made."""
        return bool(self._to_create)

    def refresh_held_text(self) -> None:
        """The status bar's timing and memory: ``ran in 53 ms · 1.2 MiB held (2 pinned)``."""
        self._held_timer.stop()
        self._held_text_at = time.perf_counter()
        if (result := self.session.result) is None:
            self.timing_label.clear()
            return
        secs = result.elapsed_s
        took = f"ran in {secs * 1000:.0f} ms" if secs < 10 else f"ran in {secs:.1f} s"
        text = f"{took} · {format_bytes(self.session.held_bytes())} held"
        if len(self.session.pins):
            text += f" ({len(self.session.pins)} pinned)"
        self.timing_label.setText(text)
        self.actions.unpin_action.setEnabled(self.session.pins.find(result) is not None)

    def _show_selection(self) -> None:
        self.select_layer(self.selected_layer, reveal=False)
        self.keep_open()

    def defer_display(self, step: Callable[[], None], *, stale_ok: bool = False) -> None:
        """Run ``step`` on a later event-loop pass (:meth:`DisplaySteps.defer`)."""
        self.steps.defer(step, stale_ok=stale_ok)

    def after_panels(self, step: Callable[[], None]) -> None:
        """Run ``step`` once every layer panel exists (``run_finished`` promises them)."""
        if self._to_create:
            self._after_panels.append((self.steps.epoch, step))
        else:
            self.steps.defer(step)

    def display_pending(self) -> bool:
        """Whether steps of showing a result are still waiting (see :meth:`flush_panel_updates`)."""
        return self.steps.pending() or bool(self._to_delete) or self.overview.lazies.is_busy()

    def panel_updates_pending(self) -> bool:
        """Whether some layer panels are still to be made or show an older result."""
        return bool(self.grid.pending) or bool(self._to_create)

    def flush_panel_updates(self) -> None:
        """Show the whole result now, every panel filled (before an export or a test reads)."""
        if self._to_create:
            self._create_panels(self._create_epoch, budget_s=None)
        self.steps.flush()
        self.overview.show_waiting(now=True)
        self.grid.flush()

    def clear_panels(self) -> None:
        """Empty every panel (another model was opened)."""
        self.grid.pending = {}
        self.steps.epoch += 1
        for panel in self.layer_panels.values():
            self._drop_panel(panel)
        self.layer_panels.clear()
        self.grid.layout([])
        # Another model's panels start at the top (a hidden tab keeps its scroll offset).
        self.layers_scroll.verticalScrollBar().setValue(0)
        self.layers_scroll.horizontalScrollBar().setValue(0)
        self.channel_box.setVisible(False)
        self.selected_layer = None
        self.overview.clear()
        self.timing_label.clear()
        self.status_label.clear()

    def _drop_panel(self, panel: QWidget) -> None:
        self.layers_grid.removeWidget(panel)
        # Deleted later; hidden only if on screen (a hide reaches every child), else moved away.
        if panel.isVisible() and not panel.visibleRegion().isEmpty():
            panel.setVisible(False)
        else:
            panel.move(-panel.width() - 1, panel.y())
        self._to_delete.append(panel)
        self._delete_soon.request()

    def _delete_some(self) -> None:
        for panel in self._to_delete[:DELETES_PER_PASS]:
            panel.deleteLater()
        del self._to_delete[:DELETES_PER_PASS]
        if self._to_delete:  # (with none left it must not ask again: a 0 ms loop)
            self._delete_soon.request()

    def selected_panel(self) -> QWidget:
        """The selected layer's panel (else the current tab), filled with the current result."""
        name = self.selected_layer
        if self.tabs.currentWidget() is self.layers_splitter and name in self.layer_panels:
            self.steps.flush()
            if name in self.grid.pending:
                self.grid.show_now(name, self.grid.pending[name])
            return self.layer_panels[name]
        self.flush_panel_updates()
        if self.tabs.currentWidget() is self.layers_splitter:
            return self.layers_scroll.widget()
        return self.tabs.currentWidget()

    def keep_open(self) -> None:
        """After a new result: the channel opened shows its new values (closed if it is gone)."""
        if self.channel_box.isVisible() and self.opened_channel is not None:
            if not self.open_channel(*self.opened_channel):
                self.channel_box.setVisible(False)
                self.opened_channel = None

    def open_channel(self, name: str, channel: int) -> bool:
        """Show channel ``channel`` of layer ``name`` large, beside its gradient magnitude."""
        if (result := self.session.result) is None or name not in result.layers:
            return False
        layer = result.layers[name]
        view = layer.view
        if view is None or view.kind != "maps" or not 0 <= channel < view.data.shape[0]:
            return False
        gv, shown = layer.grad_view, self.channel_view
        grad = None
        if gv is not None and gv.kind == "maps":  # |g| of this channel, not of the whole layer
            signed = getattr(gv, "magnitude_of", None)
            grad = np.abs(signed[channel]) if signed is not None else gv.data[channel]
        shown.set_colormap(self.colormap)
        shown.set_gradients_visible(self.gradients_visible)
        data, image = view.data, result.image
        shown.set_channel(
            name, channel, data[channel], grad, channels=len(data), signed=view.signed, image=image
        )
        self.opened_channel = (name, channel)
        # The layer's mosaic shows the page holding the channel opened (keys step past pages).
        before = self.page_first(name)
        if self.session.channel_pages.get(name, 0) != channel:
            self.session.set_channel_page(name, channel)
        if name in self.layer_panels and self.page_first(name) != before:
            self.grid.show_now(name, layer)
        if not self.channel_box.isVisible():
            # Its share set first: shown, the Layers tab is laid out once, at its new width.
            width = max(self.layers_splitter.width(), 600)
            share = int(width * CHANNEL_VIEW_SHARE)
            self.layers_splitter.setSizes([width - share, share])
            self.channel_box.setVisible(True)
        self.select_layer(name)
        return True

    def step_channel(self, step: int) -> bool:
        """Open the previous (``step`` -1) or next (+1) channel, in the layer's order."""
        if self.opened_channel is None:
            return False
        name, channel = self.opened_channel
        order = self.session.channel_orders.get(name)
        if order is not None and (at := order.position(channel)) is not None:
            if not 0 <= at + step < len(order.channels):
                return False
            return self.open_channel(name, order.channels[at + step])
        return self.open_channel(name, channel + step)

    def turn_page(self, name: str, step: int) -> bool:
        """Show the previous (-1) or next (+1) page of ``name`` (no new run); False if none."""
        if (layer := self._layer(name)) is None or layer.mosaic is None:
            return False
        if (panel := self.layer_panels.get(name)) is not None and panel.tile_unit():
            return False  # concepts, not channels: their feature turns the pages
        first = self.page_first(name) + step * self.page_size(name)
        order = self.session.channel_orders.get(name)
        count = len(order.channels) if order is not None else layer.mosaic.total_channels
        if not 0 <= first < count:
            return False
        # Pages of the layer's own order (sorted): its channel at that place.
        self.session.set_channel_page(name, order.channels[first] if order is not None else first)
        if name in self.layer_panels:
            self.grid.show_now(name, layer)
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
        for name, panel in self.layer_panels.items():
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
                self.grid.refresh(name)  # with the other waiting updates, on screen first
                changed = True
        return changed
