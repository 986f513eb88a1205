"""The message banner under the toolbar: load warnings and run errors, never a modal dialog."""

from __future__ import annotations

import re
from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QSizePolicy,
    QStyle,
    QToolButton,
    QWidget,
)

from actviz.ui.panels import style

#: Message sources in the banner, shown in this order.
SOURCES = ("action", "model", "run")
#: Side of the level icon, in pixels.
ICON_PX = 16
#: Runs of 24 characters or more without a space (paths, URLs) get break opportunities.
_LONG_RUN = re.compile(r"[^ \n]{24,}")
# After a path separator, a dot, a comma or an underscore inside such a run.
_BREAK_AFTER = re.compile(r"([/\\._,:=&?-])")
_ZERO_WIDTH_SPACE = "\u200b"
_SP = QStyle.StandardPixmap


def breakable(text: str) -> str:
    """``text`` with zero-width breaks in long runs, so a long path cannot widen a wrapped label."""
    soften = lambda run: _BREAK_AFTER.sub(r"\1" + _ZERO_WIDTH_SPACE, run.group())  # noqa: E731
    return _LONG_RUN.sub(soften, text)


class MessageBanner(QFrame):
    """Warnings and errors under the toolbar until dismissed or replaced, grouped by source
    ("action", "model", "run") so a new run replaces only its own."""

    #: Each level's background, text colour and the style's icon (a glyph like "⛔" needs a
    #: font that may lack it).
    _LOOKS = {
        "error": (style.ROW_BAD_BACKGROUND, style.ERROR_TEXT, _SP.SP_MessageBoxCritical),
        "warning": ("#fff3cd", "#664d03", _SP.SP_MessageBoxWarning),
        "info": ("#e8f0fe", "#174ea6", _SP.SP_MessageBoxInformation),
    }

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageBanner")
        self._messages: dict[str, list[tuple[str, str]]] = {}
        #: The technical details of a source's messages (a traceback), behind "Details".
        self._details: dict[str, str] = {}
        #: The level whose icon is shown ("" while hidden).
        self.level = ""
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 4, 4, 4)
        layout.setSpacing(6)
        self.icon_label = QLabel()
        self.icon_label.setFixedSize(ICON_PX, ICON_PX)
        layout.addWidget(self.icon_label, 0, Qt.AlignmentFlag.AlignTop)
        self.label = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Ignored: the label's minimum width (its longest word) must not set the window's.
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.label.setSizePolicy(policy)
        layout.addWidget(self.label, 1)
        # The message is one readable sentence; the traceback is one click away, not in it.
        tip = "The technical details (traceback) of this message"
        self.details_button = QToolButton(
            autoRaise=True, text="Details", toolTip=tip, visible=False
        )
        self.details_button.clicked.connect(self.show_details)
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        self.close_button = close = QToolButton(autoRaise=True, toolTip="Dismiss")
        close.setIcon(close.style().standardIcon(QStyle.StandardPixmap.SP_TitleBarCloseButton))
        close.setIconSize(QSize(12, 12))
        # Not connected to clear() directly: clicked(bool) would pass False as the source.
        close.clicked.connect(lambda _=False: self.clear())
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.setVisible(False)

    def set_messages(
        self, source: str, messages: Sequence[tuple[str, str]], *, details: str = ""
    ) -> None:
        """Replace the ``(level, text)`` messages of ``source`` ("error", "warning" or
        "info"); ``details`` (a traceback) is shown by the Details button."""
        messages = list(messages)
        if self._messages.get(source, []) == messages and self._details.get(source, "") == details:
            return  # as shown (every live frame sets its run's messages again)
        self._messages[source], self._details[source] = messages, details
        self._refresh()

    def details(self) -> str:
        """The details of the messages shown (tracebacks), "" when there are none."""
        return "\n\n".join(d for s, d in self._details.items() if d and self._messages.get(s))

    def show_details(self) -> QMessageBox:
        """Open the details in a window-modal box (not blocking)."""
        box = QMessageBox(self.window(), icon=QMessageBox.Icon.Information)
        box.setWindowTitle("Details — actviz")
        box.setText("\n".join(self.texts()))
        box.setDetailedText(self.details())
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        return box

    def clear(self, source: str | None = None) -> None:
        """Remove the messages of ``source`` (all of them when None)."""
        for kept in (self._messages, self._details):
            kept.clear() if source is None else kept.pop(source, None)
        self._refresh()

    def messages(self) -> list[tuple[str, str]]:
        """All ``(level, text)`` shown, in order; a text two sources say shows once."""
        order = [s for s in SOURCES if s in self._messages]
        order += [s for s in self._messages if s not in SOURCES]
        first: dict[str, str] = {}  # text: level, the first source's
        for s in order:
            for level, text in self._messages[s]:
                first.setdefault(text, level)
        return [(level, text) for text, level in first.items()]

    def texts(self) -> list[str]:
        """The texts shown, without their levels."""
        return [text for _, text in self.messages()]

    def _refresh(self) -> None:
        messages = self.messages()
        levels = {lv for lv, _ in messages}
        level = "error" if "error" in levels else "warning" if levels - {"info"} else "info"
        level = level if messages else ""  # hidden
        self.details_button.setVisible(bool(self.details()))
        if level and level != self.level:
            bg, fg, icon = self._LOOKS[level]
            self.setStyleSheet(
                f"#messageBanner {{ background: {bg}; border: 1px solid {fg}; "
                f"border-radius: 3px; }} #messageBanner QLabel {{ color: {fg}; }}"
            )
            self.icon_label.setPixmap(self.style().standardIcon(icon).pixmap(ICON_PX, ICON_PX))
        self.level = level
        mixed = len(levels) > 1
        names = {"error": "Error", "warning": "Warning", "info": "Note"}
        lines = [
            f"{names.get(lv, lv.capitalize())}: {text}" if mixed else text for lv, text in messages
        ]
        if len(lines) > 1 and not mixed:
            lines = [f"• {line}" for line in lines]
        full = "\n".join(lines)
        self.label.setText(breakable(full))
        self.label.setToolTip(full if len(full) > 200 else "")
        self.setVisible(bool(messages))
