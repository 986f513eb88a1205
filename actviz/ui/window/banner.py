"""The message banner under the toolbar: load warnings and run errors, never a modal dialog."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

#: Message sources in the banner, shown in this order.
SOURCES = ("action", "model", "run")


class MessageBanner(QFrame):
    """Warnings and errors under the toolbar; visible until dismissed or replaced.

    Messages are grouped by source ("action": the last thing the user did, "model": load
    warnings, "run": the last run's warnings and errors), so a new run replaces only its own.
    """

    _COLOURS = {"error": ("#f8d7da", "#842029"), "warning": ("#fff3cd", "#664d03")}

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageBanner")
        self._messages: dict[str, list[tuple[str, str]]] = {}
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.setAutoRaise(True)
        # Not connected to clear() directly: clicked(bool) would pass False as the source.
        close.clicked.connect(self._on_close_clicked)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.setVisible(False)

    def set_messages(self, source: str, messages: Sequence[tuple[str, str]]) -> None:
        """Replace the ``(level, text)`` messages of ``source`` ("error" or "warning")."""
        self._messages[source] = list(messages)
        self._refresh()

    def add_message(self, source: str, level: str, text: str) -> None:
        """Append one ``(level, text)`` message to ``source``."""
        self._messages.setdefault(source, []).append((level, text))
        self._refresh()

    def clear(self, source: str | None = None) -> None:
        """Remove the messages of ``source`` (all of them when None)."""
        if source is None:
            self._messages.clear()
        else:
            self._messages.pop(source, None)
        self._refresh()

    def messages(self) -> list[tuple[str, str]]:
        """All ``(level, text)`` shown, in display order."""
        order = [s for s in SOURCES if s in self._messages]
        order += [s for s in self._messages if s not in SOURCES]
        return [m for s in order for m in self._messages[s]]

    def texts(self) -> list[str]:
        """The texts shown, without their levels."""
        return [text for _, text in self.messages()]

    def _on_close_clicked(self) -> None:
        self.clear()

    def _refresh(self) -> None:
        messages = self.messages()
        if not messages:
            self.setVisible(False)
            self.label.clear()
            return
        level = "error" if any(lv == "error" for lv, _ in messages) else "warning"
        bg, fg = self._COLOURS[level]
        self.setStyleSheet(
            f"#messageBanner {{ background: {bg}; border: 1px solid {fg}; border-radius: 3px; }}"
            f" #messageBanner QLabel {{ color: {fg}; }}"
        )
        icons = {"error": "⛔", "warning": "⚠"}
        self.label.setText("\n".join(f"{icons.get(lv, '•')} {text}" for lv, text in messages))
        self.setVisible(True)


__all__ = ["SOURCES", "MessageBanner"]
