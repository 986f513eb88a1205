"""The "What channels want" dock: a layer's page visualised on its own worker and model copy
(minutes on a CPU). Window runs come first; cached channels show at once, Cancel keeps the rest."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from actviz.analysis.visualize import visualization
from actviz.analysis.visualize.feature_vis import layer_channels, visualize
from actviz.analysis.visualize.visualization import Visualization, VisualizeSettings
from actviz.ui.host import FeatureJob, WindowHost
from actviz.ui.visualize.section import MosaicDock, read_saved_settings
from actviz.ui.worker import CAPTURE_NICE, Worker

DOCK_WIDTH = 340  #: The dock's width when first shown.
#: Channels per page of a layer whose panel has no pages (a Linear layer's outputs).
VECTOR_PAGE = 16
#: The most channels a page holds (a whole layer would be an hour of CPU, in tiny tiles).
MAX_PAGE = 32
STATE_KEY = "visualize_page"  #: The page's key among a session file's parts.
CHUNK = 4  #: Channels synthesised per batch: tiles appear every few seconds, a GPU stays busy.
#: The longest an optimisation step waits for the capture worker's job (live mode still moves).
YIELD_S = 1.0


class PageVisualiser(QObject):
    """The dock and its background synthesis, with "What it wants"'s ``settings()`` and menu."""

    #: ``(token, kind, value)``, from the job's thread: "part" (a Visualization) or "total"
    #: (the layer's channel count).
    pictures_made = Signal(int, str, object)

    def __init__(
        self, host: WindowHost, settings: Callable[[], VisualizeSettings], settings_menu: Any
    ) -> None:
        super().__init__(host.dialog_parent())
        self.host, self.session, self.settings = host, host.session, settings
        self.dock = MosaicDock(host.dialog_parent(), settings_menu)
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=DOCK_WIDTH)
        #: The synthesis (on the model's copy); one page at a time, newest wins.
        self.worker = Worker(self, nice=CAPTURE_NICE)
        #: Layer, channels of the page, the layer's channel count (0 while unknown).
        self.layer, self.total = "", 0
        self.channels: tuple[int, ...] = ()
        self._parts: list[Visualization] = []
        # The page: its position in the layer's (or the panel's) order, and its size.
        self._order: tuple[int, ...] | None = None
        self._order_label, self._pos, self._size, self._settings = "", 0, 1, VisualizeSettings()
        self._token = 0  # of the page whose parts are shown (a part of another is dropped)
        #: The model's copy the page is synthesised on (made on the capture worker).
        self.copy = host.private_model(self)
        self._closed = False

        self.dock.page_requested.connect(self.turn)
        self.dock.visualise_requested.connect(self.again)
        self.dock.cancel_requested.connect(self.cancel)
        self.dock.mosaic.tile_clicked.connect(
            lambda channel: self.layer and self.host.open_channel(self.layer, int(channel))
        )
        self.dock.toggleViewAction().toggled.connect(self._on_dock_toggled)
        self.pictures_made.connect(self._on_part)
        #: The page's job on :attr:`worker` and its ``(kind, token)``.
        self.job = FeatureJob(
            self,
            host,
            self.dock,
            failed="Could not visualise",
            status="Visualising channels",
            cancelled=lambda: (
                f"Cancelled ({len(self.dock.mosaic.filled())} of "
                f"{_count(len(self.channels))} done)."
            ),
            log_as="visualising channels",
            on_finished=self._on_finished,
            worker=self.worker,
            copy=self.copy,
        )

    def is_busy(self) -> bool:
        """True while the page is being copied for, synthesised or looked up."""
        return self.job.running or self.copy.pending

    def result(self) -> Visualization | None:
        """The pictures of the page shown so far, in tile order (None: none yet)."""
        if not self._parts:
            return None
        merged = visualization.merge_visualizations(self._parts)
        return merged.select([c for c in self.channels if c in merged.channels])

    def visualise(self, layer: str, first: int | None = None, *, size: int | None = None) -> bool:
        """Fill the dock with ``size`` channels of ``layer`` from ``first`` (None: the panel's
        page); False: nothing to do."""
        if self._closed or self.session.model is None or not layer:
            return False
        size = self._page_size(layer) if size is None else max(1, int(size))
        first = int(self.session.page_start(layer, size)) if first is None else first
        order = self.session.channel_orders.get(layer)
        self._order = tuple(order.channels) if order is not None else None
        self._order_label = order.label if order is not None else ""
        self.total = len(self._order) if self._order is not None else self._known_total(layer)
        return self._synthesise(layer, first, size)

    def again(self) -> bool:
        """The dock's Visualise: synthesise the page shown, in its own order."""
        if self._closed or self.session.model is None or not self.layer:
            return False
        return self._synthesise(self.layer, self._pos, self._size)

    def _synthesise(self, layer: str, first: int, size: int) -> bool:
        self._new_page(layer, first, size, self.settings())
        self.dock.setVisible(True)
        self.dock.raise_()
        self.dock.set_busy(True)
        text = self._synthesising()
        if not self.copy.is_held() and self.host.worker.is_busy():
            # The copy waits for the capture worker's current job: say so.
            text = f"Waiting for the run in progress to end, then {text[0].lower()}{text[1:]}"
        self.dock.set_message(text)
        self.job.progress = (0, 0)
        # A copy already asked for starts this page when made (once: the same bound method
        # asked for twice is queued once, a new lambda each time would start it twice).
        self.copy.get(self._start, self.job.copy_failed)
        self.host.refresh_busy("Visualising channels…")
        return True

    def turn(self, step: int) -> bool:
        """Visualise the previous (-1) or next (+1) page."""
        if not self.layer or not self.channels:
            return False
        if step > 0:
            first = self._pos + len(self.channels)
            if self.total and first >= self.total:
                return False
        elif self._pos <= 0:
            return False
        else:  # on from the page shown (the panel's page size may have changed since)
            first = max(0, self._pos - self._page_size(self.layer))
        return self.visualise(self.layer, first)

    def _new_page(self, layer: str, first: int, size: int, settings: VisualizeSettings) -> None:
        # A page turned while one ran: that one stops and its parts are never shown.
        self.job.drop()
        self._token += 1
        self.layer, self._settings = layer, settings
        self._parts, self._pos, self._size = [], max(0, int(first)), max(1, int(size))
        self.channels = self._page_channels()
        self._show_page()

    def _synthesising(self) -> str:
        n = len(self.channels)
        return f"Synthesising what {_count(n)} {'wants' if n == 1 else 'want'}…"

    def _page_channels(self) -> tuple[int, ...]:
        end = self._pos + self._size
        if self._order is not None:
            return self._order[self._pos : end]
        return tuple(range(self._pos, min(end, self.total) if self.total else end))

    def _show_page(self) -> None:
        if not (n := len(self.channels)):
            caption = ""
        elif self._order is not None:
            caption = f"{self._order_label}: {self._pos + 1}-{self._pos + n} of {self.total}"
        else:
            caption = f"ch {self.channels[0]}-{self.channels[-1]} of {self.total or '?'}"
        has_next = bool(self.total) and self._pos + n < self.total
        self.dock.set_page(
            self.layer, self.channels, caption, has_prev=self._pos > 0, has_next=has_next
        )

    def cancel(self) -> bool:
        """Stop the synthesis (the tiles done stay); True when one was running."""
        return self.job.cancel()

    def forget(self) -> None:
        """Another model: stop, drop the copy and the tiles."""
        self.job.drop()
        self.copy.forget()
        self._parts, self.layer, self.total, self.channels = [], "", 0, ()
        self.dock.set_busy(False)
        self.dock.set_page("", ())
        self.dock.set_message("")

    def state(self) -> dict[str, Any] | None:
        """What a session file keeps of the page (JSON-able; None: no page shown, dock closed)."""
        is_open = self.dock.toggleViewAction().isChecked()
        if not self.layer and not is_open:
            return None
        state: dict[str, Any] = {"open": is_open}
        if self.layer:
            s = self._settings
            state.update(
                layer=self.layer,
                first=self._pos,
                size=self._size,
                total=self.total,
                settings={"objective": s.objective, "steps": s.steps, "size": s.size[0]},
            )
            if self._order is not None:
                state.update(order=list(self._order), order_label=self._order_label)
        return state

    def restore(self, state: Any) -> bool:
        """Show :meth:`state`'s page again from the cache; False when its layer is not shown."""
        if not isinstance(state, dict) or self._closed:
            return False
        if isinstance(state.get("open"), bool):
            self.dock.setVisible(state["open"])
        layer, settings = state.get("layer"), read_saved_settings(state.get("settings"))
        tree, model = self.session.tree, self.session.model
        if not isinstance(layer, str) or not layer or settings is None or model is None:
            return False
        if tree is not None and layer not in tree:
            return False
        if isinstance(order := state.get("order"), list) and all(type(c) is int for c in order):
            self._order, self._order_label = tuple(order), str(state.get("order_label") or "")
            self.total = len(self._order)
        else:
            self._order, self._order_label = None, ""
            total = state.get("total")
            self.total = total if type(total) is int and total > 0 else self._known_total(layer)
        first, size = state.get("first"), state.get("size")
        self.copy.abandon()  # a copy asked for earlier starts nothing now
        size = size if type(size) is int else self._page_size(layer)
        self._new_page(layer, first if type(first) is int else 0, size, settings)
        # The tiles the cache holds (on :attr:`worker`; no forward pass, no hooks).
        loaded = self.session.loaded_model
        self._run(loaded if loaded is not None and loaded.model is model else model, False)
        return True

    def shutdown(self) -> None:
        """Stop the synthesis and wait for its thread (the window is closing)."""
        self._closed = True
        self.worker.shutdown()
        self.copy.close()

    def _page_size(self, layer: str) -> int:
        """Channels per page: the panel's, at most :data:`MAX_PAGE` (else :data:`VECTOR_PAGE`)."""
        if self._mosaic(layer) is None and layer not in self.session.page_channels:
            return VECTOR_PAGE
        return max(1, min(MAX_PAGE, int(self.host.page_channels(layer))))

    def _known_total(self, layer: str) -> int:
        return int(mosaic.total_channels) if (mosaic := self._mosaic(layer)) is not None else 0

    def _mosaic(self, layer: str) -> Any:
        result = self.host.result
        return getattr(result.layers.get(layer) if result is not None else None, "mosaic", None)

    def _start(self, twin: Any) -> None:
        self._run(self.copy.engine_model(twin), True)

    def _run(self, target: Any, compute: bool) -> None:
        """The page's job: the cached pictures, then (``compute``) the others made on ``target``,
        each told by :attr:`pictures_made` (and the layer's count, when it is asked)."""
        token, signals, tracked = self._token, self.pictures_made, self.job
        capture_worker = self.host.worker
        layer, channels, settings = self.layer, list(self.channels), self._settings
        need_total, steps = compute and not self.total, settings.steps
        text = "Visualising channels: step {0}"

        def job(should_stop: Any, report: Any) -> None:
            def give_way() -> bool:
                # Before each step: the window's run or live frame first (a bounded wait); stop?
                deadline = time.monotonic() + YIELD_S
                while capture_worker.is_busy() and time.monotonic() < deadline:
                    if should_stop():
                        return True
                    time.sleep(0.002)
                return bool(should_stop())

            todo = channels
            if need_total:
                total = layer_channels(target, layer, size=settings.size[0])
                signals.emit(token, "total", total)
                todo = [c for c in todo if c < total]
            found = visualize(target, layer, todo, settings, cache=True, only_cached=True)
            if found.channels:
                signals.emit(token, "part", found)
            if not compute:
                return
            todo = [c for c in todo if c not in found.channels]
            chunks = [todo[i : i + CHUNK] for i in range(0, len(todo), CHUNK)]
            for n, part in enumerate(chunks):
                step = tracked.stepper(report, text, n * steps, len(chunks) * steps)
                vis = visualize(
                    target, layer, part, settings, cache=True, progress=step, should_stop=give_way
                )
                signals.emit(token, "part", vis)

        self.job.start(
            job,
            message=self._synthesising() if compute else "Looking for the page's saved pictures…",
            status="Visualising channels…" if compute else "",
            done="Visualising channels: done" if compute else "",
            context=("synthesis" if compute else "look-up", token),
        ).failed.connect(self._on_worker_errored)

    def _on_worker_errored(self, _error: BaseException) -> None:
        # Failed before any picture: no grey tiles, as if pictures were coming.
        if not self.dock.mosaic.filled():
            self.dock.mosaic.set_channels(())

    def _on_part(self, token: int, kind: str, value: Any) -> None:
        if token != self._token:
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

    def _on_finished(self, _value: Any, context: Any) -> None:
        kind, token = context
        if token != self._token:
            return
        filled, n = len(self.dock.mosaic.filled()), len(self.channels)
        saved = sum(sum(p.from_cache) for p in self._parts)
        # The tiles' own settings: the shared ⚙ popover may say others by now.
        made = f"at {self._settings.steps} steps, {self._settings.size[0]} px"
        if kind == "synthesis":
            note = f" ({saved} saved before)" if saved else ""
            self.dock.set_message(f"{_count(filled)} {made}{note}; click one to open it.")
        elif filled >= n:
            self.dock.set_message(f"{_count(n)} {made} (saved before); click one to open it.")
        else:  # a restored page the cache does not hold all of: never a silent grey page
            self.dock.set_message(
                f"{filled} of {n} channels saved: press Visualise to synthesise what the "
                f"other {n - filled} want."
                if filled
                else "Not synthesised yet: press Visualise to synthesise what "
                + ("this channel wants." if n == 1 else f"these {n} channels want.")
            )

    def _on_dock_toggled(self, shown: bool) -> None:
        # Closed, it stops (minutes of unseen CPU otherwise); tiles done stay, Visualise resumes.
        if not shown and not self.host.is_closed():
            self.cancel()


def _count(n: int) -> str:
    return f"{n} channel" if n == 1 else f"{n} channels"
