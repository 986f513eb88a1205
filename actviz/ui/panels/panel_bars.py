"""The small bars of a layer panel: the page buttons under its mosaic and the "edited" badge."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style

if TYPE_CHECKING:  # the panels never import torch at run time
    from actviz.display.mosaic import Mosaic

#: The "edited: ..." badge is shortened with "…" past this width (its tooltip has it all).
EDIT_BADGE_MAX_PX = 260


class BadgeLabel(QtWidgets.QLabel):
    """The "edited: ..." badge, shortened with "…" so a long edit never widens its panel."""

    def __init__(self) -> None:
        super().__init__()
        self._full = ""

    @classmethod
    def edited(cls) -> BadgeLabel:
        """The "edited: ablate ch 3" badge of an edited layer (hidden until it has a text)."""
        badge = cls()
        badge.setStyleSheet(style.EDITED_BADGE)
        badge.setVisible(False)
        return badge

    def show_edit(self, text: str) -> None:
        """Say which edit the layer has ("" hides the badge)."""
        self._full = f"edited: {text}" if text else ""
        self.updateGeometry()
        self._elide()
        self.setToolTip(text)
        self.setVisible(bool(text))

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        hint = super().sizeHint()
        width = self.fontMetrics().horizontalAdvance(self._full) + 12
        return QtCore.QSize(min(width, EDIT_BADGE_MAX_PX), hint.height())

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(min(60, self.sizeHint().width()), super().minimumSizeHint().height())

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        room = max(1, self.contentsRect().width() - 8)  # the style sheet's side padding
        shown = self.fontMetrics().elidedText(self._full, QtCore.Qt.TextElideMode.ElideRight, room)
        if shown != self.text():
            self.setText(shown)


class PageBar(QtWidgets.QWidget):
    """Previous / next page of a mosaic's channels and where the page is (hidden on one page)."""

    #: -1 (previous page) or +1 (next page).
    requested = QtCore.Signal(int)

    def __init__(self) -> None:
        super().__init__()
        layout = style.bare_box(self, spacing=2)
        arrow = QtCore.Qt.ArrowType
        self.prev_button = style.tool_button(
            arrow.LeftArrow, "Previous channels", lambda: self.requested.emit(-1), raised=False
        )
        self.label = style.caption_label()
        self.next_button = style.tool_button(
            arrow.RightArrow, "Next channels", lambda: self.requested.emit(1), raised=False
        )
        for widget in (self.prev_button, self.label, self.next_button):
            layout.addWidget(widget)
        self.setVisible(False)

    def text(self) -> str:
        """Where the page is, e.g. ``ch 256-511 of 2048`` ("" when every channel is shown)."""
        return self.label.text() if not self.isHidden() else ""

    def set_buttons_hidden(self, hidden: bool) -> None:
        """No page turns (tiles that are not channels)."""
        self.prev_button.setHidden(hidden)
        self.next_button.setHidden(hidden)

    def show_page(self, mosaic: Mosaic | None) -> None:
        """Say which page of its channels ``mosaic`` shows (None: no mosaic, no bar)."""
        if mosaic is not None and mosaic.order is not None:
            # Tiles in an order of their own: the bar says so (even on one page), with ranks.
            start, total = mosaic.position, len(mosaic.order.channels)
            end = start + mosaic.channels
            self.label.setText(f"{mosaic.order.label}: {start + 1}-{end} of {total}")
            self.label.setToolTip(
                f"Tiles in order {mosaic.order.label} (ranks {start + 1}-{end}); each tile "
                "is labelled with its channel"
            )
            self.prev_button.setEnabled(start > 0)
            self.next_button.setEnabled(end < total)
            self.setVisible(True)
            return
        if self.label.toolTip():  # (each setToolTip sends an event, same text or not)
            self.label.setToolTip("")
        # Only layers with more channels than one mosaic holds get the page bar.
        if mosaic is None or mosaic.channels >= mosaic.total_channels:
            self.setVisible(False)
            return
        first, last, total = mosaic.first_channel, mosaic.last_channel, mosaic.total_channels
        self.label.setText(f"ch {first}-{last} of {total}")
        self.prev_button.setEnabled(first > 0)
        self.next_button.setEnabled(last + 1 < total)
        self.setVisible(True)


class DifferenceToggle(QtWidgets.QToolButton):
    """The title line's "difference" toggle (edited minus unedited), hidden without edits."""

    def __init__(self, height: int) -> None:
        super().__init__()
        self.setText("difference")
        self.setCheckable(True)
        self.setAutoRaise(True)
        self.setToolTip(
            "Show the edited activation minus the unedited one (diverging colours, 0 white)"
        )
        self.setVisible(False)
        # No taller than the title: showing it must not change the panel's height.
        self.setFixedHeight(height)

    def offer(self, available: bool, tooltip: str = "") -> None:
        """Show the toggle (a run with an unedited twin), or greyed out."""
        self.setVisible(True)
        self.setEnabled(available)
        if tooltip:
            self.setToolTip(tooltip)

    def withdraw(self) -> None:
        """No difference to offer (no edits at all): hidden, unchecked, without a signal."""
        if self.isHidden() and not self.isChecked():
            return  # withdrawn already (every live frame without edits asks again)
        with QtCore.QSignalBlocker(self):
            self.setChecked(False)
        self.setVisible(False)

    def wanted(self) -> bool:
        """Whether the user asked for the difference view."""
        return self.isChecked() and not self.isHidden()
