"""Visualising a layer's page of channels in the background: the "What channels want" dock.

A page can take minutes on a CPU (one image per channel, hundreds of steps each), so it does
not run on the window's capture worker, which would hold up every run meanwhile. As dataset
scans do, it runs on a worker of its own, at a lower thread priority, on a private copy of
the model (hooks are per-module state: one model, one worker). The copy is made *on* the
capture worker, as a short job of its own, so that no capture's hooks are inside the model
while it is copied.

The page's channels come from the cache first (shown at once), then the others are
synthesised a few at a time and each batch is shown as it finishes; Cancel keeps what is done.
Everything goes to the user's visualisation cache, shared with the channel view's "What it
wants" (same weights, same settings: the same picture).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from actviz.analysis.visualize import (
    Visualization,
    layer_channels,
    merge_visualizations,
    visualize,
)
from actviz.ui.host import WindowHost
from actviz.ui.loaders import describe_error
from actviz.ui.visualize.mosaic import MosaicDock
from actviz.ui.worker import Worker

log = logging.getLogger(__name__)

__all__ = ["CHUNK", "PageVisualiser"]

#: Channels synthesised together (one batch): small enough that tiles appear every few
#: seconds, large enough that a GPU is kept busy.
CHUNK = 4
#: The dock's width when first shown.
DOCK_WIDTH = 340


class _PartSignals(QObject):
    """From the jobs' threads to the GUI thread: ``part(job, "total", int)`` or
    ``part(job, "part", Visualization)``; ``copied(model, copy, error)``."""

    part = Signal(int, str, object)
    copied = Signal(object, object, object)


class PageVisualiser(QObject):
    """The dock and its background synthesis.

    Parameters
    ----------
    host
        The window.
    settings
        ``() -> {"objective", "steps", "size"}`` (the channel view's "What it wants" settings,
        so both views ask the cache for the same pictures).
    settings_menu
        That settings popover, also offered in the dock.
    """

    def __init__(
        self, host: WindowHost, settings: Callable[[], dict[str, Any]], settings_menu: Any
    ) -> None:
        super().__init__(host.dialog_parent())
        self.host = host
        self.session = host.session
        self.settings = settings
        self.dock = MosaicDock(host.dialog_parent(), settings_menu)
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=DOCK_WIDTH)
        #: The synthesis (on the model's copy); one page at a time, newest wins.
        self.worker = Worker(self)
        self._signals = _PartSignals(self)
        #: Layer, channels of the page, the layer's channel count (0 while unknown).
        self.layer = ""
        self.channels: tuple[int, ...] = ()
        self.total = 0
        self._parts: list[Visualization] = []
        # The page: its position in the layer's order (channel numbers, or the panel's order
        # of its own, e.g. by effect) and size.
        self._order: tuple[int, ...] | None = None
        self._order_label = ""
        self._pos = 0
        self._size = 1
        self._settings: dict[str, Any] = {}
        self._job = 0  # token of the synthesis whose parts are shown
        self._gen: int | None = None  # its generation on self.worker
        # The copy: asked for and not made yet; the capture worker's generations it had.
        self._copy_pending = False
        self._copy_gen: int | None = None
        self._copy_gens: set[int] = set()
        self._copy: tuple[Any, Any] | None = None  # (session model, its copy)
        self._progress = (0, 0)
        self._closed = False
        #: What to do with the copy once the capture worker made it.
        self._then: Callable[[Any], None] = self._start

        self.dock.page_requested.connect(self.turn)
        self.dock.visualise_requested.connect(lambda: self.visualise(self.layer, self._pos))
        self.dock.cancel_requested.connect(self.cancel)
        self.dock.mosaic.tile_clicked.connect(self._on_tile_clicked)
        self._signals.part.connect(self._on_part)
        w = self.worker.signals
        w.finished.connect(self._on_finished)
        w.errored.connect(self._on_errored)
        w.cancelled.connect(self._on_cancelled)
        w.progress.connect(self._on_progress)
        self._signals.copied.connect(self._on_copied)
        host.worker.signals.started.connect(self._check_copy)
        host.run_started.connect(self._check_copy)

    # ========================================================================== state
    def is_busy(self) -> bool:
        """True while the page is being copied for or synthesised."""
        return self._gen is not None or self._copy_pending

    def owns_job(self, generation: int) -> bool:
        """Whether the capture worker's job ``generation`` is the model copy."""
        return generation in self._copy_gens

    def result(self) -> Visualization | None:
        """The pictures of the page shown so far, in tile order (None: none yet)."""
        if not self._parts:
            return None
        merged = merge_visualizations(self._parts)
        return merged.select([c for c in self.channels if c in merged.channels])

    # ========================================================================== actions
    def visualise(self, layer: str, first: int | None = None) -> bool:
        """Show the dock and fill it with a page of ``layer``'s channels starting at position
        ``first`` of the layer's order (its panel's: by effect when sorted, else the channel
        numbers; None: the page its panel shows); False when there is nothing to visualise."""
        if self._closed or self.session.model is None or not layer:
            return False
        size = max(1, int(self.host.page_channels(layer)))
        if first is None:
            first = int(self.session.page_start(layer, size))
        order = self.session.channel_orders.get(layer)
        self._order = tuple(order.channels) if order is not None else None
        self._order_label = order.label if order is not None else ""
        self.total = len(self._order) if self._order is not None else self._known_total(layer)
        # A page turned while one ran: that one stops and its parts are never shown.
        self.worker.drop()
        self._gen = None
        self._job += 1
        self.layer = layer
        self._settings = dict(self.settings())
        self._parts = []
        self._pos = max(0, int(first))
        self._size = size
        self.channels = self._page_channels()
        self._show_page()
        self.dock.setVisible(True)
        self.dock.raise_()
        self.dock.set_busy(True)
        self.dock.set_message(f"Synthesising what {len(self.channels)} channels want…")
        self._progress = (0, 0)
        if not self._copy_pending:  # else the copy asked for starts this page when made
            self._with_copy(self._start)
        self.host.refresh_busy("Visualising channels…")
        return True

    def turn(self, step: int) -> bool:
        """Visualise the previous (-1) or next (+1) page."""
        if not self.layer or not self.channels:
            return False
        # On from the page shown (the panel's page size may have changed since).
        size = max(1, int(self.host.page_channels(self.layer)))
        if step > 0:
            first = self._pos + len(self.channels)
            if self.total and first >= self.total:
                return False
        else:
            if self._pos <= 0:
                return False
            first = max(0, self._pos - size)
        return self.visualise(self.layer, first)

    def _page_channels(self) -> tuple[int, ...]:
        end = self._pos + self._size
        if self._order is not None:
            return self._order[self._pos : end]
        return tuple(range(self._pos, min(end, self.total) if self.total else end))

    def _show_page(self) -> None:
        n = len(self.channels)
        if not n:
            caption = ""
        elif self._order is not None:
            caption = f"{self._order_label}: {self._pos + 1}-{self._pos + n} of {self.total}"
        else:
            caption = f"ch {self.channels[0]}-{self.channels[-1]} of {self.total or '?'}"
        self.dock.set_page(
            self.layer,
            self.channels,
            caption,
            has_prev=self._pos > 0,
            has_next=bool(self.total) and self._pos + n < self.total,
        )

    def cancel(self) -> bool:
        """Stop the synthesis (the tiles done stay); True when one was running."""
        if not self.is_busy():
            return False
        if self._gen is not None:
            self.worker.cancel()
        else:  # still waiting for its copy: nothing started
            self._copy_pending = False
            self._end("Cancelled.", error=True)
        return True

    def forget(self) -> None:
        """Another model: stop, drop the copy and the tiles."""
        self.worker.drop()
        self._gen = None
        self._copy_pending = False
        self._copy = None
        self._parts = []
        self.layer, self.channels, self.total = "", (), 0
        self.dock.set_busy(False)
        self.dock.set_page("", ())
        self.dock.set_message("")

    def shutdown(self) -> None:
        """Stop the synthesis and wait for its thread (the window is closing)."""
        self._closed = True
        self.worker.shutdown()
        self._copy = None

    # ========================================================================== the jobs
    def _known_total(self, layer: str) -> int:
        result = self.host.result
        prepared = result.layers.get(layer) if result is not None else None
        mosaic = getattr(prepared, "mosaic", None)
        return int(mosaic.total_channels) if mosaic is not None else 0

    def _with_copy(self, then: Callable[[Any], None]) -> None:
        model = self.session.model
        held = self._copy
        if held is not None and held[0] is model:
            then(held[1])
            return

        signals = self._signals

        def job(_should_stop: Any, _report: Any) -> None:
            # On the capture worker: no capture is running, so no capture hook is copied.
            # Handed over by a signal of its own: a run submitted meanwhile makes this job
            # stale, and the worker would drop its result.
            try:
                signals.copied.emit(model, copy.deepcopy(model), None)
            except Exception as exc:  # noqa: BLE001 - shown in the dock
                signals.copied.emit(model, None, exc)

        self._then = then
        self._copy_pending = True
        # supersede=False: a run already queued still reports.
        self._copy_gen = self.host.worker.submit(job, supersede=False)
        self._copy_gens.add(self._copy_gen)

    def _start(self, model_copy: Any) -> None:
        model = self.session.model
        loaded = self.session.loaded_model
        # The opened model's preprocessing and input size go with the copy.
        target = (
            dataclasses.replace(loaded, model=model_copy)
            if loaded is not None and loaded.model is model
            else model_copy
        )
        token, layer, channels = self._job, self.layer, list(self.channels)
        s = dict(self._settings)
        need_total = not self.total
        signals = self._signals
        steps = int(s["steps"])

        def job(should_stop: Any, report: Any) -> None:
            from actviz.core.threads import lower_thread_priority

            # Live mode and the window's runs come first on shared cores, as for scans.
            lower_thread_priority()
            kwargs = {"objective": s["objective"], "steps": steps, "size": s["size"]}
            todo = channels
            if need_total:
                total = layer_channels(target, layer, size=int(s["size"]))
                signals.part.emit(token, "total", total)
                todo = [c for c in todo if c < total]
            found = visualize(target, layer, todo, cache=True, only_cached=True, **kwargs)
            if found.channels:
                signals.part.emit(token, "part", found)
            todo = [c for c in todo if c not in found.channels]
            chunks = [todo[i : i + CHUNK] for i in range(0, len(todo), CHUNK)]
            for n, part in enumerate(chunks):

                def step(done: int, _total: int, n: int = n) -> None:
                    self._progress = (n * steps + done, len(chunks) * steps)
                    report(f"Visualising channels: step {n * steps + done}")

                vis = visualize(
                    target,
                    layer,
                    part,
                    cache=True,
                    progress=step,
                    should_stop=should_stop,
                    **kwargs,
                )
                signals.part.emit(token, "part", vis)

        self._gen = self.worker.submit(job)

    # ========================================================================== events
    def _check_copy(self, *_args: Any) -> None:
        gen = self._copy_gen
        if self._copy_pending and gen is not None and self.host.worker.is_stale(gen):
            # A run superseded the copy's job, maybe before it ran: ask again behind it (the
            # first copy made is taken).
            self._with_copy(self._then)

    def _on_copied(self, model: Any, model_copy: Any, error: Any) -> None:
        if not self._copy_pending or model is not self.session.model:
            return
        self._copy_pending = False
        self._copy_gen = None
        if error is not None:
            self._end(f"Could not copy the model: {describe_error(error)}", error=True)
            return
        self._copy = (model, model_copy)
        self._then(model_copy)

    def _on_part(self, token: int, kind: str, value: Any) -> None:
        if token != self._job:
            return
        if kind == "total":
            self.total = int(value)
            self.channels = self._page_channels()
            self._show_page()
            return
        vis: Visualization = value
        self._parts.append(vis)
        for i, channel in enumerate(vis.channels):
            self.dock.mosaic.set_image(channel, vis.image_uint8(i))

    def _on_progress(self, gen: int, _message: str) -> None:
        if gen == self._gen:
            self.dock.set_progress(*self._progress)

    def _on_finished(self, gen: int, _value: Any) -> None:
        if gen != self._gen:
            return
        saved = sum(sum(p.from_cache) for p in self._parts)
        note = f" ({saved} saved before)" if saved else ""
        self._end(f"{len(self.dock.mosaic.filled())} channels{note}; click one to open it.")
        self.host.refresh_busy("Visualising channels: done")

    def _on_errored(self, gen: int, error: BaseException) -> None:
        if gen != self._gen:
            return
        log.info("visualising channels failed: %s", error)
        self._end(f"Could not visualise: {describe_error(error)}", error=True)
        self.host.refresh_busy("Visualising channels failed")

    def _on_cancelled(self, gen: int) -> None:
        if gen != self._gen:
            return
        done = len(self.dock.mosaic.filled())
        self._end(f"Cancelled ({done} of {len(self.channels)} channels done).", error=True)
        self.host.refresh_busy("Visualising channels cancelled")

    def _end(self, message: str, *, error: bool = False) -> None:
        self._gen = None
        self.dock.set_busy(False)
        self.dock.set_message(message, error=error)

    def _on_tile_clicked(self, channel: int) -> None:
        if self.layer:
            self.host.open_channel(self.layer, int(channel))
