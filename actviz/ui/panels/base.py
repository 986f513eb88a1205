"""Behaviour every panel shares: a framed widget with a title and PNG export."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels.style import SELECTION, bare_box, title_label

logger = logging.getLogger(__name__)

# Size a never-shown panel gets when exported, so a PNG from a headless script is legible.
_EXPORT_FALLBACK_SIZE = QtCore.QSize(480, 320)


class PanelBase(QtWidgets.QFrame):
    """A framed panel with a bold title over ``self.content`` (a QVBoxLayout)."""

    def __init__(self, title: str = "", parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QtWidgets.QFrame.Shape.StyledPanel)
        outer = QtWidgets.QVBoxLayout(self, spacing=2)
        outer.setContentsMargins(6, 4, 6, 4)
        self.title_label = title_label(title)
        #: The title line (a panel may add widgets after its title).
        self.title_row = bare_box(spacing=6)
        self.title_row.addWidget(self.title_label, 1)
        outer.addLayout(self.title_row)
        self.content = bare_box(spacing=2, vertical=True)
        outer.addLayout(self.content, 1)
        self._selected = False

    def set_title(
        self, text: str, fallbacks: Sequence[str] = (), last_resort: str | None = None
    ) -> None:
        """Replace the panel's title line (``fallbacks``: see :meth:`ElidedLabel.set_text`)."""
        self.title_label.set_text(text, fallbacks, last_resort)

    def title(self) -> str:
        """The panel's current title line."""
        return self.title_label.text()

    def set_selected(self, selected: bool) -> None:
        """Draw (or remove) a highlight border (painted: a style sheet re-polishes children)."""
        if bool(selected) != self._selected:
            self._selected = bool(selected)
            self.update()

    def is_selected(self) -> bool:
        """Whether the highlight border is drawn."""
        return self._selected

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        super().paintEvent(event)
        if colour := self._frame_colour():
            painter = QtGui.QPainter(self)
            painter.setPen(QtGui.QPen(QtGui.QColor(colour), 2))
            painter.drawRect(QtCore.QRectF(self.rect()).adjusted(1, 1, -1, -1))

    def _frame_colour(self) -> str | None:
        return SELECTION if self._selected else None

    def clear(self) -> None:  # pragma: no cover - every subclass overrides
        """Forget the data shown and return to the empty state."""
        raise NotImplementedError

    def export_png(self, path: str | Path) -> None:
        """Write the panel as a PNG at ``path`` (unshown: at its size hint), else ``OSError``."""
        path = Path(path)
        if not self.isVisible() and not self.testAttribute(QtCore.Qt.WidgetAttribute.WA_Resized):
            self.resize(self.sizeHint().expandedTo(_EXPORT_FALLBACK_SIZE))
        self.layout().activate()
        pixmap = self.grab()
        if pixmap.isNull() or not pixmap.save(str(path), "PNG"):
            raise OSError(f"could not write PNG to {path}")
        logger.debug(
            "exported %s (%dx%d) to %s", type(self).__name__, *pixmap.size().toTuple(), path
        )
