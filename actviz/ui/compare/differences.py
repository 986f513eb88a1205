"""The Compare tab's difference area: a panel per layer (A - B), made when first painted."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.feature_map import MIN_PANEL_HEIGHT, LayerPanel

#: Placeholder of the difference area before any comparison.
NO_DIFFERENCES = "Choose run B above and press Compare to see A − B for every layer here."
#: From this width of the difference area's viewport on, the panels go in two columns.
TWO_COLUMNS_PX = 1300


class DifferencePanel(LayerPanel):
    """A layer panel of A - B (activation side) and |A - B| (gradient side)."""

    def __init__(self, name: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(name, parent)
        self.activation_slot.caption.setText("A − B")
        self.gradient_slot.caption.setText("|A − B|")

    def hover_text(self, loc, *, short: bool = False) -> str:  # noqa: ANN001 - private type
        """``ch 3  (x=1, y=2)  A−B 0.120  |A−B| 0.120`` (short: ``ch 3 (1,2) 0.120 |A−B| 0.120``)."""
        text = super().hover_text(loc, short=short)
        if short:
            return text.replace("|g| ", "|A−B| ")
        return text.replace("value ", "A−B ").replace("|grad| ", "|A−B| ")


class DifferenceArea(QtWidgets.QScrollArea):
    """A comparison's difference panels in a scroll area (``scrolled``, ``resized``)."""

    page_requested = QtCore.Signal(str, int)
    mosaic_width_changed = QtCore.Signal(str, int)
    channel_clicked = QtCore.Signal(str, int)
    scrolled = QtCore.Signal()
    resized = QtCore.Signal()

    def __init__(self) -> None:
        super().__init__(widgetResizable=True)
        # As in the Layers tab: widths decide page sizes, so the bar never comes and goes.
        self.setVerticalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        container = QtWidgets.QWidget()
        self.grid = QtWidgets.QGridLayout(container, spacing=style.PANEL_SPACING)
        self.grid.setContentsMargins(*[style.PAGE_MARGIN] * 4)
        self.placeholder = QtWidgets.QLabel(
            NO_DIFFERENCES, wordWrap=True, alignment=QtCore.Qt.AlignmentFlag.AlignCenter
        )
        self.grid.addWidget(self.placeholder, 0, 0)
        self.setWidget(container)
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self.scrolled)
        bar.rangeChanged.connect(self.resized)
        self.viewport().installEventFilter(self)
        # What the grid holds, in depth order: each layer's panel or, until made, a stand-in (an
        # empty widget as tall as an empty panel).
        self.cells: dict[str, QtWidgets.QWidget] = {}
        self._order: list[str] = []
        self._columns_now = 1
        self._selected: str | None = None
        #: The difference panels made, by layer, in depth order (see :meth:`order`).
        self.panels: dict[str, DifferencePanel] = {}

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if event.type() == QtCore.QEvent.Type.Resize and watched is self.viewport():
            if self._order and self.columns() != self._columns_now:
                self._place(self._order)
            self.resized.emit()
        return super().eventFilter(watched, event)

    def order(self) -> list[str]:
        """The comparison's layers, in depth order."""
        return list(self._order)

    def panel(self, name: str) -> DifferencePanel:
        """Layer ``name``'s difference panel, made (and placed) on first use."""
        panel = self.panels.get(name)
        if panel is not None:
            return panel
        panel = DifferencePanel(name)
        panel.page_requested.connect(self.page_requested)
        panel.mosaic_width_changed.connect(self.mosaic_width_changed)
        panel.channel_clicked.connect(self.channel_clicked)
        panel.set_selected(name == self._selected)
        self.panels[name] = panel
        stand_in = self.cells.get(name)
        if stand_in is not None:
            grid = self.grid
            row, column, _, _ = grid.getItemPosition(grid.indexOf(stand_in))
            self._discard(stand_in)
            grid.addWidget(panel, row, column)
            panel.setVisible(True)  # now: a hidden widget takes no room in the layout
            self.cells[name] = panel
            self.panels = {n: self.panels[n] for n in self.cells if n in self.panels}
        return panel

    def reveal(self, name: str) -> None:
        """Select layer ``name``'s difference panel and scroll it into view."""
        self._selected = name
        for panel_name, panel in self.panels.items():
            panel.set_selected(panel_name == name)
        cell = self.cells.get(name)
        if cell is not None:
            self.settle()
            # Its top (title) at the top: a panel is often taller than the area.
            self.verticalScrollBar().setValue(cell.y())

    def layout_panels(self, order: Sequence[str]) -> None:
        """Give exactly the layers of ``order`` a place (the others' panels are deleted)."""
        order = list(order)
        for name in [n for n in self.panels if n not in order]:
            self._discard(self.panels.pop(name))
        cells: dict[str, QtWidgets.QWidget] = {}
        for name in order:
            cell = self.panels.get(name, self.cells.get(name))
            cells[name] = (
                QtWidgets.QWidget(minimumHeight=MIN_PANEL_HEIGHT) if cell is None else cell
            )
        for name, cell in self.cells.items():
            if not isinstance(cell, DifferencePanel) and cells.get(name) is not cell:
                self._discard(cell)
        self.panels = {n: self.panels[n] for n in order if n in self.panels}
        changed = list(cells.items()) != list(self.cells.items())
        self.cells = cells
        if changed or order != self._order or self.columns() != self._columns_now:
            self._place(order)

    def _discard(self, widget: QtWidgets.QWidget) -> None:
        self.grid.removeWidget(widget)
        widget.setParent(None)
        widget.deleteLater()

    def columns(self) -> int:
        return 2 if self.viewport().width() >= TWO_COLUMNS_PX else 1

    def _place(self, order: list[str]) -> None:
        grid = self.grid
        while grid.count():
            widget = grid.itemAt(0).widget()
            if widget is not None:
                # removeWidget, not takeAt: the old layout item would keep a stale height.
                grid.removeWidget(widget)
            else:
                grid.takeAt(0)
        for row in range(grid.rowCount()):
            grid.setRowStretch(row, 0)
        self._order = order
        self._columns_now = columns = self.columns()
        self.placeholder.setVisible(not order)
        if not order:
            grid.addWidget(self.placeholder, 0, 0)
            return
        for i, name in enumerate(order):
            cell = self.cells[name]
            grid.addWidget(cell, i // columns, i % columns)
            cell.setVisible(True)
        # Spare height below the last row, not in stretched rows around the mosaics.
        grid.setRowStretch((len(order) + columns - 1) // columns, 1)

    def blank(self, name: str, title: str = "") -> None:
        """Empty layer ``name``'s panel, if made, keeping its height (the others stay put)."""
        panel = self.panels.get(name)
        if panel is None:
            return
        height = panel.height() if panel.activation_slot.view is not None else 0
        panel.clear()
        panel.set_module_type(title)
        panel.set_minimum_panel_height(max(height, MIN_PANEL_HEIGHT))

    def settle(self) -> None:
        """Lay the area (not the whole app) out now: geometry read next is what will be painted."""
        for _ in range(3):
            self.widget().layout().activate()
            for receiver in (self.widget(), self.viewport(), self):
                QtCore.QCoreApplication.sendPostedEvents(receiver, QtCore.QEvent.Type.LayoutRequest)

    def near_view(self, names: Sequence[str] | set[str], margin: int) -> list[str]:
        """Those of ``names`` whose panels are within ``margin`` pixels of the viewport."""
        self.settle()
        top = self.verticalScrollBar().value() - margin
        bottom = top + self.viewport().height() + 2 * margin
        return [
            name
            for name, cell in self.cells.items()
            if name in names and cell.y() < bottom and cell.y() + cell.height() > top
        ]

    def anchor(self) -> tuple[str, int] | None:
        """The first panel whose bottom is in view and its top's offset, for :meth:`keep_anchor`."""
        value = self.verticalScrollBar().value()
        for name, cell in self.cells.items():
            if cell.y() + cell.height() > value:
                return name, cell.y() - value
        return None

    def keep_anchor(self, anchor: tuple[str, int] | None) -> None:
        """Scroll so that ``anchor`` (from :meth:`anchor`) is where it was."""
        self.settle()
        if anchor is None or anchor[0] not in self.cells:
            return
        name, offset = anchor
        self.verticalScrollBar().setValue(self.cells[name].y() - offset)
