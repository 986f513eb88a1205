"""Per-feature drivers: the few verbs a test needs for one feature of the window.

Reached by the feature's name (``win.live``, ``win.compare``, ``win.dataset``, ``win.effects``,
``win.whatif``, ``win.tokens``, ``win.sessions``, ``win.visualize``, ``win.atlas``,
``win.concepts``), so tests do not reach into ``window.features``; a driver's ``feature`` is the
feature itself.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QDockWidget

#: How long a feature driver waits for a feature's job (ms): as long as for a run.
JOB_TIMEOUT_MS = 60_000
#: How long it waits for a dock or a page to show (ms).
SHOW_TIMEOUT_MS = 5_000

__all__ = [
    "AtlasDriver",
    "CompareDriver",
    "ConceptsDriver",
    "DatasetDriver",
    "EffectsDriver",
    "FeatureDriver",
    "LiveDriver",
    "SessionsDriver",
    "TokensDriver",
    "VisualizeDriver",
    "WhatIfDriver",
]


class FeatureDriver:
    """Drive the feature ``name`` of the window's :class:`~actviz.testing.WindowDriver` (the base of
    feature drivers).
    """

    name = ""

    def __init__(self, driver: Any) -> None:  # a WindowDriver (it imports this module)
        self.driver = driver

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.driver!r})"

    @property
    def feature(self) -> Any:
        """The feature itself (KeyError naming the window's features when it has not this)."""
        return self.driver.feature(self.name)

    @property
    def present(self) -> bool:
        """Whether the window has this feature (``actviz_window(features=...)`` builds only
        those it names)."""
        try:
            self.feature  # noqa: B018 - looked up for the KeyError
        except (KeyError, AttributeError):
            return False
        return True

    @property
    def dock(self) -> Any:
        """The feature's dock (None for a feature without one)."""
        return getattr(self.feature, "dock", None)

    def show_dock(self) -> QDockWidget:
        """Show the feature's dock (as View > its name does) and wait until it is visible."""
        dock = self.dock
        if not isinstance(dock, QDockWidget):
            raise ValueError(f"the {self.name!r} feature has no dock")
        dock.show()
        dock.raise_()
        self.driver.qtbot.waitUntil(dock.isVisible, timeout=SHOW_TIMEOUT_MS)
        return dock


class LiveDriver(FeatureDriver):
    """Live mode (``win.live``): its controller, its dock and its readouts."""

    name = "live"

    @property
    def controller(self) -> Any:
        """The :class:`~actviz.ui.live.controller.LiveController` (plays sources, frames)."""
        return self.feature.controller

    def configure(self, **kwargs: Any) -> Any:
        """Set the controller's options (``max_fps``, ``memory_budget``, ...); returns it."""
        return self.feature.configure(**kwargs)

    def wait_frames(self, count: int, timeout_ms: int = JOB_TIMEOUT_MS) -> None:
        """Wait until live mode has shown ``count`` frames in all (``frames_shown``)."""
        live = self.controller
        self.driver.qtbot.waitUntil(lambda: live.frames_shown >= count, timeout=timeout_ms)

    def wait_idle(self, timeout_ms: int = JOB_TIMEOUT_MS) -> None:
        """Wait until no live frame is being captured or shown."""
        live = self.controller
        self.driver.qtbot.waitUntil(lambda: live.idle, timeout=timeout_ms)

    def occlude(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Show the live dock and tick its occlusion patch, as a user does: the input is
        occluded and run as a live frame. Waits for that run and for live mode to be idle;
        returns the result shown."""
        dock = self.show_dock()
        with self.driver.expect_run(timeout_ms):
            dock.occlusion_check.setChecked(True)
        self.wait_idle(timeout_ms)
        return self.driver.window.session.result

    def status_text(self) -> str:
        """The live rate in the status bar ("12.0 fps", "live paused", or empty)."""
        return self.feature.status_label.text()

    def stats_text(self) -> str:
        """The dock's statistics line ("paused · capture ..." while paused)."""
        return self.feature.dock.stats_label.text()

    def message_text(self) -> str:
        """The dock's message (why a frame was refused, a source failed, ...)."""
        return self.feature.dock.message_label.text()

    def memory_text(self) -> str:
        """The dock's memory line (what live mode holds)."""
        return self.feature.dock.memory_label.text()


class DatasetDriver(FeatureDriver):
    """Dataset scans (``win.dataset``): start a scan, wait for it, read its dock."""

    name = "dataset"

    @property
    def scans(self) -> Any:
        """The scan runner (signals ``scan_finished``, ``scan_cancelled``, ``scan_failed``)."""
        return self.feature.scans

    @property
    def scan(self) -> Any:
        """The scan shown (None before one)."""
        return self.feature.scan

    def in_process(self) -> DatasetDriver:
        """Load images in the GUI process (no loader processes: quick for a few tiny images);
        returns this driver."""
        self.feature.scans.num_workers = 0
        return self

    def start(self, spec: Any) -> Any:
        """Start scanning ``spec`` (a :class:`~actviz.data.scan.ScanSpec`); its job or None."""
        return self.feature.start(spec)

    def scan_and_wait(self, spec: Any, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Scan ``spec``, wait for ``scan_finished`` and return the finished scan (its
        argument: a saved one comes back ``from_cache``)."""
        with self.driver.qtbot.waitSignal(self.scans.scan_finished, timeout=timeout_ms) as done:
            self.start(spec)
        return done.args[0]

    def open_dialog(self) -> Any:
        """Open the scan dialog (Data > Scan dataset…) and return it."""
        return self.feature.open_dialog()


class CompareDriver(FeatureDriver):
    """The Compare tab (``win.compare``): compare with another input, wait, read its view."""

    name = "compare"

    @property
    def page(self) -> Any:
        """The Compare tab's page."""
        return self.feature.page

    @property
    def view(self) -> Any:
        """The :class:`~actviz.ui.compare.view.CompareView` (chart, sources, buttons)."""
        return self.feature.view

    def show_page(self) -> Any:
        """Make the Compare tab the current one; returns its page."""
        page = self.page
        self.driver.window.centre.tabs.setCurrentWidget(page)
        return page

    def compare_with_input(self, source: str, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Compare the result shown with a run on the input ``source`` ("random:1x3x16x16:5",
        a path) and wait for ``compare_finished``; returns the view."""
        feature = self.feature
        with self.driver.qtbot.waitSignal(feature.compare_finished, timeout=timeout_ms):
            assert feature.compare_with_input(source), f"could not compare with {source!r}"
        return feature.view

    def compare_with_pin(self, pin: Any, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Compare the result shown with the pinned result ``pin`` (Pinned results > Compare
        with) and wait for ``compare_finished``; returns the view."""
        feature = self.feature
        with self.driver.qtbot.waitSignal(feature.compare_finished, timeout=timeout_ms):
            assert feature.compare_with_pin(pin), f"could not compare with {pin!r}"
        return feature.view

    def click_compare(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Click the view's Compare button with the mouse and wait for ``compare_finished``;
        returns the view."""
        from PySide6.QtCore import Qt

        feature = self.feature
        with self.driver.qtbot.waitSignal(feature.compare_finished, timeout=timeout_ms):
            self.driver.qtbot.mouseClick(feature.view.compare_button, Qt.MouseButton.LeftButton)
        return feature.view

    def wait_diff_panels(self, timeout_ms: int = SHOW_TIMEOUT_MS) -> None:
        """Wait until every difference panel of the comparison is painted (the page shown)."""
        feature = self.feature
        self.driver.qtbot.waitUntil(lambda: not feature.diff_panels_pending(), timeout=timeout_ms)


class EffectsDriver(FeatureDriver):
    """The "Channels that matter" dock (``win.effects``): open it, wait for the estimates."""

    name = "effects"

    def open(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Open the dock (estimates are made only while it is shown) and wait for the
        estimates of the result shown; returns them."""
        self.driver.open_dock(self.feature.dock.windowTitle())
        return self.wait_estimates(timeout_ms)

    def wait_estimates(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Wait until the estimates of the result shown are made (off the GUI thread) and
        return them (fails when there are none)."""
        feature = self.feature
        self.driver.qtbot.waitUntil(lambda: not feature.estimating(), timeout=timeout_ms)
        assert feature.effects is not None, "no estimates were made"
        return feature.effects

    @property
    def view(self) -> Any:
        """The dock's view (its sections per layer, the sort and mark boxes, the top spin)."""
        return self.feature.view


class WhatIfDriver(FeatureDriver):
    """What-if edits (``win.whatif``): add edits, read the edits dock and the change view."""

    name = "whatif"

    def add_edit(self, layer: str, edit: Any, note: str = "") -> None:
        """Add ``edit`` (``actviz.edits.ablate([1])``, ...) on ``layer``, as the tile menu does."""
        self.feature.add_edit(layer, edit, note)

    @property
    def change_view(self) -> Any:
        """The view of how the edits changed the prediction."""
        return self.feature.change_view

    def rows(self) -> list[Any]:
        """The rows of the edits dock, one an edit, in order."""
        return list(self.feature.dock.rows)

    def error_text(self) -> str:
        """The dock's error line (an edit that could not apply); empty when hidden."""
        label = self.feature.dock.error_label
        return "" if label.isHidden() else label.text()


class TokensDriver(FeatureDriver):
    """Token views (``win.tokens``): the attention page and its panels."""

    name = "tokens"

    def show_attention(self) -> Any:
        """Make the Attention tab the current one; returns its page."""
        page = self.feature.attention_page
        self.driver.window.centre.tabs.setCurrentWidget(page)
        return page

    @property
    def attention_panel(self) -> Any:
        """The attention panel (head maps over the tokens)."""
        return self.feature.attention_panel

    @property
    def lens_panel(self) -> Any:
        """The logit lens panel."""
        return self.feature.lens_panel

    @property
    def rollout_panel(self) -> Any:
        """The attention rollout panel."""
        return self.feature.rollout_panel


class SessionsDriver(FeatureDriver):
    """Session files (``win.sessions``): save and open a session, and wait for it."""

    name = "sessions"

    def save(self, path: Any) -> None:
        """Save the session to ``path`` and wait until it is written."""
        saved = self.feature.save_session(path, wait=True)
        assert saved, f"could not save {path}: {self.driver.banner_messages()}"

    def open(self, path: Any) -> None:
        """Open the session file ``path`` and wait until it is shown."""
        opened = self.feature.open_session(path, wait=True)
        assert opened, f"could not open {path}: {self.driver.banner_messages()}"


class VisualizeDriver(FeatureDriver):
    """What channels want (``win.visualize``): its settings, a page of pictures, waiting."""

    name = "visualize"

    @property
    def section(self) -> Any:
        """The settings section (objective, steps and size boxes) in the Channel dock."""
        return self.feature.section

    @property
    def page(self) -> Any:
        """The page of pictures (its dock, its job)."""
        return self.feature.page

    def configure(
        self, *, size: int | None = None, steps: int | None = None, objective: str | None = None
    ) -> Any:
        """Set the section's boxes as a user types them (those given, in this order); returns
        the section."""
        section = self.section
        if objective is not None:
            section.objective_box.setCurrentText(objective)
        if size is not None:
            section.size_spin.setValue(size)
        if steps is not None:
            section.steps_spin.setValue(steps)
        return section

    def visualise_page(self, layer: str, first: int | None = None) -> bool:
        """Start the pictures of ``layer``'s channels from ``first`` (the panel's page when
        None), as the tile menu does; whether they started."""
        return self.feature.visualise_page(layer, first)

    def wait_idle(self, timeout_ms: int = JOB_TIMEOUT_MS) -> None:
        """Wait until no picture is being made or looked up."""
        feature = self.feature
        self.driver.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=timeout_ms)


class AtlasDriver(FeatureDriver):
    """The Atlas tab (``win.atlas``): a scan mapped, its view and selection."""

    name = "atlas"

    @property
    def fitted(self) -> Any:
        """The signal sent when a scan's map is made."""
        return self.feature.fitted

    @property
    def atlas(self) -> Any:
        """The map shown (None before a scan is mapped)."""
        return self.feature.atlas

    @property
    def view(self) -> Any:
        """The tab's view (the scatter, the layer and colour boxes, the empty label)."""
        return self.feature.view

    def scan_and_map(self, spec: Any, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Scan ``spec`` (a :class:`~actviz.data.scan.ScanSpec`) and wait until the atlas maps
        it; returns the atlas feature."""
        feature = self.feature
        with self.driver.qtbot.waitSignal(feature.fitted, timeout=timeout_ms):
            self.driver.dataset.start(spec)
        return feature


class ConceptsDriver(FeatureDriver):
    """Concepts (``win.concepts``): the dictionaries attached and the Concept dock."""

    name = "concepts"

    @property
    def view(self) -> Any:
        """The Concept dock's view."""
        return self.feature.view

    def open_folder(self, folder: Any, layer: str | None = None) -> bool:
        """Attach the concepts saved in ``folder`` (SAELens layout) to ``layer`` (the one they
        name when None); whether they were attached."""
        return self.feature.open_folder(str(folder), layer)

    def open_concept(self, layer: str, concept: int) -> bool:
        """Open ``concept`` of ``layer`` in the Concept dock, as a click on its tile does."""
        return self.feature.open_concept(layer, concept)
