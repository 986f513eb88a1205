"""The Overview tab's panels of a result; a hidden Overview waits for the tab to be shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actviz.display.prepared import RunResult


class OverviewDisplay:
    """Fills the Overview's panels in display ``steps``; the histogram is ``selected_layer()``'s."""

    def __init__(self, display: Any) -> None:
        self.session, self.centre, self.steps = display.session, display.centre, display.steps
        self.input_preview = display.model_dock.input_preview
        self._selected_layer = lambda: display.selected_layer
        #: Live frames left the hidden Overview waiting: filled when it shows.
        self.waiting = False
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
        self._fill(result, self.steps.call if now else self.steps.defer, self.show_histogram)

    def show_histogram(self) -> None:
        """The selected layer's histogram (a hidden Overview: with the rest, when it shows)."""
        if self.waiting:
            return
        result = self.session.result
        name = self._selected_layer()
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

    def _fill(self, result: RunResult, run: Callable[..., None], *more: Callable[[], None]) -> None:
        """The predictions now, the other panels by ``run`` (then ``more``)."""
        c = self.centre
        c.prediction_panel.set_predictions(result.predictions, kind=result.prediction_kind)
        c.prediction_panel.set_target_text(f"Gradients of: {result.target_text}")
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
