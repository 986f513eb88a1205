"""Run > Pin this result and Run > Pinned results; the pins live in ``session.pins``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QMenu

from actviz.core.capture import format_bytes
from actviz.workspace.pins import Pin, PinRefused


class PinActions:
    """Pin, show and unpin results in ``window`` (``pinned_shown`` before a pin is shown)."""

    def __init__(self, window: Any) -> None:
        self.session, self.display = window.session, window.display
        self.banner, self.status_label = window.centre.banner, window.status.status_label
        self.show_warning, self.pinned_shown = window.host.show_warning, window.pinned_shown
        actions = window.commands
        self.pins_menu = actions.pins_menu
        #: ``compare_with(pin)``: offered by the Compare feature (the menu then lists it).
        self.compare_with: Callable[[Pin], object] | None = None
        self._compare_menu = QMenu("Compare the latest run with", self.pins_menu)
        self._compare_menu.setToolTipsVisible(True)
        self.unpin_action, self.unpin_all_action = actions.unpin_action, actions.unpin_all_action
        actions.pin_action.triggered.connect(self.pin_result)
        actions.unpin_action.triggered.connect(self.unpin_shown)
        actions.unpin_all_action.triggered.connect(self.unpin_all)
        self.refresh_pins_menu()

    def pin_result(self) -> Pin | None:
        """Keep the result shown now (Ctrl+P); None, with a message, when refused."""
        if (result := self.session.result) is None:
            self.show_warning("Nothing to pin yet: run the model first.", "pins")
            return None
        inp = self.session.input
        source = Path(inp.source).name if inp is not None and inp.source else "input"
        label = f"{time.strftime('%H:%M:%S')} · {source} · {result.target_text}"
        try:
            pin = self.session.pins.pin(result, label, budget=self.session.memory_budget)
        except PinRefused as exc:
            self.show_warning(f"Not pinned: {exc}.", "pins")
            return None
        self.banner.set_messages("pins", [])
        self.status_label.setText(f"Pinned: {pin.label}")
        return pin

    def show_pinned(self, pin: Pin) -> bool:
        """Put ``pin``'s result back on the panels (live mode pauses); False if it is gone."""
        if pin not in list(self.session.pins):
            return False
        self.pinned_shown.emit()
        self.display.apply_result(pin.result)
        self.status_label.setText(f"Showing pinned: {pin.label}")
        return True

    def unpin_shown(self) -> bool:
        """Unpin the result shown now, if it is pinned."""
        if (pin := self.session.pins.find(self.session.result)) is not None:
            self.session.pins.unpin(pin)
        return pin is not None

    def unpin_all(self) -> None:
        """Let every pinned result go."""
        self.session.pins.clear()

    def compare_with_pin(self, pin: Pin) -> bool:
        """Compare the latest run with ``pin``; False when not offered or not started."""
        return self.compare_with is not None and bool(self.compare_with(pin))

    def on_session_pins_changed(self) -> None:
        """The pins changed: refresh the menu and the memory held."""
        self.refresh_pins_menu()
        self.display.refresh_held_text()

    def refresh_pins_menu(self) -> None:
        """Rebuild "Pinned results": one entry per pin, then Unpin this / Unpin all."""
        menu = self.pins_menu
        # Its actions hold the pins: cleared now, so an unpinned capture is freed at once.
        self._compare_menu.clear()
        menu.clear()
        pins = list(self.session.pins)
        for pin in pins:
            label = f"{pin.label} ({format_bytes(pin.nbytes)})"
            menu.addAction(label, lambda p=pin: self.show_pinned(p))
        if pins and self.compare_with is not None:
            menu.addSeparator()
            sub = self._compare_menu
            menu.addMenu(sub)
            for pin in pins:
                act = sub.addAction(pin.label, lambda p=pin: self.compare_with_pin(p))
                act.setToolTip("Layer by layer, in the Compare tab")
        if pins:
            menu.addSeparator()
        menu.addActions([self.unpin_action, self.unpin_all_action])
        self.unpin_all_action.setEnabled(bool(pins))
        self.unpin_action.setEnabled(self.session.pins.find(self.session.result) is not None)
        menu.setTitle(f"Pinned results ({len(pins)})" if pins else "Pinned results")
