"""The Compare tab's logic: choose run B, run the comparison on the capture worker, show it.

Run A is the latest result the window shows (``session.result``, maybe a pin shown again).
Run B is one of:

* a pinned result: its capture is kept with the pin (pins count in the memory held);
* another input: the window's model on an input opened by the window's input loader;
* another model: opened through the window's Open model dialog (the same
  :class:`~actviz.ui.window.dialogs.OpenModelDialog`, the same model loader and trust
  question) and run on run A's input. A model without run A's layers is refused in the
  dialog, which stays open.

Captures go to the window's capture worker (one model, one worker: run B may hook the window's
own model), submitted without superseding what runs there; the comparison's job handle
reports to this controller alone. A comparison asked for while a run is on
its way waits for it, so run A is the newest result. The outcome keeps pictures and figures
only: run B's capture is freed once compared.

Difference panels are made and painted as they come near the difference area's view (the
comparison arrives, the area is scrolled or resized, the tab is shown), one at a time with what
is in view kept in place: all of a ResNet-18's at once blocked the GUI thread for about a
second. A panel kept from the comparison before shows nothing until painted with this one.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QScrollArea,
    QWidget,
)

from actviz.core.capture import format_bytes
from actviz.display.colormaps import AUTO
from actviz.display.difference import DIFFERENCE_CMAP
from actviz.display.mosaic import MIN_PAGE_CHANNELS, page_channels_for
from actviz.display.prepare import with_page
from actviz.display.prepared import DisplaySpec, PreparedLayer
from actviz.ui.background_loads import (
    IMAGE_FILTER,
    TENSOR_FILTER,
    arch_needed_text,
    describe_error,
    short_source,
)
from actviz.ui.compare.view import CompareView
from actviz.ui.file_dialogs import remember, start_folder
from actviz.ui.host import FeatureBase, FeatureJob, WindowHost
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.feature_map import MIN_PANEL_HEIGHT
from actviz.ui.worker import Worker
from actviz.workspace.compare_job import (
    INPUT,
    MODEL,
    PIN,
    CompareOutcome,
    CompareRequest,
    compare_job,
    layer_mismatch,
)

log = logging.getLogger(__name__)

__all__ = ["CompareController"]

#: What the tab says before any comparison.
FIRST_NOTE = "Run A is the latest run the window shows; choose B and press Compare."

#: Title of the Compare tab.
TAB_TITLE = "Compare"
#: Said above a comparison whose run A is no longer the latest result.
STALE_NOTE = "Run A changed since this comparison: press Compare to compare the latest run."
#: Difference panels this far (a fraction of the area's height) above or below the area are
#: painted after those in it (one per event-loop pass), so that a little scrolling finds them
#: painted.
PAINT_MARGIN = 0.5


class CompareController(FeatureBase, QObject):
    """Drives the Compare tab of ``window`` (see the module docstring).

    Signals
    -------
    compare_finished()
        A comparison is shown.
    compare_failed(str)
        A comparison could not be made (the message, also shown in the tab).
    model_b_loaded(str)
        The second model opened from that source (and fits run A's layers).
    """

    compare_finished = Signal()
    compare_failed = Signal(str)
    model_b_loaded = Signal(str)

    name = "compare"

    def __init__(self, host: WindowHost, view: CompareView | None = None) -> None:
        QObject.__init__(self, host.dialog_parent())
        self.window = host
        self.session = host.session
        self.worker = host.worker
        self.view = view or CompareView()
        #: The tab's page: the view, scrolled when the window is smaller than its minimum
        #: (as the Overview's), so the Compare tab never sets the window's minimum size.
        self.page = QScrollArea()
        self.page.setObjectName("comparePage")
        self.page.setWidgetResizable(True)
        self.page.setFrameShape(QFrame.Shape.NoFrame)
        self.page.setWidget(self.view)
        self._to_reveal = ""
        self._reveal_soon = DeferredCall(self, lambda: self._reveal(self._to_reveal))
        #: Model loads of the second model (a new module nobody else holds: its own threads).
        self.loads = Worker(self, max_threads=2)
        #: The second model (a ``LoadedModel``), once opened.
        self.model_b: Any = None
        #: The comparison shown (None before the first).
        self.outcome: CompareOutcome | None = None
        #: The Open model B dialog while it is open.
        self.model_dialog: Any = None
        self._label_b = ""
        # Run A of the comparison shown (weak: a comparison must not keep a capture alive).
        self._compared_a: weakref.ref[Any] | None = None
        self._waiting = False
        self._load: dict[str, Any] | None = None
        self._pages: dict[str, int] = {}
        # Difference panels not painted with the comparison shown: painted once they come
        # near the area's view (each is a few pyqtgraph canvases: all ResNet-18's at once
        # blocked the GUI thread for most of a second) and the tab is on screen (a canvas
        # filled while hidden keeps the view range of its hidden size).
        self._unpainted: set[str] = set()
        # The first divergence's panel, scrolled to once the tab is on screen.
        self._reveal_name: str | None = None
        self._painting = False
        self._paint_timer = QTimer(self)
        self._paint_timer.setSingleShot(True)
        self._paint_timer.setInterval(0)
        self._paint_timer.timeout.connect(self._paint_in_view)
        self._margin_timer = QTimer(self)
        self._margin_timer.setSingleShot(True)
        self._margin_timer.setInterval(0)
        self._margin_timer.timeout.connect(self._paint_near_view)
        self._page_sizes: dict[str, int] = {}
        self._closed = False
        self._width_timer = QTimer(self)
        self._width_timer.setSingleShot(True)
        self._width_timer.setInterval(0)
        self._width_timer.timeout.connect(self._apply_widths)
        self._new_widths: dict[str, int] = {}

        v = self.view
        v.compare_requested.connect(self.compare)
        v.source_changed.connect(self._on_view_source_changed)
        v.browse_input_requested.connect(self.browse_input)
        v.open_model_requested.connect(self.open_model_dialog)
        v.chart.layer_clicked.connect(self.go_to_layer)
        v.page_requested.connect(self._on_page_requested)
        v.mosaic_width_changed.connect(self._on_width_changed)
        v.channel_clicked.connect(self.open_channel)
        # Scrolled: painted at once (before the area is drawn); resized: once laid out.
        v.diff_scrolled.connect(self._paint_in_view)
        v.diff_resized.connect(self._paint_timer.start)
        #: The comparison on the capture worker.
        self.job = FeatureJob(
            self,
            host,
            self.view,
            failed="Could not compare",
            failed_status="Comparison failed",
            cancelled="The comparison was cancelled.",
            cancelled_status="Comparison cancelled",
            interrupted="A new run replaced the comparison: press Compare again.",
            log_as="comparison",
            on_finished=self._on_compared,
            on_failed=self.compare_failed.emit,
            steps=False,
        )
        host.tab_changed.connect(self._on_tab_changed)
        self.session.pins_changed.connect(self._refresh_pins)
        self.session.model_changed.connect(self._on_session_model_changed)
        self.session.input_changed.connect(self._refresh_input_choices)
        self.session.result_changed.connect(self._on_session_result_changed)
        self._refresh_pins()
        self._refresh_input_choices()
        v.clear(FIRST_NOTE)
        host.add_tab(self.page, TAB_TITLE)

    # ========================================================================== public API
    def cancel(self) -> bool:
        """Esc: a comparison waiting for the run before it never starts."""
        return self.cancel_waiting()

    def is_busy(self) -> bool:
        """True while a comparison waits for the worker, runs, or model B opens."""
        return self.job.running or self._waiting or self._load is not None

    def compare_with_pin(self, pin: Any) -> bool:
        """Compare the latest run with ``pin`` (a :class:`~actviz.workspace.pins.Pin`)."""
        pins = list(self.session.pins)
        if pin not in pins:
            return False
        self.window.show_tab(self.page)
        self.view.set_source(PIN)
        self._refresh_pins(current=pins.index(pin))
        return self.compare()

    def compare_with_input(self, source: str) -> bool:
        """Compare the latest run with the window's model run on input ``source``."""
        self.view.set_source(INPUT)
        self.view.input_combo.setEditText(str(source))
        return self.compare()

    def compare(self) -> bool:
        """Start comparing the latest run with the chosen run B.

        Returns False (and says why in the tab) when it cannot start: no run yet, no pin,
        no input or no second model chosen.
        """
        if self._closed:
            return False
        result = self.session.result
        if result is None or result.capture is None:
            return self._refuse("No run A yet: run the model first (Ctrl+R).")
        source = self.view.source
        if source == PIN and not len(self.session.pins):
            return self._refuse(
                "No pinned result: pin a run with Run > Pin this result (Ctrl+P), "
                "change the input or the model's state, run again, then compare."
            )
        if source == INPUT and not self.view.input_combo.currentText().strip():
            return self._refuse("Type or browse to an input for run B.")
        if source == MODEL and self.model_b is None:
            return self._refuse("Open model B first (Open model B…).")
        if self.worker.has_current_job() and not self.job.running:
            # Run A is the result of the run on its way: wait for it.
            self._waiting = True
            self._await_worker()
            self.view.set_busy(True)
            self.view.set_message(
                "Waiting for the current run to finish (live mode: pause it to compare)…"
            )
            return True
        self._start()
        return True

    def go_to_layer(self, name: str) -> bool:
        """Show layer ``name``'s panel in the Layers tab, selected (a chart point's click)."""
        panels = self.window.layer_panels
        if name not in panels:
            self.view.set_message(
                f"{name or '(model)'} has no panel in the Layers tab: tick it in the module "
                "tree to see it there.",
                error=True,
            )
            return False
        self.window.show_tab(None)
        self.window.select_layer(name)
        # Once the tab is laid out, bring the panel into view for sure (a timer of this
        # feature's: a single shot's function would outlive the window it closes over).
        self._to_reveal = name
        self._reveal_soon.request()
        return True

    def open_channel(self, name: str, channel: int) -> bool:
        """Open channel ``channel`` of run A's layer ``name`` large in the Layers tab (a
        difference tile's click)."""
        if name not in self.window.layer_panels:
            return self.go_to_layer(name)
        self.window.show_tab(None)
        return bool(self.window.open_channel(name, channel))

    def browse_input(self) -> str:
        """Pick input B with a file dialog (the window's image and tensor filters)."""
        recent = self.window.settings.recent_inputs()
        path, _ = QFileDialog.getOpenFileName(
            self._parent(),
            "Open input B",
            start_folder(recent[0] if recent else None),
            ";;".join([IMAGE_FILTER, TENSOR_FILTER, "All files (*)"]),
        )
        if path:
            remember(path)
            self.compare_with_input(path)
        return path

    def open_model_dialog(self) -> Any:
        """Show the window's Open model dialog for model B (window-modal, not blocking).

        It stays open while model B loads, closes once it opened and fits run A's layers,
        and otherwise says why, path kept (as when opening the main model).
        """
        if self.model_dialog is not None:
            self.model_dialog.raise_()
            return self.model_dialog
        dialog = self.window.model_dialog(keep_open=True)
        dialog.setWindowTitle("Open model B (to compare) — actviz")
        dialog.open_requested.connect(lambda spec: self._load_model_b(dialog, spec))
        dialog.finished.connect(lambda _code: self._on_model_dialog_finished(dialog))
        self.model_dialog = dialog
        dialog.open()
        return dialog

    def clear(self, message: str = "") -> None:
        """Forget the comparison shown (its pictures are freed)."""
        self.outcome = None
        self._unpainted = set()
        self._reveal_name = None
        self._pages.clear()
        self.view.clear(message)

    def session_part(self) -> dict[str, Any]:
        """The comparison set-up a session file keeps: run A is the latest run; run B is a
        pin (its label), an input (its source) or a second model (its source)."""
        v = self.view
        setup: dict[str, Any] = {"a": "current", "mode": v.source}
        pins = list(self.session.pins)
        if v.source == PIN and pins:
            setup["b"] = pins[min(max(v.pin_combo.currentIndex(), 0), len(pins) - 1)].label
        elif v.source == INPUT:
            setup["b"] = v.input_combo.currentText().strip()
        elif v.source == MODEL and self.model_b is not None:
            setup["b"] = str(self.model_b.source)
        return {"comparison": setup}

    def report_part(self) -> dict[str, Any]:
        """The comparison shown, for File > Export report, when its run A is the run shown."""
        ref = self._compared_a
        if self.outcome is None or ref is None or ref() is not self.session.result:
            return {}
        return {
            "comparison": self.outcome.comparison,
            "comparison_label": f"Run A (the run shown) against run B ({self._label_b}).",
        }

    def restore_session_part(self, parts: Any) -> None:
        """Choose run B as a session file's set-up says (nothing runs; a second model is
        named, to be opened again)."""
        setup = parts.get("comparison") or {}
        mode, b = setup.get("mode"), setup.get("b")
        if mode not in (PIN, INPUT, MODEL):
            return
        self.view.set_source(mode)
        labels = [p.label for p in self.session.pins]
        if mode == PIN and b in labels:
            self._refresh_pins(current=labels.index(b))
        elif mode == INPUT and b:
            self.view.input_combo.setEditText(str(b))
        elif mode == MODEL and b and self.model_b is None:
            self.view.set_model_text(f"the session compared with {b}: open model B again")

    def shutdown(self) -> None:
        """The window closes: stop loads, let go of the session's events."""
        if self._closed:
            return
        self._closed = True
        self._width_timer.stop()
        self._paint_timer.stop()
        self._margin_timer.stop()
        self.loads.shutdown(timeout_ms=0)
        for event, slot in (
            (self.session.pins_changed, self._refresh_pins),
            (self.session.model_changed, self._on_session_model_changed),
            (self.session.input_changed, self._refresh_input_choices),
            (self.session.result_changed, self._on_session_result_changed),
        ):
            event.disconnect(slot)

    # ========================================================================== running
    def cancel_waiting(self) -> bool:
        """Esc while a comparison waits for the run before it: it never starts."""
        if not self._waiting:
            return False
        self._waiting = False
        self.view.set_busy(False)
        self._refuse("The comparison was cancelled.")
        return True

    def _refuse(self, text: str) -> bool:
        self.view.set_message(text, error=True)
        self.compare_failed.emit(text)
        return False

    def _start(self) -> None:
        self._waiting = False
        try:
            request, label = self._request()
        except ValueError as exc:
            self.view.set_busy(False)
            self._refuse(str(exc))
            return
        self._label_b = label
        self._compared_a = weakref.ref(self.session.result)
        self.job.start(
            lambda stop, progress: compare_job(request, stop, progress),
            message=f"Comparing the latest run (A) with {label} (B)…",
            status=f"Comparing with {label}…",
            done=f"Compared with {label}",
            failed=f"Could not compare with {label}",
        )

    def _request(self) -> tuple[CompareRequest, str]:
        s = self.session
        result = s.result
        assert result is not None and result.capture is not None
        cap_a = result.capture
        spec = result.spec
        spec = DisplaySpec(
            layers=tuple(n for n in result.shown if n in cap_a),
            # One scale per layer: per-channel scales would blow float noise in an unchanged
            # channel up to full colour beside a channel that really changed.
            normalize="shared",
            sample=spec.sample,
            categories=spec.categories,
            channel_pages=dict(self._pages),
            page_channels=dict(self._page_sizes),
            colormap=AUTO,
        )
        common = dict(
            cap_a=cap_a,
            spec=spec,
            categories=list(spec.categories) if spec.categories else s.categories,
            target=result.target_index,
            max_bytes=s.memory_budget,
            input_as_list=s.input_as_list,
        )
        source = self.view.source
        if source == PIN:
            pins = list(s.pins)
            if not pins:  # unpinned while the comparison waited for the run before it
                raise ValueError("The pinned result was unpinned: pin a result to compare with.")
            pin = pins[min(max(self.view.pin_combo.currentIndex(), 0), len(pins) - 1)]
            if pin.result.capture is None:
                raise ValueError(f"The pinned result {pin.label} holds no capture to compare.")
            return CompareRequest(mode=PIN, cap_b=pin.result.capture, **common), (
                f"pinned {pin.label}"
            )
        if source == INPUT:
            text = self.view.input_combo.currentText().strip()
            request = CompareRequest(
                mode=INPUT,
                model=s.model,
                input_source=text,
                input_loader=self.window.input_loader,
                loaded_model=s.loaded_model,
                **common,
            )
            return request, f"input {short_source(text)}"
        loaded = self.model_b
        inputs = cap_a.inputs if cap_a.inputs is not None else s.input.value if s.input else None
        if inputs is None:
            raise ValueError("Run A kept no input to run model B on: run the model again.")
        return CompareRequest(mode=MODEL, model=loaded.model, inputs=inputs, **common), (
            f"model {loaded.name}"
        )

    def _on_compared(self, outcome: Any, _context: Any) -> None:
        try:
            self._show(outcome)
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not show the comparison")
            self._refuse(f"Could not show the comparison: {describe_error(exc)}")
            return
        self.compare_finished.emit()

    def _await_worker(self) -> None:
        """Try again when each job now on the capture worker ends (run A is on its way)."""
        for job in self.worker.jobs():
            job.on(
                finished=self._start_if_waiting,
                failed=self._start_if_waiting,
                cancelled=self._start_if_waiting,
                superseded=self._start_if_waiting,
            )

    def _start_if_waiting(self, *_args: Any) -> None:
        if not self._waiting:
            return
        if self.worker.has_current_job():
            self._await_worker()  # still a run on its way (a newer one may have replaced it)
            return
        result = self.session.result
        if result is None or result.capture is None:
            self._waiting = False
            self.view.set_busy(False)
            self._refuse("The run failed, so there is no run A to compare.")
            return
        # After the window's own slot: the result it just showed is run A.
        QTimer.singleShot(0, self._start_waiting)

    def _start_waiting(self) -> None:
        if self._waiting and not self._closed:
            self._start()

    # ========================================================================== showing
    def _show(self, outcome: CompareOutcome) -> None:
        self.outcome = outcome
        v = self.view
        comparison = outcome.comparison
        v.chart.set_comparison(comparison)
        change = outcome.predictions
        if not change.rows:
            v.predictions.set_message(f"No predictions to compare: {change.message}.")
        else:
            v.predictions.set_change(change)
        order = list(outcome.differences)
        v.layout_diff_panels(order)
        self._unpainted = set(order)
        first = comparison.first_divergence
        # Where the runs part is what one looks at first.
        self._reveal_name = first.name if first is not None and first.name in order else None
        self._paint_in_view()
        # A panel kept from the last comparison shows nothing rather than its old data until
        # it is painted with this one.
        for name in order:
            if name in self._unpainted:
                layer = outcome.differences[name]
                v.blank_diff_panel(name, _panel_title(layer))
        parts = [
            f"A: the latest run · B: {self._label_b}",
            f"{len(comparison.layers)} layer(s) compared",
        ]
        if first is None:
            parts.append(f"no layer differs beyond rel L2 {comparison.tol:g}")
        else:
            parts.append(f"first divergence: {first.name or '(model)'} (rel L2 {first.rel_l2:.3g})")
        if comparison.output is not None:
            out = comparison.output
            parts.append(f"output: cosine {out.cosine:.4g}, rel L2 {out.rel_l2:.3g}")
        if comparison.skipped:
            parts.append(f"{len(comparison.skipped)} layer call(s) not comparable (shapes)")
        if outcome.input_description:
            parts.append(f"input B: {outcome.input_description}")
        parts.append(
            f"B's capture took {format_bytes(outcome.nbytes)} (freed), the differences "
            f"hold {format_bytes(outcome.held_bytes)}"
        )
        text = " · ".join(parts)
        if outcome.warnings:
            text += "\n" + " ".join(outcome.warnings)
        v.set_message(text)

    def _on_tab_changed(self, _widget: object) -> None:
        if self._unpainted and self.window.current_tab() is self.page:
            # On the next pass: the tab's widgets get their geometry first.
            self._paint_timer.start()

    def _paint_in_view(self) -> None:
        """Paint the difference panels waiting in the area's view now (when the tab first
        shows a comparison, scroll to its first divergence first); those near it follow,
        one per event-loop pass."""
        if self._closed or self._painting or not self.page.isVisible():
            return
        if not self._unpainted and self._reveal_name is None:
            return
        self._painting = True
        try:
            v = self.view
            if self._reveal_name is not None:
                name, self._reveal_name = self._reveal_name, None
                v.reveal_diff_panel(name)
            self._paint_each(0)
        finally:
            self._painting = False
        if self._near_view():
            self._margin_timer.start()

    def _paint_near_view(self) -> None:
        """One panel near the area's view (after any that came into it): a little scrolling
        finds it painted, and no pass paints more than what is in view."""
        if self._closed or self._painting or not self.page.isVisible():
            return
        self._painting = True
        try:
            self._paint_each(0)
            self._paint_each(self._margin_px(), most=1)
        finally:
            self._painting = False
        if self._near_view():
            self._margin_timer.start()

    def _paint_each(self, margin: int, most: int | None = None) -> None:
        # One at a time, in depth order: a painted panel takes the height its mosaic asks
        # for, which moves the others (often out of reach).
        v = self.view
        painted = 0
        while self._unpainted and not self._closed and (most is None or painted < most):
            names = v.diff_panels_near_view(self._unpainted, margin)
            if not names:
                break
            # Panels above the view grow as they are painted: what is in view stays put.
            anchor = v.diff_anchor()
            self._unpainted.discard(names[0])
            self._paint(names[0])
            v.keep_diff_anchor(anchor)
            painted += 1

    def _margin_px(self) -> int:
        return int(PAINT_MARGIN * self.view.diff_scroll.viewport().height())

    def _near_view(self) -> bool:
        """Whether panels in or near the area's view wait to be painted."""
        return bool(
            self._unpainted and self.view.diff_panels_near_view(self._unpainted, self._margin_px())
        )

    def diff_panels_pending(self) -> bool:
        """Whether difference panels in (or near) the area's view wait to be painted: the
        Compare tab is not on screen, or has not been laid out since (the others are painted
        when scrolled to, see :meth:`diff_panels_unpainted`)."""
        if not self._unpainted:
            return False
        if not self.page.isVisible() or self._paint_timer.isActive():
            return True
        return self._margin_timer.isActive() or self._near_view()

    def diff_panels_unpainted(self) -> list[str]:
        """The layers whose difference panels wait to be scrolled to (or for the tab to
        show), in depth order: they show nothing until painted."""
        return [name for name in self.view.diff_order() if name in self._unpainted]

    def paint_diff_panels(self) -> None:
        """Paint every difference panel now (the tab must be on screen), e.g. before reading
        them all."""
        for name in self.diff_panels_unpainted():
            self._unpainted.discard(name)
            self._paint(name)

    def _paint(self, name: str) -> None:
        outcome = self.outcome
        if outcome is None or name not in outcome.differences:
            return
        if not self.page.isVisible():
            self._unpainted.add(name)
            return
        layer: PreparedLayer = outcome.differences[name]
        panel = self.view.diff_panel(name)
        panel.set_module_type(_panel_title(layer))
        if panel.activation_slot.view is None:
            # Not the height it held while blank (see CompareView.blank_diff_panel).
            panel.set_minimum_panel_height(MIN_PANEL_HEIGHT)
        # A - B on the diverging map, |A - B| on the sequential one |gradient| takes.
        panel.activation_slot.set_colormap(DIFFERENCE_CMAP)
        panel.gradient_slot.set_colormap(AUTO)
        layer = with_page(
            layer,
            self._page_first(name, layer),
            page_size=self._page_sizes.get(name),
            symmetric=True,
        )
        if layer.view is None:
            panel.clear()
            return
        panel.set_activation(layer.view, layer.mosaic)
        panel.set_gradient(layer.grad_view, layer.grad_mosaic)

    def _page_size(self, name: str, layer: PreparedLayer) -> int:
        size = self._page_sizes.get(name)
        if size is None:
            size = layer.mosaic.page_size if layer.mosaic is not None else 1
        return max(1, int(size))

    def _page_first(self, name: str, layer: PreparedLayer) -> int:
        size = self._page_size(name, layer)
        return (max(0, self._pages.get(name, 0)) // size) * size

    def _on_page_requested(self, name: str, step: int) -> None:
        self.turn_page(name, step)

    def turn_page(self, name: str, step: int) -> bool:
        """Show the previous (-1) or next (+1) page of layer ``name``'s difference mosaic."""
        outcome = self.outcome
        layer = outcome.differences.get(name) if outcome is not None else None
        if layer is None or layer.mosaic is None:
            return False
        first = self._page_first(name, layer) + step * self._page_size(name, layer)
        if not 0 <= first < layer.mosaic.total_channels:
            return False
        self._pages[name] = first
        if name not in self._unpainted:
            self._paint(name)
        return True

    def _on_width_changed(self, name: str, width: int) -> None:
        self._new_widths[name] = width
        if not self._width_timer.isActive():
            self._width_timer.start()

    def _apply_widths(self) -> None:
        widths, self._new_widths = self._new_widths, {}
        outcome = self.outcome
        for name, width in widths.items():
            if name in self._unpainted:
                continue  # painted with the page size its width takes once in view
            layer = outcome.differences.get(name) if outcome is not None else None
            if layer is None or layer.view is None or layer.view.kind != "maps":
                continue
            total, height, tile_w = layer.view.data.shape
            size = page_channels_for(total, height, tile_w, width, min_channels=MIN_PAGE_CHANNELS)
            if size != self._page_sizes.get(name):
                self._page_sizes[name] = size
                self._paint(name)

    def _reveal(self, name: str) -> None:
        if not self._closed:
            self.window.reveal_panel(name)

    # ========================================================================== choices
    def _on_view_source_changed(self, source: str) -> None:
        if source == MODEL and self.model_b is None:
            self.view.set_message("Open model B: a checkpoint of the same architecture.")
        else:
            self.view.set_message("")

    def _refresh_pins(self, current: int | None = None) -> None:
        self.view.set_pins([p.label for p in self.session.pins], current)

    def _refresh_input_choices(self) -> None:
        choices: list[str] = []
        choices += [str(p) for p in self.window.sample_inputs()]
        choices += [r for r in self.window.settings.recent_inputs() if r not in choices]
        inp = self.session.input
        value = inp.value if inp is not None else None
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape):
            choices.append("random:" + "x".join(str(int(d)) for d in shape) + ":1")
        self.view.set_input_choices(choices)

    def _on_session_result_changed(self) -> None:
        ref = self._compared_a
        if self.outcome is None or ref is None or self.job.running:
            return
        if self.session.result is not ref() and not self.view.is_error():
            self.view.set_message(
                f"{STALE_NOTE}\n{self.view.message().removeprefix(STALE_NOTE + chr(10))}"
            )

    def _on_session_model_changed(self) -> None:
        # Another model: comparisons of the old one no longer match the tree or the panels.
        had = self.outcome is not None or self.view.is_error()
        self.clear("Another model was opened: compare its runs anew." if had else FIRST_NOTE)
        self._page_sizes.clear()
        self._waiting = False

    # ========================================================================== model B
    def _load_model_b(self, dialog: Any, spec: Any, *, trust: bool = False) -> None:
        if self._closed:
            return
        loader = self.window.model_loader
        load = dict(dialog=dialog, spec=spec, trust=trust)
        self.loads.submit(
            lambda stop, progress: loader(
                spec.source, arch=spec.arch, weights=spec.weights, trust=trust
            )
        ).on(
            finished=lambda loaded: self._on_load_finished(load, loaded),
            failed=lambda error: self._on_load_errored(load, error),
            cancelled=lambda: self._on_load_cancelled(load),
        )
        self._load = load
        self.window.refresh_busy(f"Opening model B {short_source(spec.source)}…")

    def _on_load_finished(self, load: dict[str, Any], loaded: Any) -> None:
        if load is not self._load:
            return
        self._load = None
        dialog = load["dialog"]
        text = self._mismatch_with_a(loaded.model)
        if text:
            self.window.refresh_busy("Model B does not fit run A")
            self._fail_load(dialog, text)
            return
        self.model_b = loaded
        self.view.set_model_text(f"model B: {loaded.name}")
        self.view.model_label.setToolTip(str(load["spec"].source))
        self.window.refresh_busy(f"Opened model B {loaded.name}")
        if dialog is not None and dialog is self.model_dialog:
            dialog.opened()
        self.model_b_loaded.emit(load["spec"].source)
        self.view.set_source(MODEL)
        self.compare()

    def _mismatch_with_a(self, model: Any) -> str:
        result = self.session.result
        if result is not None and result.capture is not None:
            return layer_mismatch(result.capture, model, list(result.capture.names))
        names = self.session.ticked
        modules = dict(model.named_modules())
        missing = [n for n in names if n not in modules]
        if missing:
            return (
                "Model B is not the architecture of the window's model: it has no "
                + ", ".join(repr(n) for n in missing[:5])
                + ". Open a checkpoint of the same architecture."
            )
        return ""

    def _on_load_errored(self, load: dict[str, Any], error: BaseException) -> None:
        from actviz.io.errors import ArchitectureNeededError, UntrustedFileError

        if load is not self._load:
            return
        self._load = None
        dialog, spec = load["dialog"], load["spec"]
        if isinstance(error, UntrustedFileError) and not load["trust"]:
            if self.window.confirm_untrusted(self._parent(), error.path, str(error)):
                self._load_model_b(dialog, spec, trust=True)
                return
            self._fail_load(dialog, f"Not opened: {error.path} was not trusted.")
            return
        if isinstance(error, ArchitectureNeededError):
            text = arch_needed_text(error, in_dialog=dialog is not None)
            self._fail_load(dialog, text, path=error.path, candidates=error.candidates)
            return
        text = f"Could not open model B {spec.source!r}: {describe_error(error)}"
        self._fail_load(dialog, text, path=spec.source)

    def _on_load_cancelled(self, load: dict[str, Any]) -> None:
        if load is self._load:
            self._load = None
            self.window.refresh_busy()

    def _fail_load(
        self, dialog: Any, text: str, *, path: str = "", candidates: Sequence[Any] = ()
    ) -> None:
        self.window.refresh_busy(text)
        if dialog is not None and dialog is self.model_dialog:
            keep = path if path and Path(path).exists() else ""
            dialog.show_failure(text, path=keep, candidates=candidates)
        self._refuse(text)

    def _on_model_dialog_finished(self, dialog: Any) -> None:
        if self.model_dialog is dialog:
            self.model_dialog = None
        load = self._load
        if load is not None and load["dialog"] is dialog:
            self.loads.drop()  # closed while model B was loading
            self._load = None
            self.window.refresh_busy()
        dialog.deleteLater()

    def _parent(self) -> QWidget | None:
        return self.window.dialog_parent()


def _panel_title(layer: PreparedLayer) -> str:
    """A difference panel's module type: ``Conv2d · A − B``."""
    return f"{layer.module_type} · A − B" if layer.module_type else "A − B"
