"""The window's pinned results: Run > Pin this result (Ctrl+P), Run > Pinned results.

A mixin of :class:`~actviz.ui.main_window.MainWindow`; the pins themselves live in
``session.pins`` (:mod:`actviz.ui.pins`).
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtGui import QAction

from actviz.core.capture import format_bytes
from actviz.ui.pins import Pin, PinRefused


class PinActions:
    """Pin, show and unpin results (a mixin of the main window).

    It relies on the window's ``session``, ``pin_action``, ``pins_menu`` (built by
    :mod:`actviz.ui.window_actions`), ``show_warning``, ``_apply_result`` and
    ``_refresh_held_text``.
    """

    def pin_result(self) -> Pin | None:
        """Keep the result shown now (Ctrl+P); None, with a message, when there is none or
        the pins would exceed the memory budget."""
        result = self.session.result
        if result is None:
            self.show_warning("Nothing to pin yet: run the model first.", source="pins")
            return None
        try:
            pin = self.session.pins.pin(
                result, self._pin_label(result), budget=self.session.memory_budget
            )
        except PinRefused as exc:
            self.show_warning(f"Not pinned: {exc}.", source="pins")
            return None
        self.banner.set_messages("pins", [])
        self.status_label.setText(f"Pinned: {pin.label}")
        return pin

    def show_pinned(self, pin: Pin) -> bool:
        """Put ``pin``'s result back on the panels (live mode pauses); False if it is gone."""
        if pin not in list(self.session.pins):
            return False
        self.pinned_shown.emit()
        self._apply_result(pin.result)
        self.status_label.setText(f"Showing pinned: {pin.label}")
        return True

    def unpin_shown(self) -> bool:
        """Unpin the result shown now, if it is pinned."""
        pin = self.session.pins.find(self.session.result)
        if pin is None:
            return False
        self.session.pins.unpin(pin)
        return True

    def unpin_all(self) -> None:
        self.session.pins.clear()

    # ------------------------------------------------------------------ helpers
    def _pin_label(self, result) -> str:
        inp = self.session.input
        source = Path(inp.source).name if inp is not None and inp.source else "input"
        return f"{time.strftime('%H:%M:%S')} · {source} · {result.target_text}"

    def _on_session_pins_changed(self) -> None:
        self._refresh_pins_menu()
        self._refresh_held_text()

    def _refresh_pins_menu(self) -> None:
        menu = self.pins_menu
        menu.clear()
        pins = list(self.session.pins)
        for pin in pins:
            act = QAction(f"{pin.label} ({format_bytes(pin.nbytes)})", menu)
            act.triggered.connect(lambda _=False, p=pin: self.show_pinned(p))
            menu.addAction(act)
        if pins:
            menu.addSeparator()
        menu.addAction(self.unpin_action)
        menu.addAction(self.unpin_all_action)
        self.unpin_all_action.setEnabled(bool(pins))
        self.unpin_action.setEnabled(self.session.pins.find(self.session.result) is not None)
        menu.setTitle(f"Pinned results ({len(pins)})" if pins else "Pinned results")


__all__ = ["PinActions"]
