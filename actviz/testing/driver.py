"""A driver for the actviz window in tests, a user's action in one call: :class:`WindowDriver`
wraps a shown window and a pytest-qt ``qtbot`` (else :class:`EventBot`); the ``actviz_window``
fixture (:mod:`actviz.testing.plugin`) builds drivers and checks for leaks."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import QCoreApplication, QEventLoop, QPoint, QPointF, Qt, QTimer
from PySide6.QtGui import QAction, QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDockWidget, QMenu, QWidget

from actviz.testing.checks import flush_deletes
from actviz.testing.feature_drivers import DRIVERS

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.panels.feature_map import LayerPanel
    from actviz.ui.window.main_window import MainWindow
    from actviz.ui.window.script import Explorer
    from actviz.workspace.session_state import RunResult

#: How long the driver waits for one run of a small model (ms): generous, for loaded CI machines.
RUN_TIMEOUT_MS = 60_000
#: How long it waits for a widget to appear or a menu to pop up (ms).
UI_TIMEOUT_MS = 20_000


def painted_pixels(item: Any) -> np.ndarray:
    """The ``(H, W, 4)`` uint8 pixels a pyqtgraph ``ImageItem`` (or a canvas's ``image``) paints,
    levels and colour table applied, rows top-down."""
    if not isinstance(item, pg.ImageItem):
        item = getattr(item, "image", None)
    if not isinstance(item, pg.ImageItem) or item.image is None:
        raise ValueError("the image item shows no image")
    item.render()
    if item.qimage is None:
        raise ValueError("the image item rendered nothing")
    q = item.qimage.convertToFormat(QImage.Format.Format_RGBA8888)
    rows = np.frombuffer(q.constBits(), np.uint8, q.sizeInBytes()).reshape(q.height(), -1)
    return rows[:, : q.width() * 4].reshape(q.height(), q.width(), 4).copy()


@dataclass(frozen=True)
class Prediction:
    """One of the model's answers as the prediction panel shows it: class ``index`` (a detection's
    label, a token id), its ``label`` and ``probability`` (a detection's score)."""

    index: int
    label: str
    probability: float


class WindowDriver:
    """Drive one actviz window as a user would, from a test; each feature has its own driver
    (``win.live``, ...). ``qtbot`` None uses Qt alone (:class:`EventBot`)."""

    def __init__(self, window: MainWindow | Explorer, qtbot: Any = None) -> None:
        from actviz.ui.window.script import window_of

        self.window = window = window_of(window)  # actviz.explore()'s façade: its window
        self.qtbot = qtbot if qtbot is not None else EventBot()
        #: Kept beside the window: its model is checked for hooks after the window is deleted.
        self.session = window.session
        self.models: list[Any] = []
        # A modal box nobody answers (a moved checkpoint, a pickle to trust) would hang the test.
        self._modal: tuple[Any, float] | None = None
        (timer := QTimer(window, interval=250)).timeout.connect(self._reject_unanswered)
        timer.start()

    #: Seconds a modal box may wait for an answer before it is rejected (Esc) and reported.
    modal_patience_s = UI_TIMEOUT_MS / 1000

    def _reject_unanswered(self) -> None:
        box, now = QApplication.activeModalWidget(), time.perf_counter()
        if box is None or self._modal is None or self._modal[0] is not box:
            self._modal = None if box is None else (box, now)
        elif now - self._modal[1] > self.modal_patience_s:
            self._modal, text = None, f"{box.windowTitle()}: {getattr(box, 'text', str)()}"
            box.reject()  # raised into Qt: pytest-qt fails the test, else sys.excepthook says it
            raise TimeoutError(f"nobody answered {text!r} in {self.modal_patience_s:g} s (Esc)")

    def __repr__(self) -> str:
        return f"WindowDriver({self.window.windowTitle()!r})"

    def set_model(self, model: Any, layers: list[str] | None = None, **kwargs: Any) -> None:
        """Show ``model`` (``window.script.set_model``); ``layers`` ticked (None: the defaults)."""
        self.models.append(model)
        self.window.script.set_model(model, layers=layers, **kwargs)

    def set_input(self, value: Any, **kwargs: Any) -> None:
        """Use ``value`` (a tensor, or a tuple / dict of them) as the input."""
        self.window.script.set_input(value, **kwargs)

    def tick(self, *names: str | Sequence[str]) -> None:
        """Tick layers: ``tick("conv1", "fc")`` or a list (``ValueError`` for an unknown name)."""
        self.window.script.tick(*names)

    def untick(self, *names: str | Sequence[str]) -> None:
        """Untick layers (as :meth:`tick`)."""
        self.window.script.tick(*names, ticked=False)

    @contextlib.contextmanager
    def expect_run(self, timeout_ms: int = RUN_TIMEOUT_MS, *, flush: bool = True) -> Iterator[None]:
        """Wait, after the ``with`` body, for the next ``run_finished`` (``flush``: on all panels)."""
        with self.qtbot.waitSignal(self.window.run_finished, timeout=timeout_ms):
            yield
        if flush:
            self.window.display.flush_panel_updates()

    def run_and_wait(
        self, timeout_ms: int = RUN_TIMEOUT_MS, flush: bool = True, *, start: bool = True
    ) -> RunResult:
        """Start a run (``start=False``: the one already due), wait for it and return the result
        shown (``flush``: on every panel at once)."""
        with self.expect_run(timeout_ms, flush=flush):
            if start:
                assert self.window.runs.run() is not None, "the window could not start a run"
        result = self.window.session.result
        assert result is not None
        return result

    def wait_idle(self, timeout_ms: int = RUN_TIMEOUT_MS) -> bool:
        """Wait until nothing runs or is due and every panel shows the result; False on timeout."""
        return self.window.script.wait_idle(timeout_ms)

    def panel(self, layer: str) -> LayerPanel:
        """The layer panel of ``layer`` (KeyError naming the panels there are)."""
        if layer not in (panels := self.window.host.layer_panels):
            raise KeyError(f"no panel for {layer!r}; the window shows {list(panels)}")
        return panels[layer]

    def shown_pixels(self, layer: str, *, gradient: bool = False) -> np.ndarray:
        """The ``(H, W, 4)`` uint8 pixels ``layer``'s panel paints for its maps (``gradient``:
        the gradient side), levels and colour map applied."""
        panel = self.panel(layer)
        slot = panel.gradient_slot if gradient else panel.activation_slot
        if (canvas := slot.image_canvas) is None or slot.stack.currentWidget() is not canvas:
            kind = slot.view.kind if slot.view is not None else "nothing"
            raise ValueError(f"{layer!r} shows {kind}, not an image")
        return painted_pixels(canvas)

    def channels(self, layer: str) -> int:
        """The channels ``layer``'s panel pages through: feature maps, a vector's units, a
        token layer's features; 1 for a single number."""
        self.panel(layer)  # KeyError naming the panels there are
        result = self.window.session.result
        prepared = None if result is None else result.layers.get(layer)
        if prepared is None:
            raise ValueError(f"{layer!r} has no result on its panel yet (run first)")
        if prepared.mosaic is not None:
            return int(prepared.mosaic.total_channels)
        view = prepared.view
        if prepared.tokens is not None or (view is not None and view.kind == "heatmap"):
            return int(prepared.shape[-1]) if prepared.shape else 1
        return 1 if view is None or view.kind == "scalar" else int(view.data.shape[0])

    def predictions(self) -> tuple[Prediction, ...]:
        """The shown result's top answers, best first (the edited model's after edits)."""
        if (result := self.window.session.result) is None:
            return ()
        return tuple(Prediction(int(i), str(label), float(p)) for i, label, p in result.predictions)

    def prediction(self) -> Prediction:
        """The top answer of the result shown (see :meth:`predictions`)."""
        if not (rows := self.predictions()):
            raise ValueError("the window shows no prediction (no run yet, or no output)")
        return rows[0]

    def status_text(self) -> str:
        """The status bar's message."""
        return self.window.status.status_label.text()

    def banner_messages(self) -> list[str]:
        """The messages in the banner above the panels (errors and warnings), in order."""
        return list(self.window.centre.banner.texts())

    def feature(self, name: str) -> Any:
        """The feature ``name`` ("whatif", "compare", "dataset", "tokens", "live", ...)."""
        if name not in (features := self.window.features):
            raise KeyError(f"no feature {name!r}; the window has {sorted(features)}")
        return features[name]

    def reveal(self, layer: str) -> LayerPanel:
        """Scroll ``layer``'s panel into view once the layout settled; wait until it is on screen."""
        self.settle()
        panel = self.panel(layer)
        self.window.centre.layers_scroll.ensureWidgetVisible(panel)
        self.qtbot.waitUntil(lambda: not panel.visibleRegion().isEmpty(), timeout=UI_TIMEOUT_MS)
        return panel

    def tile_menu(self, layer: str, channel: int) -> QMenu:
        """Right-click ``channel``'s tile (or bar) in ``layer``'s panel; return the menu."""
        slot = self.reveal(layer).activation_slot
        if (view := slot.view) is not None and view.kind == "maps" and slot.mosaic is not None:
            canvas = slot.image_canvas
            y0, x0 = slot.mosaic.tile_origin(channel)
            pos = canvas.image_to_widget(x0 + 1.5, y0 + 1.5)
        elif view is not None and view.kind == "bars":
            canvas = slot.bar_canvas
            height = float(np.asarray(view.data)[channel])
            scene = canvas.view.mapViewToScene(QPointF(float(channel), height / 2))
            pos = canvas.mapFromScene(scene)
        else:
            raise ValueError(f"{layer!r} has no tiles or bars to right-click")
        self.qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.RightButton, pos=QPoint(pos))

        def popped() -> bool:
            widget = QApplication.activePopupWidget()
            return isinstance(widget, QMenu) and widget.isVisible()

        self.qtbot.waitUntil(popped, timeout=UI_TIMEOUT_MS)
        return QApplication.activePopupWidget()

    def context_action(self, layer: str, channel: int, text: str) -> QAction:
        """Click the tile-menu item of ``channel`` in ``layer`` whose text starts with ``text``
        ("Ablate" clicks "Ablate ch 1"); returns its action."""
        menu = self.tile_menu(layer, channel)
        actions = [a for a in menu.actions() if not a.isSeparator() and a.text()]
        found = [a for a in actions if a.text() == text]
        found += [a for a in actions if a.text().startswith((text + " ", text + "…"))]
        if not found:
            raise KeyError(f"no item {text!r} in the menu: {[a.text() for a in actions]}")
        action = found[0]
        assert action.isEnabled(), f"{action.text()!r} is disabled"
        at = menu.actionGeometry(action).center()
        self.qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=at)
        return action

    def resize(self, width: int, height: int) -> bool:
        """Resize the window and wait for its layout to settle (:meth:`settle`'s answer)."""
        self.window.resize(width, height)
        return self.settle()

    def settle(self, timeout_ms: int = UI_TIMEOUT_MS) -> bool:
        """Wait until the layout settled (geometry unchanged over consecutive passes, no deferred
        step, panels current); False on timeout."""
        w = self.window
        deadline = time.perf_counter() + timeout_ms / 1000
        last: tuple | None = None
        still = 0
        while time.perf_counter() < deadline:
            QCoreApplication.processEvents()
            self.qtbot.wait(1)
            shape = self._geometry()
            steps, updates = w.display.display_pending(), w.display.panel_updates_pending()
            if shape == last and not steps and updates:
                # Panels out of view wait to be scrolled to: put the result on them now.
                w.display.flush_panel_updates()
                last, still = None, 0
                continue
            still = still + 1 if shape == last and not (steps or updates) else 0
            if still >= 2:
                return True
            last = shape
        return False

    def _geometry(self) -> tuple:
        w = self.window
        widgets = [w, w.centre.layers_scroll.viewport(), *w.findChildren(QDockWidget)]
        widgets += list(w.host.layer_panels.values())
        return tuple((x.isVisible(), x.geometry().getRect()) for x in widgets)

    def open_dock(self, name: str | QDockWidget) -> QDockWidget:
        """Show the dock titled (or with the object name) ``name``, or the dock itself, as
        View > its name does; wait until it is visible and the layout settled, and return it."""
        docks = self.window.findChildren(QDockWidget)
        wanted = name if isinstance(name, QDockWidget) else name.casefold()
        for dock in docks:
            if wanted in (dock, dock.windowTitle().casefold(), dock.objectName().casefold()):
                break
        else:
            titles = [d.windowTitle() or d.objectName() for d in docks]
            raise KeyError(f"no dock {name!r}; the window has {titles}")
        if not dock.isVisible():
            dock.toggleViewAction().trigger()
        dock.raise_()
        self.qtbot.waitUntil(dock.isVisible, timeout=UI_TIMEOUT_MS)
        self.settle()
        return dock

    def close(self) -> None:
        """Close the window (it stops its workers; the fixture deletes it at the end)."""
        window = self.window
        if window is not None and shiboken6.isValid(window) and not window.is_closed():
            window.close()

    def delete(self) -> None:
        """Close and delete the window now and let go of it (``window`` becomes None)."""
        self.close()
        window, self.window = self.window, None
        if self.session is not None:  # its model is still checked for hooks at the end
            self.models.append(self.session.model)
            self.session = None
        if window is not None and shiboken6.isValid(window):
            window.deleteLater()  # with everything parented to it
        del window
        flush_deletes()


class EventBot:
    """pytest-qt's ``waitSignal``, ``waitUntil``, ``mouseClick`` and ``wait`` with Qt alone."""

    @contextlib.contextmanager
    def waitSignal(self, signal: Any, timeout: int = UI_TIMEOUT_MS) -> Iterator[None]:  # noqa: N802
        """Wait, after the ``with`` body, for ``signal`` (``TimeoutError`` after ``timeout`` ms)."""
        seen: list[tuple] = []
        signal.connect(fired := lambda *args: seen.append(args))
        try:
            yield
            self.waitUntil(lambda: seen, timeout, what="the signal was not emitted")
        finally:
            signal.disconnect(fired)

    def waitUntil(  # noqa: N802
        self, condition: Callable[[], Any], timeout: int = UI_TIMEOUT_MS, what: str = ""
    ) -> None:
        """Process events until ``condition()`` is true (``TimeoutError`` after ``timeout`` ms)."""
        deadline = time.perf_counter() + timeout / 1000
        while not condition():
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{what or 'the condition was not met'} within {timeout} ms")
            self.wait(5)

    def mouseClick(  # noqa: N802
        self,
        widget: QWidget,
        button: Qt.MouseButton,
        modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier,
        pos: QPoint | None = None,
        delay: int = -1,
    ) -> None:
        """Click ``widget`` at ``pos`` (its centre by default), as ``QTest.mouseClick``."""
        QTest.mouseClick(widget, button, modifier, pos or widget.rect().center(), delay)

    def wait(self, ms: int) -> None:
        """Process events for ``ms`` milliseconds, in an event loop: ``QTest.qWait`` holds the GIL
        all along (PySide6 6.11), so no worker thread (a run, a live frame) moves meanwhile."""
        QTimer.singleShot(ms, (loop := QEventLoop()).quit)
        loop.exec()


# The per-feature drivers (:mod:`actviz.testing.feature_drivers`): ``win.live``, ``win.compare``...
for _name, _driver in DRIVERS.items():
    setattr(WindowDriver, _name, property(_driver, doc=_driver.__doc__))
