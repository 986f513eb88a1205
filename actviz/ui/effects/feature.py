"""The "Channels that matter" dock: estimates from the capture shown on a thread of their own,
exact checks on the capture worker, what-if edits, panels marked and sorted by effect."""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import QDockWidget, QMenu, QScrollArea, QWidget

from actviz.analysis.concepts import layer_effects as units
from actviz.analysis.effects.effect_results import DEFAULT_VERIFY, Effects, effects_chart
from actviz.display.mosaic import ChannelOrder, page_start
from actviz.ui.background_loads import describe_error
from actviz.ui.effects.view import BarRow, EffectsView, measured_text
from actviz.ui.host import FeatureBase, FeatureJob, WindowHost, channels_text
from actviz.ui.panels.style import scroll_area
from actviz.ui.worker import CAPTURE_NICE, Job, Worker
from actviz.workspace.edits_board import StaleEditError

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult

DOCK_TITLE = "Channels that matter"  #: Title of the dock (and its View menu entry).
PREFERRED_WIDTH = 380  #: Width of the dock when it first opens.
#: Height the dock asks for (its controls and a layer's top bars), and the least it takes.
PREFERRED_HEIGHT, MIN_HEIGHT = 520, 160
#: What the dock says before a result of the model shown.
RUN_FIRST = "Run the model: the channels of each ticked layer are ranked here."
ORDER_LABEL = "by effect"  #: What the page read-out of a sorted layer panel calls the order.
#: What the dock says when a run replaced the verification (until Verify is pressed again).
INTERRUPTED = "A new run replaced the verification: press Verify again (live mode: pause it first)."


class _DockScroll(QScrollArea):
    """Asks for room for the controls and a layer (stacked docks share height by size hints),
    and is never narrower than its content (its least width follows the sections made)."""

    _least = 0

    def setWidget(self, widget: QWidget) -> None:  # noqa: N802 - Qt name
        super().setWidget(widget)
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if event.type() == QEvent.Type.LayoutRequest and watched is self.widget():
            if (least := self.minimumSizeHint().width()) != self._least:
                self._least = least
                self.updateGeometry()  # the dock's least width follows
        return super().eventFilter(watched, event)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt name
        return QSize(PREFERRED_WIDTH, PREFERRED_HEIGHT)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt name
        # Never narrower than its content (no scrolling sideways: a narrower dock cut it).
        content = self.widget().minimumSizeHint().width() + 2 * self.frameWidth()
        content += self.verticalScrollBar().sizeHint().width()
        return QSize(max(super().minimumSizeHint().width(), content), MIN_HEIGHT)


class PanelMarks:
    """The outlines and effect orders the dock gave the layer panels, and what to put back."""

    def __init__(self, host: Any, session: Any) -> None:
        self.host, self.session = host, session
        #: Layers sorted by effect, with the channel their page held before.
        self.sorted: dict[str, int | None] = {}
        #: ``{layer: channels}`` outlined by "Mark the top channels" (cleared when unticked).
        self.marked: dict[str, list[int]] = {}

    def mark(self, eff: Any, k: int) -> None:
        """Outline each layer's top ``k`` channels, turning to the page of the first."""
        s = self.session
        for layer in eff.layers:
            if (panel := self.host.panel(layer)) is None:
                continue
            top = list(eff.top_channels(layer, k))
            panel.set_selected_channels(top)
            self.marked[layer] = panel.selected_channels()
            if not top or units.dictionary_of(eff, layer) is not None:
                continue  # concept tiles have no pages: the most active come first
            size = max(1, self.host.page_channels(layer))
            if page_start(top[0], size, s.channel_orders.get(layer)) != s.page_start(layer, size):
                s.set_channel_page(layer, top[0])
                self.host.refresh_panel(layer)

    def unmark(self) -> None:
        """Clear :meth:`mark`'s outlines unless the user picked other channels since."""
        marked, self.marked = self.marked, {}
        for layer, channels in marked.items():
            panel = self.host.panel(layer)
            if panel is not None and panel.selected_channels() == channels:
                panel.set_selected_channels([])

    def sort(self, eff: Any, result: Any) -> None:
        """Order each layer's mosaic by effect, keeping the user's page (first time: page one)."""
        s = self.session
        for layer in eff.layers:
            shown = result.layers.get(layer)
            if shown is None or shown.mosaic is None or units.dictionary_of(eff, layer):
                continue  # bars, a token view, concepts (most active first): not ordered
            order = ChannelOrder(eff[layer].order().tolist(), ORDER_LABEL)
            if not order.fits(shown.mosaic.total_channels):
                continue
            if (old := s.channel_orders.get(layer)) == order:
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


class Verification:
    """The job and state of one effects dock's exact measurements (``verify``, ``measure``)."""

    def __init__(self, feature: Any, host: Any) -> None:
        self._feature = feature
        #: Its context: (the effects verified, None or {layer: channels} measured).
        self.job = FeatureJob(
            feature,
            host,
            feature.view,
            failed="Could not verify",
            status="Verification",
            cancelled="The verification was cancelled (the estimates stay).",
            interrupted=INTERRUPTED,
            log_as="verifying channel effects",
            on_finished=self._on_verified,
            on_failed=self._on_job_failed,
        )
        #: Channels the user asked to measure, per layer: shown after the top ones.
        self.asked: dict[str, tuple[int, ...]] = {}
        # A measurement asked for before the estimates of the result shown were made.
        self.pending: tuple[str, tuple[int, ...]] | None = None
        self.note = ""  # said under the next result's bars too

    def forget(self) -> None:
        """Another model: its channels are others."""
        self.note, self.asked, self.pending = "", {}, None

    def _on_job_failed(self, text: str) -> None:
        # Failures and cancels are answers to the user; a replaced verification is not.
        self.note = text if text == INTERRUPTED else ""

    def _on_verified(self, value: Any, context: Any) -> None:
        f = self._feature
        verifying, measured = context or (None, None)
        if verifying is not None and verifying is f.effects:
            f.effects = value
            f.show_effects()
            if measured:
                f.view.set_message(measured_text(value, measured))
        else:
            f.view.set_message(
                "The verification was of an earlier run: press Verify again.", error=True
            )


class EffectsFeature(FeatureBase, QObject):
    """The "Channels that matter" dock of one window (see the module docstring)."""

    name = "effects"

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        #: Estimates (no model run, no hooks: a thread of their own, newest result wins).
        self.estimates = Worker(self, nice=CAPTURE_NICE)
        #: The estimates being made (each replaces, and silences, the one before).
        self._estimate: Job | None = None
        self.verify_count = DEFAULT_VERIFY  #: Channels each "Verify" measures per layer.
        self.view = EffectsView(self.verify_count)
        self.dock = QDockWidget(DOCK_TITLE, host.dialog_parent())
        self.dock.setObjectName("ChannelsThatMatterDock")
        self.dock.setWidget(scroll_area(self.view, wrap=True, cls=_DockScroll))
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=PREFERRED_WIDTH)
        #: The effects shown (estimates, exact values once verified); None before a result.
        self.effects: Effects | None = None
        # The result the effects were made from (weak: the dock must not keep a capture).
        self._source: weakref.ref[Any] | None = None
        #: The outlines and orders this dock gave the layer panels.
        self.marks = PanelMarks(host, self.session)
        #: "Verify" and "Measure the effect of ch N": the feature's one job.
        self.verification = Verification(self, host)
        self.job = self.verification.job

        v = self.view
        v.verify_requested.connect(self.verify)
        v.cancel_requested.connect(self.cancel)
        v.top_changed.connect(lambda _k: self.show_effects())
        v.mark_toggled.connect(lambda _on: self._mark_panels())
        v.sort_toggled.connect(self.sort_panels)
        v.channel_clicked.connect(self.open_channel)
        v.ablate_requested.connect(lambda layer: self.ablate_top(layer))
        v.keep_requested.connect(lambda layer: self.keep_top(layer))
        self.dock.visibilityChanged.connect(self._on_dock_visibility)
        self.listen(self.session.result_changed, self._on_result_changed)
        self.listen(self.session.model_changed, self._on_model_changed)
        self.listen(self.session.concepts_changed, self._on_concepts_changed)
        host.add_tile_menu_entries(self._fill_tile_menu)
        v.set_message(RUN_FIRST)
        v.verify_button.setEnabled(False)  # nothing to verify before a result's estimates

    def cancel(self) -> bool:
        """Esc / Cancel: stop the verification (the estimates stay)."""
        return self.job.cancel()

    def is_busy(self) -> bool:
        """True while a verification runs."""
        return self.job.running

    def session_part(self) -> dict[str, Any]:
        """The channels shown per layer and the panels' marking and sorting."""
        v = self.view
        checks = {"mark": v.mark_check.isChecked(), "sort": v.sort_check.isChecked()}
        return {"effects": {"top": v.top, **checks}}

    def report_part(self) -> dict[str, Any]:
        """Each layer's bar chart as the dock shows it, for the report."""
        eff, k = self.effects, self.view.top
        if eff is None:
            return {}

        def charts() -> list[tuple[str, Any]]:
            what = {n: units.unit_name(eff, n).title() for n in eff.results}  # or "Concept"
            return [(f"{what[n]}s that matter: {n}", effects_chart(eff, n, k)) for n in eff.results]

        return {"figures": charts}

    def restore_session_part(self, parts: Any) -> None:
        """Put back :meth:`session_part`'s settings (nothing runs)."""
        setup = parts.get("effects") or {}
        if type(top := setup.get("top")) is int:
            self.view.top_spin.setValue(top)
        for key, check in (("mark", self.view.mark_check), ("sort", self.view.sort_check)):
            if isinstance(setup.get(key), bool):
                check.setChecked(setup[key])

    def stop(self) -> None:
        self.estimates.shutdown(timeout_ms=10_000)
        self.effects = self.job.context = None

    def show_panel(self) -> None:
        """Open the dock (its estimates are made for the result shown)."""
        self.dock.show()
        self.dock.raise_()
        self.refresh()

    def refresh(self) -> bool:
        """Estimate the result's effects in the background, unless shown; False (said) if not."""
        if self._closed:
            return False
        if self.shows_result():
            return True
        result = self.session.result
        self._source = weakref.ref(result) if result is not None else None
        try:
            model, cap, layers, target, dicts = _what_to_estimate(self.session, result)
        except ValueError as exc:
            # Asked again, it says why again; no run yet is what to do, not an error.
            self._clear(str(exc), error=str(exc) != RUN_FIRST)
            return False
        if self.effects is None:
            self.view.set_message("Ranking the channels…")
        self._estimate = self.estimates.submit(
            lambda _stop, _progress: units.estimate_layers(model, cap, layers, dicts, target=target)
        ).on(finished=self._on_estimate_finished, failed=self._on_estimate_errored)
        return True

    def estimating(self) -> bool:
        """True while the estimates of the latest result are being made."""
        return self._estimate is not None

    def verify(self, channels: dict[str, tuple[int, ...]] | None = None) -> bool:
        """Measure each layer's top channels (or ``channels``) exactly, in the background."""
        if self._closed or self.job.running:
            return False
        if (eff := self.effects) is None:
            self.view.set_message("No estimates to verify yet: run the model.", error=True)
            return False
        model = self.session.model
        assert eff.context is not None
        if (inputs := eff.context.inputs) is None and self.session.input is not None:
            # Not the run's own inputs: the session's, through the one input gate.
            if problem := self.session.input_problem():
                self.view.set_message(problem, error=True)
                return False
            inputs = self.session.input.value
        count: Any = self.verify_count if channels is None else channels
        self.verification.note = ""

        def job(should_stop: Any, report: Any) -> Any:
            step = self.job.stepper(report, "Verified {0}/{1} channels")
            return units.verify_layers(
                model, eff, channels=count, inputs=inputs, progress=step, should_stop=should_stop
            )

        if channels is None:
            message = f"Verifying the top {count} channels of each layer…"
        else:
            asked = "; ".join(f"{layer} {channels_text(c)}" for layer, c in channels.items())
            message = f"Measuring the effect of {asked}…"
        self.job.start(
            job,
            message=message,
            status="Verifying channel effects…",
            done="Channel effects verified",
            context=(eff, None if channels is None else dict(channels)),
        )
        return True

    def measure(self, layer: str, channels: Any) -> bool:
        """Measure ``channels`` of ``layer`` exactly, after the estimates, and show them."""
        chosen = tuple(dict.fromkeys(int(c) for c in channels))
        if self._closed or not chosen:
            return False
        if self.job.running:
            self.view.set_message(
                "A verification is running: measure again when it ends (or Cancel it).", error=True
            )
            return False
        self.verification.asked[layer] = tuple(dict.fromkeys([*self.asked.get(layer, ()), *chosen]))
        self.dock.show()
        self.dock.raise_()
        if not self.estimating():
            self.refresh()  # (nothing to do when the effects held are of the result shown)
        if self.estimating():
            self.verification.pending = (layer, chosen)  # measured once they are made
            return True
        if self.effects is None or not self.shows_result():
            return False  # refresh said why
        if layer not in self.effects.results:
            self.view.set_message(f"{layer} has no channels ranked here.", error=True)
            return False
        self.show_effects()
        return self.verify({layer: chosen})

    @property
    def asked(self) -> dict[str, tuple[int, ...]]:
        """Channels the user asked to measure, per layer: shown after the top ones."""
        return self.verification.asked

    def shows_result(self) -> bool:
        """Whether the effects held are of the result the window shows."""
        result = self.session.result
        return self._source is not None and result is not None and self._source() is result

    def sort_panels(self, on: bool = True) -> None:
        """Sort ranked panels by ``|effect|`` with each result (``on``), or put the order back."""
        v = self.view
        if v.sort_check.isChecked() != bool(on):
            v.sort_check.setChecked(bool(on))  # its signal comes back here
        elif not on:
            self.marks.unsort()
        elif self.effects is not None:
            self._apply_order()
        else:
            self.refresh()

    def ablate_top(self, layer: str, k: int | None = None) -> bool:
        """Add an edit ablating ``layer``'s top ``k`` channels (or concepts) and run again."""
        return self._edit(layer, k, "ablated")

    def keep_top(self, layer: str, k: int | None = None) -> bool:
        """Add a what-if edit keeping only the top ``k`` channels (concepts) of ``layer``."""
        return self._edit(layer, k, "kept")

    def open_channel(self, layer: str, channel: int) -> bool:
        """Open ``channel`` of ``layer`` in the channel view (a concept as its tile does)."""
        panel = self.host.panel(layer)
        if units.dictionary_of(self.effects, layer) is not None and panel is not None:
            panel.tile_clicked.emit(layer, int(channel))
            return True
        self.host.show_tab(None)
        if self.host.open_channel(layer, channel):
            return True
        self.host.show_status(f"{layer} ch {channel} has no maps to open large")
        return False

    def rows(self, layer: str) -> list[BarRow]:
        """The bars of ``layer`` as shown: its top channels by ``|estimate|``."""
        if (eff := self.effects) is None or layer not in eff.results:
            return []
        # A channel without effect does not matter, however it ranks; measured ones come last.
        top = [r for r in eff.top(layer, self.view.top) if r.has_effect]
        shown, res = {r.channel for r in top}, eff[layer]
        asked = [c for c in self.asked.get(layer, ()) if c not in shown and 0 <= c < res.channels]
        return [BarRow(r.channel, r.estimate, r.exact) for r in [*top, *map(res.row, asked)]]

    def show_effects(self) -> None:
        """Show the effects held: each layer's bars and the lines under them."""
        if (eff := self.effects) is None:
            return
        v = self.view
        v.set_sections(list(eff.layers))
        k, verified_any = v.top, False
        for layer in eff.layers:
            res, unit = eff[layer], units.unit_name(eff, layer)
            verified = int(res.verified.sum())
            info = f"{res.channels} {unit}s"
            if silent := sum(not r.has_effect for r in eff.top(layer, k)):
                info += f" · {silent} of the top {min(k, res.channels)} without effect, not drawn"
            if verified:
                verified_any = True
                rho = eff.rank_correlation(layer)
                rho_text = f"{rho:.2f}" if math.isfinite(rho) else "n/a"
                info += f" · ρ = {rho_text} ({verified} verified)"
            att = self.session.concepts.get(layer)
            v.fill(layer, self.rows(layer), info, k, unit, att.names if att else None)
        parts = [f"target: {eff.target_description or 'the prediction'}"]
        parts += [f"baseline: {eff.baseline}", "effect = target with the channel replaced − target"]
        if verified_any:
            parts.append("ρ: rank correlation of estimate and exact")
        lines = (" · ".join(parts), "; ".join(eff.warnings), self.verification.note)
        v.set_message("\n".join(line for line in lines if line))
        self._apply_order()
        self._mark_panels()

    def _mark_panels(self) -> None:
        if self.effects is None or not (self.view.mark_check.isChecked() and self.dock.isVisible()):
            # Unticked or the dock closed: the outlines this dock drew go with it.
            self.marks.unmark()
            return
        self.marks.mark(self.effects, self.view.top)

    def _apply_order(self) -> None:
        """Sorting on: give each ranked layer with a mosaic its order by effect."""
        eff, result = self.effects, self.session.result
        if eff is not None and result is not None and self.view.sort_check.isChecked():
            self.marks.sort(eff, result)

    def _fill_tile_menu(self, menu: QMenu, layer: str, channels: tuple[int, ...]) -> None:
        if not channels:
            return
        what = channels_text(channels)
        menu.addSeparator()
        action = menu.addAction(
            f"Measure the effect of {what}", lambda: self.measure(layer, channels)
        )
        action.setToolTip(
            "Set each to the baseline alone and measure how the target changes, exactly (in "
            "the background); the Channels that matter dock shows it beside the estimate"
        )
        action.setEnabled(not self.job.running)
        sort = menu.addAction("Sort tiles by effect")
        sort.setCheckable(True)
        sort.setChecked(self.view.sort_check.isChecked())
        sort.setToolTip(
            "Order every ranked layer's tiles by |estimated effect| (the Channels that matter "
            "dock); unticked: the natural order"
        )
        sort.toggled.connect(self._on_sort_action_toggled)

    def _edit(self, layer: str, k: int | None, verb: str) -> bool:
        if (eff := self.effects) is None or layer not in eff.results:
            self.view.set_message(f"No effects of {layer} to act on: run the model.", error=True)
            return False
        channels = eff.top_channels(layer, self.view.top if k is None else int(k))
        try:
            edit = units.unit_edit(eff, layer, channels, keep=verb == "kept")
        except (TypeError, ValueError) as exc:
            self.host.show_error(f"Could not make the edit: {exc}")
            return False
        what = " concepts" if units.dictionary_of(eff, layer) is not None else ""
        if (repeated := self.session.edits.repeats(layer, edit)) is not None:
            self.view.set_message(f"Already made: {repeated.describe()}.")
            return False
        try:
            self.session.edits.add(layer, edit, f"top {len(channels)}{what} by effect, {verb}")
        except StaleEditError as exc:  # the ranking is of the model shown: a slip to say
            self.host.show_error(f"Edit not made: {exc}")
            return False
        self.host.run()
        return True

    def _on_estimate_finished(self, eff: Effects) -> None:
        self._estimate, self.effects = None, eff
        self.view.verify_button.setEnabled(True)
        self.show_effects()
        pending, self.verification.pending = self.verification.pending, None
        if pending is not None:
            self.measure(*pending)

    def _on_estimate_errored(self, error: BaseException) -> None:
        self.verification.pending = None
        self._clear(describe_error(error), error=True)

    def _clear(self, message: str, error: bool = False) -> None:
        """Hold and show no effects (and make none), saying ``message``."""
        self.effects = self._source = self._estimate = None
        self.view.verify_button.setEnabled(False)
        self.estimates.drop()
        self.view.set_sections([])
        self.view.set_message(message, error=error)

    def _on_dock_visibility(self, visible: bool) -> None:
        if visible:
            self.refresh()
            self._mark_panels()  # the effects shown may be of this result already
        else:
            self.marks.unmark()

    def _on_result_changed(self) -> None:
        # Only while shown or sorting: nothing is estimated per live frame otherwise.
        if self.dock.isVisible() or self.view.sort_check.isChecked():
            self.refresh()

    def _on_concepts_changed(self, _layer: str) -> None:
        # A panel switched between channels and concepts: rank it by what it shows now.
        self._source = None
        self._on_result_changed()

    def _on_model_changed(self) -> None:
        # Another model: its channels are others (the session dropped the orders itself).
        self.verification.forget()
        self.marks.sorted = {}
        # The bars shown were the old model's (no result_changed announces their end).
        self._clear(RUN_FIRST)

    def _on_sort_action_toggled(self, on: bool) -> None:
        self.sort_panels(on)
        if on:
            self.show_panel()


def _what_to_estimate(session: Any, result: RunResult | None) -> tuple[Any, ...]:
    """What the estimates of ``result`` need; ValueError says why they cannot be made."""
    if result is None:
        raise ValueError(RUN_FIRST)
    if (cap := result.capture) is None:
        raise ValueError("This result keeps no capture: run the model again.")
    if not cap.gradients:
        raise ValueError("This result was captured without gradients: nothing to rank.")
    if (model := session.model) is None:
        raise ValueError("No model.")
    if not (layers := [n for n in result.shown if n in cap.records]):
        raise ValueError("Tick a layer in the module tree: its channels are ranked here.")
    dicts = {n: att.concepts for n, att in session.concepts.items() if att.shown}
    return model, cap, layers, session.run_target, dicts
