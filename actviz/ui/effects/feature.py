"""Which channels matter, in the window: the "Channels that matter" dock.

:class:`EffectsFeature` is a feature constructed with the window's
:class:`~actviz.ui.host.WindowHost`; it attaches only through it:

* estimates come from the capture of the result the window shows (``session.result``), with
  :func:`~actviz.analysis.effects.channel_effects.estimate_from_capture`: no model run, one
  multiply and sum per layer, made for each result while the dock is on screen, on a thread
  of their own: a newer result's replace
  those still being made;
* "Verify top 16" runs :func:`~actviz.analysis.effects.channel_effects.verify` on the window's
  capture worker (one model, one worker), as this feature's own job, with progress and
  Cancel (Esc); a run started meanwhile replaces it;
* "Ablate top" / "Keep only top" add what-if edits to ``session.edits`` and run again;
* optionally each layer's top channels are outlined in its layer panel, which turns to the
  page holding the first;
* "Sort the panels' tiles by effect" gives each ranked layer a channel order
  (``session.set_channel_order``): its tiles by ``|estimate|``, largest first, re-sorted with
  each new result (the page kept); unticked, the natural order and the page from before;
* the layer panels' tile menu (``host.add_tile_menu_entries``) gets "Measure the effect of
  ch N" (an exact ablation of those channels, shown in the dock) and "Sort tiles by effect";
* a layer whose panel shows a dictionary's concepts is ranked by its concepts instead
  (:mod:`actviz.analysis.concepts.layer_effects`: estimate, Verify, Ablate / Keep only remove
  concepts, a bar's click opens the concept).
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QSize, Qt
from PySide6.QtWidgets import QDockWidget, QMenu, QScrollArea

from actviz.analysis.concepts import layer_effects as units
from actviz.analysis.effects.effect_results import DEFAULT_VERIFY
from actviz.display.mosaic import ChannelOrder, page_start
from actviz.ui.background_loads import describe_error
from actviz.ui.effects.view import BarRow, EffectsView, measured_text
from actviz.ui.host import FeatureBase, FeatureJob, WindowHost
from actviz.ui.panels.style import scroll_area
from actviz.ui.worker import Job, Worker

if TYPE_CHECKING:  # pragma: no cover
    from actviz.analysis.effects.effect_results import Effects
    from actviz.display.prepared import RunResult

__all__ = ["DOCK_TITLE", "EffectsFeature"]

#: Title of the dock (and its View menu entry).
DOCK_TITLE = "Channels that matter"
#: Width of the dock when it first opens.
PREFERRED_WIDTH = 380
#: Height the dock asks for (its controls and a layer's top bars), and the least it takes.
PREFERRED_HEIGHT = 520
MIN_HEIGHT = 160
#: What the dock says before a result of the model shown.
RUN_FIRST = "Run the model: the channels of each ticked layer are ranked here."
#: What the dock says when a run replaced the verification (until Verify is pressed again).
INTERRUPTED = "A new run replaced the verification: press Verify again (live mode: pause it first)."
#: What the page read-out of a sorted layer panel calls the order.
ORDER_LABEL = "by effect"


class _DockScroll(QScrollArea):
    """The dock's scroll area, asking for the height of its controls and a layer's bars
    (a dock stacked under another gets a share of the height by what it asks for)."""

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt name
        return QSize(PREFERRED_WIDTH, PREFERRED_HEIGHT)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt name
        return QSize(super().minimumSizeHint().width(), MIN_HEIGHT)


def channels_text(channels: tuple[int, ...]) -> str:
    """``ch 3`` / ``ch 3, 5, 7`` / ``12 channels`` (menu entries and messages)."""
    if len(channels) <= 4:
        return "ch " + ", ".join(str(c) for c in channels)
    return f"{len(channels)} channels"


class EffectsFeature(FeatureBase, QObject):
    """The "Channels that matter" dock of one window (see the module docstring).

    Parameters
    ----------
    host
        The window: its session (result, model, edits), capture worker, ``open_channel``,
        layer panels and a dock on the right.
    """

    name = "effects"

    def __init__(self, host: WindowHost) -> None:
        QObject.__init__(self, host.dialog_parent())
        self.window = host
        self.session = host.session
        self.worker = host.worker
        #: Estimates (no model run, no hooks: a thread of their own, newest result wins).
        self.estimates = Worker(self)
        #: The estimates being made (each replaces, and silences, the one before).
        self._estimate: Job | None = None
        #: Channels each "Verify" measures per layer.
        self.verify_count = DEFAULT_VERIFY
        self.view = EffectsView(self.verify_count)
        scroll = scroll_area(self.view, wrap=True, cls=_DockScroll)
        self.dock = QDockWidget(DOCK_TITLE, host.dialog_parent())
        self.dock.setObjectName("ChannelsThatMatterDock")
        self.dock.setWidget(scroll)
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=PREFERRED_WIDTH)
        #: The effects shown (estimates, exact values once verified); None before a result.
        self.effects: Effects | None = None
        # The result the effects were made from (weak: the dock must not keep a capture).
        self._source: weakref.ref[Any] | None = None
        self._closed = False
        #: Channels the user asked to measure, per layer: shown after the top ones.
        self.asked: dict[str, tuple[int, ...]] = {}
        # A measurement asked for before the estimates of the result shown were made.
        self._pending_measure: tuple[str, tuple[int, ...]] | None = None
        # Layers this feature sorted, with the channel their page held before (unsorting
        # puts it back).
        self._sorted: dict[str, int | None] = {}
        #: {layer: channels} outlined by "Mark the top channels" (cleared when unticked).
        self._marked: dict[str, list[int]] = {}

        v = self.view
        v.verify_requested.connect(self.verify)
        v.cancel_requested.connect(self.cancel)
        v.top_changed.connect(lambda _k: self._show())
        v.mark_toggled.connect(lambda _on: self._mark_panels())
        v.sort_toggled.connect(self.sort_panels)
        v.channel_clicked.connect(self.open_channel)
        v.ablate_requested.connect(lambda layer: self.ablate_top(layer))
        v.keep_requested.connect(lambda layer: self.keep_top(layer))
        self.dock.visibilityChanged.connect(self._on_dock_visibility)
        #: The verification on the capture worker; its context: (the effects verified, what
        #: it measures: None, each layer's top; else {layer: channels}).
        self.job = FeatureJob(
            self,
            host,
            self.view,
            failed="Could not verify",
            failed_status="Verification failed",
            cancelled="The verification was cancelled (the estimates stay).",
            cancelled_status="Verification cancelled",
            interrupted=INTERRUPTED,
            log_as="verifying channel effects",
            on_finished=self._on_verified,
            on_failed=self._on_job_failed,
        )
        # Said under the next result's bars too (that result's estimates replaced the red
        # line within a moment, and a verification seemed to have done nothing).
        self._note = ""
        self.session.result_changed.connect(self._on_result_changed)
        self.session.model_changed.connect(self._on_model_changed)
        self.session.concepts_changed.connect(self._on_concepts_changed)
        host.add_tile_menu_entries(self._fill_tile_menu)
        v.set_message(RUN_FIRST)

    # ========================================================================== Feature
    def cancel(self) -> bool:
        """Esc / Cancel: stop the verification (the estimates stay)."""
        return self.job.cancel()

    def is_busy(self) -> bool:
        """True while a verification runs."""
        return self.job.running

    def reset_layout(self) -> None:
        """Dock it back on the right (closed, as on a first start)."""
        self.window.dock_back(self.dock, Qt.DockWidgetArea.RightDockWidgetArea)  # type: ignore[attr-defined]
        self.window.resize_dock(self.dock, PREFERRED_WIDTH)
        self.dock.setVisible(False)

    def session_part(self) -> dict[str, Any]:
        """What a session file keeps: the channels shown per layer, the panels' marking and
        sorting (the dock's place and visibility are in the window layout)."""
        v = self.view
        return {
            "effects": {
                "top": v.top,
                "mark": v.mark_check.isChecked(),
                "sort": v.sort_check.isChecked(),
            }
        }

    def report_part(self) -> dict[str, Any]:
        """File > Export report: the bar chart of each layer's channels that matter (estimate
        and, where verified, exact), as the dock shows them."""
        eff, k = self.effects, self.view.top
        if eff is None:
            return {}

        def charts() -> list[tuple[str, Any]]:
            from actviz.analysis.effects.effects_chart import effects_chart as chart

            what = {n: units.unit_name(eff, n).title() for n in eff.results}  # or "Concept"
            return [(f"{what[n]}s that matter: {n}", chart(eff, n, k)) for n in eff.results]

        return {"figures": charts}

    def restore_session_part(self, parts: Any) -> None:
        """Put back :meth:`session_part`'s settings (nothing runs)."""
        setup = parts.get("effects") or {}
        top = setup.get("top")
        if isinstance(top, int) and not isinstance(top, bool):
            self.view.top_spin.setValue(top)
        if isinstance(setup.get("mark"), bool):
            self.view.mark_check.setChecked(setup["mark"])
        if isinstance(setup.get("sort"), bool):
            self.view.sort_check.setChecked(setup["sort"])

    def shutdown(self) -> None:
        """The window closes: let go of the session's events."""
        if self._closed:
            return
        self._closed = True
        self.estimates.shutdown(timeout_ms=10_000)
        self.session.result_changed.disconnect(self._on_result_changed)
        self.session.model_changed.disconnect(self._on_model_changed)
        self.session.concepts_changed.disconnect(self._on_concepts_changed)
        self.effects = None
        self.job.context = None

    # ========================================================================== public API
    def show_panel(self) -> None:
        """Open the dock (its estimates are made for the result shown)."""
        self.dock.show()
        self.dock.raise_()
        self.refresh()

    def refresh(self) -> bool:
        """Start estimating the effects of the result shown (in the background; False, saying
        why, when it cannot). Nothing starts when the effects shown are of that result."""
        if self._closed:
            return False
        result = self.session.result
        if self._source is not None and result is not None and self._source() is result:
            return True
        self._source = weakref.ref(result) if result is not None else None
        try:
            model, cap, layers, target, dicts = _what_to_estimate(self.session, result)
        except ValueError as exc:
            self.effects = None
            self._source = None  # asked again, it says why again
            self._estimate = None
            self.estimates.drop()
            self.view.set_sections([])
            self.view.set_message(str(exc), error=True)
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
        """Measure the exact effect of each layer's top channels in the background
        (``channels``: of these channels per layer instead, see :meth:`measure`)."""
        if self._closed or self.job.running:
            return False
        eff = self.effects
        if eff is None:
            self.view.set_message("No estimates to verify yet: run the model.", error=True)
            return False
        model = self.session.model
        assert eff is not None and eff.context is not None
        inputs = eff.context.inputs
        if inputs is None and self.session.input is not None:
            # Not the run's own inputs: the session's, through the one input gate.
            problem = self.session.input_problem()
            if problem:
                self.view.set_message(problem, error=True)
                return False
            inputs = self.session.input.value
        count: Any = self.verify_count if channels is None else channels
        self._note = ""
        tracked = self.job
        tracked.progress = (0, 0)

        def job(should_stop: Any, report: Any) -> Effects:
            def step(done: int, total: int) -> None:
                tracked.progress = (done, total)
                report(f"Verified {done}/{total} channels")

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
        """Measure the exact effect of ``channels`` of ``layer`` (each set to the baseline
        alone) in the background and show them in the dock, after the top channels (the tile
        menu's "Measure the effect of ch N"). The dock opens; when the estimates of the
        result shown are still to be made, the measurement starts once they are."""
        chosen = tuple(dict.fromkeys(int(c) for c in channels))
        if self._closed or not chosen:
            return False
        if self.job.running:
            self.view.set_message(
                "A verification is running: measure again when it ends (or Cancel it).",
                error=True,
            )
            return False
        self.asked[layer] = tuple(dict.fromkeys([*self.asked.get(layer, ()), *chosen]))
        self.dock.show()
        self.dock.raise_()
        result = self.session.result
        current = self._source is not None and result is not None and self._source() is result
        if self.effects is None or not current or self.estimating():
            if not self.estimating():
                self.refresh()
            if self.estimating():
                self._pending_measure = (layer, chosen)  # measured once they are made
                return True
            current = self._source is not None and self._source() is result
            if self.effects is None or not current:
                return False  # refresh said why
        if layer not in self.effects.results:
            self.view.set_message(f"{layer} has no channels ranked here.", error=True)
            return False
        self._show()
        return self.verify({layer: chosen})

    def sort_panels(self, on: bool = True) -> None:
        """Order the tiles of each ranked layer's panel by ``|estimated effect|`` (``on``),
        re-sorted with each new result; or put back the natural order and the page shown
        before. Ticks the dock's box, whose switch calls this (so both stay in step)."""
        v = self.view
        if v.sort_check.isChecked() != bool(on):
            v.sort_check.setChecked(bool(on))  # its signal comes back here
            return
        if on:
            if self.effects is not None:
                self._apply_order()
            else:
                self.refresh()
            return
        s = self.session
        sorted_, self._sorted = self._sorted, {}
        for layer, before in sorted_.items():
            s.set_channel_order(layer, None)
            s.set_channel_page(layer, before or 0)
            self.window.refresh_panel(layer)

    def sorted_layers(self) -> list[str]:
        """Layers whose panels this feature sorted by effect."""
        return list(self._sorted)

    def ablate_top(self, layer: str, k: int | None = None) -> bool:
        """Add a what-if edit ablating the top ``k`` channels of ``layer`` (removing its top
        concepts where it is ranked by concepts) and run again."""
        return self._edit(layer, k, "ablated")

    def keep_top(self, layer: str, k: int | None = None) -> bool:
        """Add a what-if edit keeping only the top ``k`` channels (concepts) of ``layer``."""
        return self._edit(layer, k, "kept")

    def open_channel(self, layer: str, channel: int) -> bool:
        """Open ``channel`` of ``layer`` in the channel view (a bar's click); a concept opens
        as a click on its tile does (the Concept dock)."""
        panel = self.window.panel(layer)
        if units.dictionary_of(self.effects, layer) is not None and panel is not None:
            panel.tile_clicked.emit(layer, int(channel))
            return True
        self.window.show_tab(None)
        if self.window.open_channel(layer, channel):
            return True
        self.window.show_status(f"{layer} ch {channel} has no maps to open large")
        return False

    def rows(self, layer: str) -> list[BarRow]:
        """The bars of ``layer`` as shown: its top channels by ``|estimate|``."""
        if self.effects is None or layer not in self.effects.results:
            return []
        eff = self.effects
        # A channel without effect is not one that matters, however it ranks: a classifier
        # layer's scores other than the target's drew a row of empty bars (in the colour of
        # "works against").
        rows = [
            BarRow(r.channel, r.estimate, r.exact)
            for r in eff.top(layer, self.view.top)
            if r.has_effect
        ]
        shown = {r.channel for r in rows}
        res = eff[layer]
        for c in self.asked.get(layer, ()):  # measured from the tile menu: after the top ones
            if c not in shown and 0 <= c < res.channels:
                r = res.row(c)
                rows.append(BarRow(r.channel, r.estimate, r.exact))
                shown.add(c)
        return rows

    # ========================================================================== estimates
    def _show(self) -> None:
        eff = self.effects
        if eff is None:
            return
        v = self.view
        v.set_sections(list(eff.layers))
        k = v.top
        verified_any = False
        for layer, section in v.sections.items():
            res, unit = eff[layer], units.unit_name(eff, layer)
            verified = int(res.verified.sum())
            info = f"{res.channels} {unit}s"
            silent = sum(not r.has_effect for r in eff.top(layer, k))
            if silent:
                info += f" · {silent} of the top {min(k, res.channels)} without effect, not drawn"
            if verified:
                verified_any = True
                rho = eff.rank_correlation(layer)
                rho_text = f"{rho:.2f}" if math.isfinite(rho) else "n/a"
                info += f" · ρ = {rho_text} ({verified} verified)"
            att = self.session.concepts.get(layer)
            section.set_rows(self.rows(layer), info, k, unit, att.names if att else None)
        parts = [f"target: {eff.target_description or 'the prediction'}"]
        parts.append(f"baseline: {eff.baseline}")
        parts.append("effect = target with the channel replaced − target")
        if verified_any:
            parts.append("ρ: rank correlation of estimate and exact")
        text = " · ".join(parts)
        if eff.warnings:
            text += "\n" + "; ".join(eff.warnings)
        if self._note:
            text += "\n" + self._note
        v.set_message(text)
        self._apply_order()
        self._mark_panels()

    def _mark_panels(self) -> None:
        eff = self.effects
        if eff is None or not self.view.mark_check.isChecked() or not self.dock.isVisible():
            # Unticked or the dock closed: the outlines this dock drew go with it (they stayed,
            # and a right click then offered "Ablate 8 channels" of a ranking no longer shown).
            self._unmark_panels()
            return
        s = self.session
        for layer in eff.layers:
            panel = self.window.panel(layer)
            if panel is None:
                continue
            top = list(eff.top_channels(layer, self.view.top))
            panel.set_selected_channels(top)
            self._marked[layer] = panel.selected_channels()
            if not top or units.dictionary_of(eff, layer) is not None:
                continue  # concept tiles have no pages: the most active come first
            size = max(1, self.window.page_channels(layer))
            order = s.channel_orders.get(layer)
            if page_start(top[0], size, order) != s.page_start(layer, size):
                s.set_channel_page(layer, top[0])
                self.window.refresh_panel(layer)

    def _unmark_panels(self) -> None:
        """Clear the outlines :meth:`_mark_panels` drew, where the user has not picked other
        channels since."""
        marked, self._marked = self._marked, {}
        for layer, channels in marked.items():
            panel = self.window.panel(layer)
            if panel is not None and panel.selected_channels() == channels:
                panel.set_selected_channels([])

    def _apply_order(self) -> None:
        """Sorting on: give each ranked layer with a mosaic its order by effect, keeping the
        page (its place in the order) the user is on; the first time, the first page."""
        eff, result = self.effects, self.session.result
        if eff is None or result is None or not self.view.sort_check.isChecked():
            return
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
            if layer in self._sorted and old is not None:
                size = max(1, self.window.page_channels(layer))
                at = min(s.page_start(layer, size), len(order.channels) - 1)
            else:
                self._sorted[layer] = s.channel_pages.get(layer)
                at = 0
            s.set_channel_order(layer, order)
            s.set_channel_page(layer, order.channels[at])
            self.window.refresh_panel(layer)

    def _fill_tile_menu(self, menu: QMenu, layer: str, channels: tuple[int, ...]) -> None:
        """The tile menu's entries of this feature (see ``host.add_tile_menu_entries``)."""
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

    # ========================================================================== edits
    def _edit(self, layer: str, k: int | None, verb: str) -> bool:
        eff = self.effects
        if eff is None or layer not in eff.results:
            self.view.set_message(f"No effects of {layer} to act on: run the model.", error=True)
            return False
        k = self.view.top if k is None else int(k)
        channels = eff.top_channels(layer, k)
        try:
            edit = units.unit_edit(eff, layer, channels, keep=verb == "kept")
        except (TypeError, ValueError) as exc:
            self.window.show_error(f"Could not make the edit: {exc}")
            return False
        what = " concepts" if units.dictionary_of(eff, layer) is not None else ""
        self.session.edits.add(layer, edit, f"top {len(channels)}{what} by effect, {verb}")
        self.window.run()
        return True

    # ========================================================================== events
    def _on_estimate_finished(self, eff: Effects) -> None:
        self._estimate = None
        self.effects = eff
        self._show()
        pending, self._pending_measure = self._pending_measure, None
        if pending is not None:
            self.measure(*pending)

    def _on_estimate_errored(self, error: BaseException) -> None:
        self._estimate = None
        self._pending_measure = None
        self.effects = None
        self.view.set_sections([])
        self.view.set_message(describe_error(error), error=True)

    def _on_dock_visibility(self, visible: bool) -> None:
        if visible:
            self.refresh()
            self._mark_panels()  # the effects shown may be of this result already
        else:
            self._unmark_panels()

    def _on_result_changed(self) -> None:
        # Only while the dock is on screen or the panels are sorted by effect: otherwise
        # nothing is estimated per live frame.
        if self.dock.isVisible() or self.view.sort_check.isChecked():
            self.refresh()

    def _on_concepts_changed(self, _layer: str) -> None:
        # A panel switched between channels and concepts: rank it by what it shows now.
        self._source = None
        self._on_result_changed()

    def _on_job_failed(self, text: str) -> None:
        # Failures and cancels are answers to the user; a replaced verification is not.
        self._note = text if text == INTERRUPTED else ""

    def _on_model_changed(self) -> None:
        # Another model: its channels are others (the session dropped the orders itself).
        self._note = ""
        self.asked = {}
        self._sorted = {}
        self._pending_measure = None
        # The bars, target and rho shown were the old model's; the session dropped its
        # result without announcing one, so they would stay until the new model's first
        # result (a slow first run showed another model's channels meanwhile).
        self.effects = None
        self._source = None
        self._estimate = None
        self.estimates.drop()
        self.view.set_sections([])
        self.view.set_message(RUN_FIRST)

    def _on_sort_action_toggled(self, on: bool) -> None:
        self.sort_panels(on)
        if on:
            self.show_panel()

    def _on_verified(self, value: Effects, context: Any) -> None:
        verifying, measured = context or (None, None)
        if verifying is not None and verifying is self.effects:
            self.effects = value
            self._show()
            if measured:
                self.view.set_message(measured_text(value, measured))
        else:
            self.view.set_message(
                "The verification was of an earlier run: press Verify again.", error=True
            )


def _what_to_estimate(session: Any, result: RunResult | None) -> tuple[Any, ...]:
    """What the estimates of ``result`` need: the model, the capture, the layers, the target
    and the dictionaries of the layers shown as concepts; ValueError says why not."""
    if result is None:
        raise ValueError(RUN_FIRST)
    cap = result.capture
    if cap is None:
        raise ValueError("This result keeps no capture: run the model again.")
    if not cap.gradients:
        raise ValueError("This result was captured without gradients: nothing to rank.")
    model = session.model
    if model is None:
        raise ValueError("No model.")
    layers = [n for n in result.shown if n in cap.records]
    if not layers:
        raise ValueError("Tick a layer in the module tree: its channels are ranked here.")
    dicts = {n: att.concepts for n, att in session.concepts.items() if att.shown}
    return model, cap, layers, session.run_target, dicts
