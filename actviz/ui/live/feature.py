"""Live mode as a window feature: the controller, its "Live" dock, menu and status label.

The dock comes up when live mode is used. Closing it pauses and drops the perturbations (they
must not act unseen), as does another model (they were set on the old input)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.live.dock import LiveControls, show_dock
from actviz.ui.live.playback import LiveController
from actviz.ui.panels.style import ElidedLabel, scroll_area

#: Width of the Live dock when it first opens: the layer panels are what the window is for.
DOCK_WIDTH = 300


class LiveMode(FeatureBase):
    """Live mode in a window; ``kwargs`` go to :class:`LiveController`."""

    name = "live"

    def __init__(self, host: WindowHost, **kwargs: Any) -> None:
        self.host = host
        self.controller = LiveController(host, parent=host.dialog_parent(), **kwargs)
        host.offer_run_override(lambda: self.controller.engaged)
        self.dock = LiveControls(self.controller, host.dialog_parent())
        # Scrolls rather than making the window taller than a laptop screen.
        self.dock.setWidget(scroll_area(self.dock.widget(), frameless=True))
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=DOCK_WIDTH)
        self.controller.source_changed.connect(lambda text: text and show_dock(self.dock))
        self.controller.playing_changed.connect(lambda on: on and show_dock(self.dock))
        self.dock.play_action.triggered.connect(lambda: show_dock(self.dock))
        # Playback from the keyboard (window shortcuts) and from a Live menu.
        d = self.dock
        for action in (d.play_action, d.back_action, d.next_action, d.reset_action):
            host.add_menu_action("Live", action)
        host.menu("Live").addSeparator()
        host.add_menu_action("Live", self.dock.toggleViewAction(), shortcut=False)
        self.dock.toggleViewAction().toggled.connect(self._on_dock_toggled)
        self.listen(host.session.model_changed, self._on_session_model_changed)
        # Its rate changes a few times a second: repainted alone, the status bar not relaid out.
        self.status_label = ElidedLabel(grow=True)
        self.status_label.setObjectName("liveStatusLabel")
        host.add_status_widget(self.status_label)
        self.controller.status_changed.connect(self._on_status_changed)

    def configure(self, **kwargs: Any) -> LiveController:
        """Set controller options (``max_fps``, ``memory_budget``, ``capture_threads``)."""
        for key, value in kwargs.items():
            if (setter := getattr(self.controller, f"set_{key}", None)) is not None:
                setter(value)
            elif key == "capture_threads":
                self.controller.capture_threads = value
            else:
                raise TypeError(f"live mode has no option {key!r}")
        return self.controller

    def _on_status_changed(self, st: Any) -> None:
        # Only while live frames replace runs: "live paused" would say it is still on.
        on = st.frames and (self.controller.engaged or self.controller.playing)
        self.status_label.setText(f"live {st.state_text()}" if on else "")

    def switch_off(self) -> None:
        """The dock closed: stop playing, drop the perturbations and the model's copy."""
        c = self.controller
        c.pause()
        c.lanes.drop()  # the second lane's model copy (playing again makes a new one)
        c.emit_status()
        if not c.perturbation.is_identity():
            self.dock.reset_perturbation()
        if not c.engaged:
            self.status_label.setText("")

    def _on_dock_toggled(self, shown: bool) -> None:
        if not shown and not self.host.is_closed():
            self.switch_off()

    def _on_session_model_changed(self) -> None:
        if not self.controller.perturbation.is_identity():
            self.dock.reset_perturbation()

    def stop(self) -> None:
        self.controller.shutdown()
