"""The Compare tab's logic: run A (the result shown) against run B (a pin, another input or
model), on the capture worker without superseding, so run A is the newest."""

from __future__ import annotations

import logging
import weakref
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from actviz.core.capture import format_bytes
from actviz.display.colormaps import AUTO
from actviz.display.prepared import DisplaySpec
from actviz.ui.background_loads import ModelRequest, describe_error, short_source
from actviz.ui.compare.diff_painter import DiffPainter
from actviz.ui.compare.view import CompareView
from actviz.ui.host import FeatureBase, FeatureJob, WindowHost
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.style import scroll_area
from actviz.ui.worker import CAPTURE_NICE, Worker
from actviz.workspace import run_request
from actviz.workspace.run_request import INPUT, MODEL, PIN, CompareOutcome, CompareRequest

log = logging.getLogger(__name__)

#: What the tab says before any comparison.
FIRST_NOTE = "Run A is the latest run the window shows; choose B and press Compare."
#: Said above a comparison whose run A is no longer the latest result.
STALE_NOTE = "Run A changed since this comparison: press Compare to compare the latest run."
#: What Compare waits for, by what is missing (its tooltip while it is off).
MISSING = {
    "run": "No run A yet: run the model first (Ctrl+R).",
    PIN: "No pinned result: pin a run with Run > Pin this result (Ctrl+P), change the input or "
    "the model's state, run again, then compare.",
    INPUT: "Type or browse to an input for run B.",
    MODEL: "Open model B first (Open model B…).",
}


class CompareController(FeatureBase, QObject):
    """Drives the Compare tab (``compare_finished``, ``compare_failed``)."""

    compare_finished = Signal()
    compare_failed = Signal(str)

    name = "compare"

    def __init__(self, host: WindowHost, view: CompareView | None = None) -> None:
        super().__init__(host)
        self.worker = host.worker
        self.view = view or CompareView()
        #: The tab's page scrolls, so it never sets the window's minimum size.
        self.page = scroll_area(self.view, name="comparePage", frameless=True)
        self._to_reveal = ""
        self._reveal_soon = DeferredCall(
            self, lambda: self._closed or self.host.reveal_panel(self._to_reveal)
        )
        self.painter = DiffPainter(self.view, self.page, self)
        # The panels a turn after the chart and the predictions: one pass held the window
        # 120 ms with 56 layers (the chart, the table and the first panels, painted together).
        self._panels_soon = DeferredCall(self, self._show)
        #: Model B (a ``LoadedModel``) once opened, the Open model B dialog while it is open,
        #: the model B being opened, and its loads (a new module nobody holds: its own threads).
        self.model_b: Any = None
        self.model_dialog: Any = None
        self.b_request: ModelRequest | None = None
        self.b_loads = Worker(self, max_threads=2, nice=CAPTURE_NICE)
        self.outcome: CompareOutcome | None = None  #: The comparison shown (None before the first).
        self._label_b = ""
        # Run A of the comparison shown (weak: a comparison must not keep a capture alive).
        self._compared_a: weakref.ref[Any] | None = None
        self._waiting = False

        v = self.view
        v.compare_requested.connect(self.compare)
        v.source_changed.connect(self._on_view_source_changed)
        v.browse_input_requested.connect(self.browse_input)
        v.open_model_requested.connect(self.open_model_dialog)
        v.input_combo.editTextChanged.connect(self._refresh_ready)
        v.chart.layer_clicked.connect(self.go_to_layer)
        v.channel_clicked.connect(self.open_channel)
        self.job = FeatureJob(
            self,
            host,
            self.view,
            failed="Could not compare",
            status="Comparison",
            cancelled="The comparison was cancelled.",
            interrupted="A new run replaced the comparison: press Compare again.",
            log_as="comparison",
            on_finished=self._on_compared,
            on_failed=self.compare_failed.emit,
            steps=False,
        )
        self.listen(host.tab_changed, lambda w: w is self.page and self.painter.tab_shown())
        self.listen(self.session.pins_changed, self._refresh_pins)
        self.listen(self.session.model_changed, self._on_session_model_changed)
        self.listen(self.session.input_changed, self._refresh_input_choices)
        self.listen(self.session.result_changed, self._on_session_result_changed)
        self._refresh_pins()
        self._refresh_input_choices()
        v.clear(FIRST_NOTE)
        host.add_tab(self.page, "Compare")
        host.offer_pin_comparison(self.compare_with_pin)

    def cancel(self) -> bool:
        """Esc: a comparison waiting for the run before it never starts."""
        if waiting := self._waiting:
            self._give_up("The comparison was cancelled.")
        return waiting

    def is_busy(self) -> bool:
        """True while a comparison waits for the worker, runs, or model B opens."""
        busy = self.job.running or self._waiting or self.b_request is not None
        return busy or self._panels_soon.pending()

    def open_model_dialog(self) -> Any:
        """Show the window's Open model dialog for model B (open while model B loads)."""
        if self.model_dialog is not None:
            self.model_dialog.raise_()
            return self.model_dialog
        dialog = self.model_dialog = self.host.model_dialog(keep_open=True)
        dialog.setWindowTitle("Open model B (to compare) — actviz")
        dialog.open_requested.connect(lambda spec: self._open_model_b(dialog, spec))
        dialog.finished.connect(lambda _code: self._on_model_dialog_finished(dialog))
        dialog.open()
        return dialog

    def compare_with_pin(self, pin: Any) -> bool:
        """Compare the latest run with ``pin`` (a :class:`~actviz.workspace.pins.Pin`)."""
        if pin not in (pins := list(self.session.pins)):
            return False
        self.host.show_tab(self.page)
        self.view.set_source(PIN)
        self._refresh_pins(current=pins.index(pin))
        return self.compare()

    def compare_with_input(self, source: str) -> bool:
        """Compare the latest run with the window's model run on input ``source``."""
        self.view.set_source(INPUT)
        self.view.input_combo.setEditText(str(source))
        return self.compare()

    def compare(self) -> bool:
        """Start comparing the latest run with run B; False (saying why) when it cannot start."""
        if self._closed:
            return False
        if text := self.missing():
            return self._refuse(text)
        if self.worker.has_current_job() and not self.job.running:
            # Run A is the result of the run on its way: wait for it.
            self._waiting = True
            self._await_worker()
            self.view.set_busy(True)
            text = "Waiting for the current run to finish (live mode: pause it to compare)…"
            self.view.set_message(text)
            return True
        self._start()
        return True

    def missing(self) -> str:
        """What Compare needs before it can start ("" when nothing): Compare is off until then."""
        if (result := self.session.result) is None or result.capture is None:
            return MISSING["run"]
        if (source := self.view.source) == PIN and not len(self.session.pins):
            return MISSING[PIN]
        if source == INPUT and not self.view.input_combo.currentText().strip():
            return MISSING[INPUT]
        return MISSING[MODEL] if source == MODEL and self.model_b is None else ""

    def _refresh_ready(self, *_args: object) -> None:
        self.view.set_missing(self.missing())

    def go_to_layer(self, name: str) -> bool:
        """Show layer ``name``'s panel in the Layers tab, selected (a chart point's click)."""
        if name not in self.host.layer_panels:
            text = f"{name or '(model)'} has no panel in the Layers tab: tick it in the module tree"
            self.view.set_message(f"{text} to see it there.", error=True)
            return False
        self.host.show_tab(None)
        self.host.select_layer(name)
        self._to_reveal = name  # Once the tab is laid out, bring the panel into view.
        self._reveal_soon.request()
        return True

    def open_channel(self, name: str, channel: int) -> bool:
        """Open channel ``channel`` of run A's layer ``name`` large in the Layers tab."""
        if name not in self.host.layer_panels:
            return self.go_to_layer(name)
        self.host.show_tab(None)
        return bool(self.host.open_channel(name, channel))

    def browse_input(self) -> str:
        """Pick input B with a file dialog."""
        if path := self.host.ask_input_file("Open input B"):
            self.compare_with_input(path)
        return path

    def clear(self, message: str = "") -> None:
        """Forget the comparison shown (its pictures are freed)."""
        self.outcome = None
        self.painter.clear()
        self.view.clear(message)

    def session_part(self) -> dict[str, Any]:
        """The comparison set-up a session file keeps."""
        v, model_b = self.view, self.model_b
        setup: dict[str, Any] = {"a": "current", "mode": v.source}
        if v.source == PIN and (pin := v.chosen(self.session.pins)) is not None:
            setup["b"] = pin.label
        elif v.source == INPUT:
            setup["b"] = v.input_combo.currentText().strip()
        elif v.source == MODEL and model_b is not None:
            setup["b"] = str(model_b.source)
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
        """Choose run B as a session file's set-up says (nothing runs)."""
        setup, v = parts.get("comparison") or {}, self.view
        mode, b = setup.get("mode"), setup.get("b")
        if mode not in (PIN, INPUT, MODEL):
            return
        v.set_source(mode)
        labels = [p.label for p in self.session.pins]
        if mode == PIN and b in labels:
            self._refresh_pins(current=labels.index(b))
        elif mode == INPUT and b:
            v.input_combo.setEditText(str(b))
        elif mode == MODEL and b and self.model_b is None:
            v.set_model_text(f"the session compared with {b}: open model B again")

    def stop(self) -> None:
        """The window closes: stop loads."""
        self.painter.stop()
        self.b_loads.shutdown(timeout_ms=0)

    def _refuse(self, text: str) -> bool:
        self.view.set_message(text, error=True)
        self.compare_failed.emit(text)
        return False

    def _give_up(self, text: str) -> None:
        """A comparison that waited (or was about to start) never runs: ``text`` says why."""
        self._waiting = False
        self.view.set_busy(False)
        self._refuse(text)

    def _start(self) -> None:
        self._waiting = False
        try:
            request, label = self._request()
        except ValueError as exc:
            self._give_up(str(exc))
            return
        self._label_b, self._compared_a = label, weakref.ref(self.session.result)
        self.job.start(
            lambda stop, progress: run_request.compare_job(request, stop, progress),
            message=f"Comparing the latest run (A) with {label} (B)…",
            status=f"Comparing with {label}…",
            done=f"Compared with {label}",
            failed=f"Could not compare with {label}",
        )

    def _request(self) -> tuple[CompareRequest, str]:
        """The comparison of the latest run with run B, and B's label; ValueError without B."""
        s, v, result = self.session, self.view, self.session.result
        assert result is not None and result.capture is not None
        cap_a = result.capture
        spec = DisplaySpec(
            layers=tuple(n for n in result.shown if n in cap_a),
            # One scale per layer: per-channel scales would blow float noise up to full colour.
            normalize="shared",
            sample=result.spec.sample,
            categories=result.spec.categories,
            channel_pages=dict(self.painter.pages),
            page_channels=dict(self.painter.page_sizes),
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
        if v.source == PIN:
            pin = v.chosen(s.pins)
            if pin is None:  # unpinned while the comparison waited for the run before it
                raise ValueError("The pinned result was unpinned: pin a result to compare with.")
            if pin.result.capture is None:
                raise ValueError(f"The pinned result {pin.label} holds no capture to compare.")
            request = CompareRequest(mode=PIN, cap_b=pin.result.capture, **common)
            return request, f"pinned {pin.label}"
        if v.source == INPUT:
            request = CompareRequest(
                mode=INPUT,
                model=s.model,
                input_source=v.input_combo.currentText().strip(),
                input_loader=self.host.input_loader,
                loaded_model=s.loaded_model,
                **common,
            )
            return request, f"input {short_source(request.input_source)}"
        inputs = cap_a.inputs if cap_a.inputs is not None else s.input.value if s.input else None
        if inputs is None:
            raise ValueError("Run A kept no input to run model B on: run the model again.")
        request = CompareRequest(mode=MODEL, model=self.model_b.model, inputs=inputs, **common)
        return request, f"model {self.model_b.name}"

    def _on_compared(self, outcome: CompareOutcome, _context: Any) -> None:
        self.outcome = outcome
        self._show(panels=False)

    def _show(self, *, panels: bool = True) -> None:
        """Show the comparison's chart and predictions, or (a turn later) its panels."""
        if (outcome := self.outcome) is None or self._closed:
            return  # cleared (or the window closed) in between
        v = self.view
        try:
            if panels:
                first = outcome.comparison.first_divergence
                self.painter.show(outcome, first.name if first is not None else None)
                v.set_message(describe_outcome(outcome, self._label_b))
            elif (change := outcome.predictions).rows:
                v.chart.set_comparison(outcome.comparison)
                v.predictions.set_change(change)
            else:
                v.chart.set_comparison(outcome.comparison)
                v.predictions.set_message(f"No predictions to compare: {change.message}.")
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not show the comparison")
            self._refuse(f"Could not show the comparison: {describe_error(exc)}")
            return
        (self.compare_finished.emit if panels else self._panels_soon.request)()

    def _await_worker(self) -> None:
        """Try again when each job now on the capture worker ends."""
        ends = ("finished", "failed", "cancelled", "superseded")
        for job in self.worker.jobs():
            job.on(**dict.fromkeys(ends, self._start_if_waiting))

    def _start_if_waiting(self, *_args: Any) -> None:
        if not self._waiting:
            return
        if self.worker.has_current_job():
            self._await_worker()  # still a run on its way (a newer one may have replaced it)
        elif (result := self.session.result) is None or result.capture is None:
            self._give_up("The run failed, so there is no run A to compare.")
        else:  # after the window's own slot: the result it just showed is run A
            QTimer.singleShot(0, lambda: self._waiting and not self._closed and self._start())

    def _on_view_source_changed(self, source: str) -> None:
        text = "Open model B: a checkpoint of the same architecture."
        self.view.set_message(text if source == MODEL and self.model_b is None else "")
        self._refresh_ready()

    def _refresh_pins(self, current: int | None = None) -> None:
        self.view.set_pins([p.label for p in self.session.pins], current)
        self._refresh_ready()

    def _refresh_input_choices(self) -> None:
        choices = [str(p) for p in self.host.sample_inputs()]
        choices += [r for r in self.host.settings.recent_inputs() if r not in choices]
        shape = getattr(getattr(self.session.input, "value", None), "shape", None)
        if shape is not None and len(shape):
            choices.append("random:" + "x".join(str(int(d)) for d in shape) + ":1")
        self.view.set_input_choices(choices)

    def _on_session_result_changed(self) -> None:
        self._refresh_ready()
        ref = self._compared_a
        if self.outcome is None or ref is None or self.job.running:
            return
        if self.session.result is not ref() and not self.view.is_error():
            stale = f"{STALE_NOTE}\n{self.view.message().removeprefix(STALE_NOTE + chr(10))}"
            self.view.set_message(stale)

    def _on_session_model_changed(self) -> None:
        had = self.outcome is not None or self.view.is_error()
        self.clear("Another model was opened: compare its runs anew." if had else FIRST_NOTE)
        self.painter.page_sizes.clear()
        self._waiting = False
        self._refresh_ready()

    def _open_model_b(self, dialog: Any, spec: Any) -> None:
        if self._closed:
            return
        request = self.b_request = ModelRequest(spec.source, spec.arch, spec.weights, dialog=dialog)
        self.host.load_model(
            request, self._b_opened, self._b_failed, self.b_loads, lambda: self.b_request, "model B"
        )

    def _b_opened(self, request: ModelRequest, loaded: Any) -> None:
        session = self.session
        # Run A's layers, else (no run yet) the ticked ones, must be in model B.
        cap = None if session.result is None else session.result.capture
        names = list(session.ticked) if cap is None else list(cap.names)
        if text := run_request.layer_mismatch({} if cap is None else cap, loaded.model, names):
            self._b_failed(request, text)
            return
        self.b_request, self.model_b = None, loaded
        self.host.refresh_busy(f"Opened model B {loaded.name}")
        request.dialog.opened()
        self.view.set_model_text(f"model B: {loaded.name}")
        self._refresh_ready()
        self.view.model_label.setToolTip(request.source)
        self.view.set_source(MODEL)
        self.compare()

    def _b_failed(self, request: ModelRequest, text: str = "", **failure: Any) -> None:
        """Model B was not opened (no ``text``: cancelled); ``failure``: see ``host.load_model``."""
        self.b_request = None
        self.host.refresh_busy(text)
        if text:
            path, candidates = failure.get("path", ""), failure.get("candidates", ())
            request.dialog.show_failure(text, path=path, candidates=candidates)
            self._refuse(text)

    def _on_model_dialog_finished(self, dialog: Any) -> None:
        if self.model_dialog is dialog:
            self.model_dialog = None
        if self.b_request is not None and self.b_request.dialog is dialog:
            self.b_loads.drop()  # closed while model B was loading
            self._b_failed(self.b_request)
        dialog.deleteLater()


def describe_outcome(outcome: CompareOutcome, label_b: str) -> str:
    """The tab's line on a comparison: runs, first divergence, output, memory, warnings."""
    comparison = outcome.comparison
    first = comparison.first_divergence
    parts = [f"A: the latest run · B: {label_b}", f"{len(comparison.layers)} layer(s) compared"]
    if first is None:
        parts.append(f"no layer differs beyond rel L2 {comparison.tol:g}")
    else:
        parts.append(f"first divergence: {first.name or '(model)'} (rel L2 {first.rel_l2:.3g})")
    if (out := comparison.output) is not None:
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
    return text
