"""Small drivers, one per feature of the window, reached by its name (``win.live``, ...) so tests
do not reach into ``window.features``; members that only read or wait on the feature are made
from each driver's ``members`` table (:func:`_member`)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget

#: How long a feature driver waits for a feature's job (ms): as long as for a run.
JOB_TIMEOUT_MS = 60_000


def _member(kind: str, path: str, doc: str) -> Any:
    """A member over ``feature.<path>`` (``until``: waits for it, ``not path`` for it false)."""
    negate = path.startswith("not ")
    read = attrgetter(path.removeprefix("not "))

    def get(self: FeatureDriver) -> Any:
        return read(self.feature)

    def call(self: FeatureDriver, *args: Any, **kwargs: Any) -> Any:
        return read(self.feature)(*args, **kwargs)

    def text(self: FeatureDriver) -> str:
        return read(self.feature).text()

    def tab(self: FeatureDriver) -> Any:
        page = read(self.feature)
        self.driver.window.centre.tabs.setCurrentWidget(page)
        return page

    def until(self: FeatureDriver, timeout_ms: int = JOB_TIMEOUT_MS) -> bool:
        feature = self.feature

        def done() -> bool:
            value = read(feature)
            return bool(value() if callable(value) else value) != negate

        try:  # False on a timeout, as the window's wait_idle (pytest-qt's or Qt's TimeoutError)
            self.driver.qtbot.waitUntil(done, timeout=timeout_ms)
        except Exception:  # noqa: BLE001 - an error of done() itself is raised again below
            return done()
        return True

    if kind == "get":
        return property(get, doc=doc)
    made = {"call": call, "text": text, "tab": tab, "until": until}[kind]
    made.__doc__ = doc
    return made


#: The drivers by feature name, as the window's driver offers them (``win.live``, ...).
DRIVERS: dict[str, type[FeatureDriver]] = {}


class FeatureDriver:
    """Base of the drivers: drives feature ``name`` of a :class:`~actviz.testing.WindowDriver`."""

    #: The feature's name: the class's less "Driver", lower case, unless set.
    name = ""
    #: member -> (kind, path on the feature, docstring), made by :func:`_member`.
    members: dict[str, tuple[str, str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = cls.name or cls.__name__.removesuffix("Driver").lower()  # WhatIfDriver: whatif
        DRIVERS[cls.name] = cls
        for member, (kind, path, doc) in cls.members.items():
            setattr(cls, member, _member(kind, path, doc))

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
        """Whether the window has this feature (``actviz_window(features=...)`` may omit it)."""
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
        if not isinstance(dock := self.dock, QDockWidget):
            raise ValueError(f"the {self.name!r} feature has no dock")
        return self.driver.open_dock(dock)


class LiveDriver(FeatureDriver):
    """Live mode (``win.live``): its controller, its dock and its readouts."""

    members = {
        "controller": ("get", "controller", "The live controller (plays sources, frames)."),
        "configure": ("call", "configure", "Set the controller's options; returns it."),
        "wait_idle": ("until", "controller.idle", "Wait until no live frame is in flight."),
        "status_text": ("text", "status_label", 'The live rate in the status bar ("12.0 fps").'),
        "stats_text": ("text", "dock.stats_label", "The dock's statistics line."),
        "message_text": ("text", "dock.message_label", "The dock's message (why a frame failed)."),
        "memory_text": ("text", "dock.memory_label", "The dock's memory line."),
    }

    def wait_frames(self, count: int, timeout_ms: int = JOB_TIMEOUT_MS) -> None:
        """Wait until live mode has shown ``count`` frames in all (``frames_shown``)."""
        live = self.feature.controller
        self.driver.qtbot.waitUntil(lambda: live.frames_shown >= count, timeout=timeout_ms)

    def occlude(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Show the live dock and tick its occlusion patch, as a user does: the input is
        occluded and run as a live frame. Waits for that run and for live mode to be idle;
        returns the result shown."""
        dock = self.show_dock()
        with self.driver.expect_run(timeout_ms):
            dock.occlusion_check.setChecked(True)
        self.wait_idle(timeout_ms)
        return self.driver.window.session.result


class DatasetDriver(FeatureDriver):
    """Dataset scans (``win.dataset``): start a scan, wait for it, read its dock."""

    members = {
        "scans": ("get", "scans", "The scan runner (``scan_finished``, ``scan_failed``, ...)."),
        "scan": ("get", "scan", "The scan shown (None before one)."),
        "start": ("call", "start", "Start scanning a ``ScanSpec``; its job or None."),
        "open_dialog": ("call", "open_dialog", "Open the scan dialog and return it."),
    }

    def in_process(self) -> DatasetDriver:
        """Load images in the GUI process (quick for a few tiny images); returns this driver."""
        self.feature.scans.num_workers = 0
        return self

    def scan_and_wait(self, spec: Any, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Scan ``spec``, wait for ``scan_finished`` and return the finished scan (its
        argument: a saved one comes back ``from_cache``)."""
        with self.driver.qtbot.waitSignal(self.scans.scan_finished, timeout=timeout_ms) as done:
            self.start(spec)
        return done.args[0]


class CompareDriver(FeatureDriver):
    """The Compare tab (``win.compare``): compare with another input, wait, read its view."""

    members = {
        "page": ("get", "page", "The Compare tab's page."),
        "view": ("get", "view", "The CompareView (chart, sources, buttons)."),
        "show_page": ("tab", "page", "Make the Compare tab the current one; returns its page."),
        "wait_diff_panels": ("until", "not painter.pending", "Wait for the diff panels."),
    }

    def compare_with_input(self, source: str, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Compare the result shown with a run on the input ``source`` ("random:1x3x16x16:5",
        a path) and wait for ``compare_finished``; returns the view."""
        return self._compare("compare_with_input", source, timeout_ms)

    def compare_with_pin(self, pin: Any, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Compare the result with ``pin``, wait for ``compare_finished``; returns the view."""
        return self._compare("compare_with_pin", pin, timeout_ms)

    def _compare(self, call: str, what: Any, timeout_ms: int) -> Any:
        feature = self.feature
        with self.driver.qtbot.waitSignal(feature.compare_finished, timeout=timeout_ms):
            assert getattr(feature, call)(what), f"could not compare with {what!r}"
        return feature.view

    def click_compare(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Click the view's Compare button and wait for ``compare_finished``; returns the view."""
        feature = self.feature
        with self.driver.qtbot.waitSignal(feature.compare_finished, timeout=timeout_ms):
            self.driver.qtbot.mouseClick(feature.view.compare_button, Qt.MouseButton.LeftButton)
        return feature.view


class EffectsDriver(FeatureDriver):
    """The "Channels that matter" dock (``win.effects``): open it, wait for the estimates."""

    members = {"view": ("get", "view", "The dock's view (sections per layer, sort and mark).")}

    def open(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Open the dock (estimates are made only then), wait for the estimates; returns them."""
        self.driver.open_dock(self.feature.dock.windowTitle())
        return self.wait_estimates(timeout_ms)

    def wait_estimates(self, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Wait until the estimates of the result shown are made (off the GUI thread) and
        return them (fails when there are none)."""
        feature = self.feature
        self.driver.qtbot.waitUntil(
            lambda: not feature.estimating() and not feature.view.building(), timeout=timeout_ms
        )
        assert feature.effects is not None, "no estimates were made"
        return feature.effects


class WhatIfDriver(FeatureDriver):
    """What-if edits (``win.whatif``): add edits, read the edits dock and the change view."""

    members = {
        "add_edit": ("call", "add_edit", "Add an edit (``ablate([1])``, ...) on a layer."),
        "change_view": ("get", "change_view", "The view of how the edits changed the answer."),
    }

    def rows(self) -> list[Any]:
        """The rows of the edits dock, one an edit, in order."""
        return list(self.feature.dock.rows)

    def error_text(self) -> str:
        """The dock's error line (an edit that could not apply); empty when hidden."""
        label = self.feature.dock.error_label
        return "" if label.isHidden() else label.text()


class TokensDriver(FeatureDriver):
    """Token views (``win.tokens``): the attention page and its panels."""

    members = {
        "show_attention": ("tab", "attention_page", "Show the Attention tab; returns its page."),
        "attention_panel": ("get", "attention_panel", "The attention panel (head maps)."),
        "lens_panel": ("get", "lens_panel", "The logit lens panel."),
        "rollout_panel": ("get", "rollout_panel", "The attention rollout panel."),
    }


class SessionsDriver(FeatureDriver):
    """Session files (``win.sessions``): save and open a session, and wait for it."""

    def save(self, path: Any, *, pin_captures: bool = True) -> None:
        """Save the session to ``path`` and wait until it is written; the question a user gets
        when pins hold captures (a modal box: it waited for good) is answered ``pin_captures``."""
        feature, asked = self.feature, self.feature.ask_pin_captures
        feature.ask_pin_captures = lambda *_: pin_captures
        try:
            saved = feature.save_session(path, wait=True)
        finally:
            feature.ask_pin_captures = asked
        assert saved, f"could not save {path}: {self.driver.banner_messages()}"

    def open(self, path: Any) -> None:
        """Open the session file ``path`` and wait until it is shown."""
        opened = self.feature.open_session(path, wait=True)
        assert opened, f"could not open {path}: {self.driver.banner_messages()}"


class VisualizeDriver(FeatureDriver):
    """What channels want (``win.visualize``): its settings, a page of pictures, waiting."""

    members = {
        "section": ("get", "section", "The settings section in the Channel dock."),
        "page": ("get", "page", "The page of pictures (its dock, its job)."),
        "visualise_page": ("call", "visualise_page", "Start the pictures of a layer's page."),
        "wait_idle": ("until", "not is_busy", "Wait until no picture is made or looked up."),
    }

    def configure(
        self, *, size: int | None = None, steps: int | None = None, objective: str | None = None
    ) -> Any:
        """Set the section's boxes given, as a user types them, in order; returns the section."""
        section = self.section
        if objective is not None:
            section.objective_box.setCurrentText(objective)
        if size is not None:
            section.size_spin.setValue(size)
        if steps is not None:
            section.steps_spin.setValue(steps)
        return section


class AtlasDriver(FeatureDriver):
    """The Atlas tab (``win.atlas``): a scan mapped, its view and selection."""

    members = {
        "fitted": ("get", "fitted", "The signal sent when a scan's map is made."),
        "atlas": ("get", "atlas", "The map shown (None before a scan is mapped)."),
        "view": ("get", "view", "The tab's view (scatter, layer and colour boxes)."),
    }

    def scan_and_map(self, spec: Any, timeout_ms: int = JOB_TIMEOUT_MS) -> Any:
        """Scan ``spec`` (a :class:`~actviz.data.scan.ScanSpec`) and wait until the atlas maps
        it; returns the atlas feature."""
        feature = self.feature
        with self.driver.qtbot.waitSignal(feature.fitted, timeout=timeout_ms):
            self.driver.dataset.start(spec)
        return feature


class ConceptsDriver(FeatureDriver):
    """Concepts (``win.concepts``): the dictionaries attached and the Concept dock."""

    members = {
        "view": ("get", "view", "The Concept dock's view."),
        "open_concept": ("call", "open_concept", "Open a layer's concept, as its tile's click."),
    }

    def open_folder(self, folder: Any, layer: str | None = None) -> bool:
        """Attach the concepts saved in ``folder`` (SAELens layout) to ``layer`` (the one they
        name when None); whether they were attached."""
        return self.feature.open_folder(str(folder), layer)
