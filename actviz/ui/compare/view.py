"""The Compare tab's passive widgets: run B's source, chart, predictions, A - B panels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.compare.chart import SimilarityChart
from actviz.ui.host import refill_combo
from actviz.ui.panels import style
from actviz.ui.panels.feature_map import MIN_PANEL_HEIGHT, LayerPanel
from actviz.ui.panels.prediction import PredictionChangeView
from actviz.workspace.run_request import INPUT, MODEL, PIN

#: The choices of run B, in the source picker's order.
SOURCES = ((PIN, "a pinned result"), (INPUT, "another input"), (MODEL, "another model"))
#: Below this width of the tab the similarity chart goes above the predictions table.
NARROW_TAB_PX = 560
#: Placeholder of the difference area before any comparison.
NO_DIFFERENCES = "Choose run B above and press Compare to see A − B for every layer here."
#: From this width of the difference area's viewport on, the panels go in two columns.
TWO_COLUMNS_PX = 1300


class CompareView(QtWidgets.QWidget):
    """The Compare tab; its signals are its buttons' and its difference panels'."""

    compare_requested = QtCore.Signal()
    page_requested = QtCore.Signal(str, int)
    mosaic_width_changed = QtCore.Signal(str, int)
    channel_clicked = QtCore.Signal(str, int)
    source_changed = QtCore.Signal(str)
    browse_input_requested = QtCore.Signal()
    open_model_requested = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QtWidgets.QVBoxLayout(self, spacing=style.PAGE_MARGIN)
        outer.setContentsMargins(*[style.PAGE_MARGIN] * 4)
        outer.addLayout(self._source_bar())
        # The bar's second half goes under the first when the tab is too narrow.
        self._bar_second = QtWidgets.QHBoxLayout(spacing=6)
        outer.addLayout(self._bar_second)
        self._bar_split, self._busy, self._missing = False, False, ""
        selectable = QtCore.Qt.TextInteractionFlag.TextSelectableByMouse
        self.message_label = QtWidgets.QLabel("", wordWrap=True, textInteractionFlags=selectable)
        outer.addWidget(self.message_label)

        self.chart = SimilarityChart()
        self.predictions = PredictionChangeView(
            "Predictions: A vs B",
            tips=("probability in run A (the latest run)", "probability in run B"),
            caption="Changes are A − B (Δp in percentage points).",
            empty_text="no comparison yet",
        )
        # The pane scrolls rather than holding the splitter open to the table's height.
        predictions_scroll = style.scroll_area(self.predictions, frameless=True, wrap=True)
        predictions_scroll.setMinimumWidth(260)
        self.top_splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.top_splitter.addWidget(self.chart)
        self.top_splitter.addWidget(predictions_scroll)

        self.diffs = DifferenceArea()
        for name in ("page_requested", "mosaic_width_changed", "channel_clicked"):
            getattr(self.diffs, name).connect(getattr(self, name))
        self.splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.splitter.addWidget(self.top_splitter)
        self.splitter.addWidget(self.diffs)
        for s, shares in ((self.splitter, (2, 3)), (self.top_splitter, (3, 2))):
            s.setChildrenCollapsible(False)
            s.setHandleWidth(style.PANEL_SPACING)
            for i, share in enumerate(shares):
                s.setStretchFactor(i, share)
            s.setSizes([1000 * share for share in shares])  # in these shares from the start
        outer.addWidget(self.splitter, 1)

    def _source_bar(self) -> QtWidgets.QHBoxLayout:
        bar = self._bar = QtWidgets.QHBoxLayout(spacing=6)
        self._bar_label = QtWidgets.QLabel("Compare the latest run (A) with")
        bar.addWidget(self._bar_label)
        self.source_combo = QtWidgets.QComboBox()
        for key, text in SOURCES:
            self.source_combo.addItem(text, key)
        self.source_combo.currentIndexChanged.connect(self._on_source_index_changed)
        bar.addWidget(self.source_combo)
        self.source_stack = QtWidgets.QStackedWidget()
        policy = QtWidgets.QSizePolicy.Policy
        self.source_stack.setSizePolicy(policy.Expanding, policy.Fixed)

        self.pin_combo = QtWidgets.QComboBox()
        style.fit_combo(self.pin_combo, 10)
        self.pin_combo.setToolTip("Pin results with Run > Pin this result (Ctrl+P)")
        self.source_stack.addWidget(self._page(self.pin_combo))

        self.input_combo = QtWidgets.QComboBox(editable=True)
        style.fit_combo(self.input_combo, 10)
        self.input_combo.lineEdit().setPlaceholderText("image / tensor file or random:SEED")
        self.input_combo.setToolTip(
            "A sample, a recent input, a file path, or random:1x3x224x224:SEED "
            "(random:SEED alone takes the model's input shape)"
        )
        self.input_combo.lineEdit().returnPressed.connect(self.compare_requested)
        self.browse_button = QtWidgets.QPushButton("Browse…")
        self.browse_button.clicked.connect(self.browse_input_requested)
        self.source_stack.addWidget(self._page(self.input_combo, self.browse_button, stretch=0))

        self.model_label = style.ElidedLabel("no model B opened")
        tip = "Another checkpoint of the same architecture, opened with the Open model dialog"
        self.open_model_button = QtWidgets.QPushButton("Open model B…", toolTip=tip)
        self.open_model_button.clicked.connect(self.open_model_requested)
        self.source_stack.addWidget(self._page(self.open_model_button, self.model_label))
        bar.addWidget(self.source_stack, 1)

        self.compare_button = QtWidgets.QPushButton("Compare", default=True)
        self.compare_button.clicked.connect(self.compare_requested)
        bar.addWidget(self.compare_button)
        return bar

    def event(self, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.ParentChange and self.parentWidget() is not None:
            # In the tab's page the room is the viewport's width.
            self.parentWidget().installEventFilter(self)
        return super().event(event)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if event.type() == QtCore.QEvent.Type.Resize and watched is self.parentWidget():
            self._fit_bar(self.parentWidget().width())
        return super().eventFilter(watched, event)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        parent = self.parentWidget()
        self._fit_bar(parent.width() if parent is not None else event.size().width())

    def _fit_bar(self, width: int) -> None:
        parts = (self._bar_label, self.source_combo, self.source_stack, self.compare_button)
        needed = sum(w.minimumSizeHint().width() for w in parts) + 4 * 6 + 24
        # The chart above the predictions (not beside them) where both would not fit across.
        across = width >= NARROW_TAB_PX
        wanted = QtCore.Qt.Orientation.Horizontal if across else QtCore.Qt.Orientation.Vertical
        if self.top_splitter.orientation() != wanted:
            self.top_splitter.setOrientation(wanted)
        if (split := width < needed) == self._bar_split:
            return
        self._bar_split = split
        source, target = (self._bar, self._bar_second) if split else (self._bar_second, self._bar)
        for widget, stretch in ((self.source_stack, 1), (self.compare_button, 0)):
            source.removeWidget(widget)
            target.addWidget(widget, stretch)
        self.updateGeometry()

    @staticmethod
    def _page(*widgets: QtWidgets.QWidget, stretch: int = -1) -> QtWidgets.QWidget:
        """One row of ``widgets``; widget ``stretch`` (by index) takes the room left."""
        page = QtWidgets.QWidget()
        row = style.bare_box(page, spacing=4)
        stretch %= len(widgets)
        for i, widget in enumerate(widgets):
            row.addWidget(widget, 1 if i == stretch else 0)
        return page

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt name
        # The least height: the page scrolls only when the tab is smaller than the minimum.
        return self.minimumSizeHint().height()

    @property
    def source(self) -> str:
        """The kind of run B chosen."""
        return str(self.source_combo.currentData())

    def set_source(self, key: str) -> None:
        """Choose the kind of run B (emits ``source_changed`` when it changes)."""
        if (index := self.source_combo.findData(key)) >= 0:
            self.source_combo.setCurrentIndex(index)

    def set_pins(self, labels: Sequence[str], current: int | None = None) -> None:
        """List the pinned results (newest last); ``current`` stays chosen."""
        combo = self.pin_combo
        keep = combo.currentIndex() if current is None else current
        keep = keep if 0 <= keep < len(labels) else len(labels) - 1
        refill_combo(combo, list(labels) or ["no pinned result (Ctrl+P pins the one shown)"], keep)
        combo.setEnabled(bool(labels))

    def chosen(self, pins: Sequence[Any]) -> Any:
        """The pin of ``pins`` the pin box chooses (None without pins)."""
        pins = list(pins)
        return pins[min(max(self.pin_combo.currentIndex(), 0), len(pins) - 1)] if pins else None

    def set_input_choices(self, sources: Sequence[str]) -> None:
        """Offer ``sources`` (samples, recent inputs) in the input B box; its text stays."""
        text = self.input_combo.currentText()
        refill_combo(self.input_combo, sources)
        self.input_combo.setEditText(text)

    def set_model_text(self, text: str) -> None:
        """Name the second model (or say none is open)."""
        self.model_label.setText(text)
        self.model_label.setToolTip(text)

    def set_message(self, text: str, *, error: bool = False) -> None:
        """What is compared, or what went wrong (errors in red)."""
        self.message_label.setText(text)
        self.message_label.setStyleSheet(f"color: {style.ERROR_TEXT};" if error else "")
        self.message_label.setProperty("error", error)

    def message(self) -> str:
        """The line under the source bar."""
        return self.message_label.text()

    def is_error(self) -> bool:
        """Whether the line under the source bar is an error."""
        return bool(self.message_label.property("error"))

    def set_busy(self, busy: bool) -> None:
        """While a comparison runs, Compare is disabled."""
        self._busy = busy
        self._fit_button()

    def set_missing(self, text: str) -> None:
        """Compare is off while run A or run B is missing; ``text`` says which (in its tip)."""
        self._missing = text
        self._fit_button()

    def _fit_button(self) -> None:
        self.compare_button.setEnabled(not self._busy and not self._missing)
        self.compare_button.setToolTip(self._missing or "Compare the latest run (A) with run B")

    def clear(self, message: str = "") -> None:
        """Forget the comparison shown."""
        self.chart.clear()
        self.predictions.clear()
        self.diffs.layout_panels([])
        self.set_message(message)

    def _on_source_index_changed(self, index: int) -> None:
        self.source_stack.setCurrentIndex(index)
        self.source_changed.emit(self.source)


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
        centre = QtCore.Qt.AlignmentFlag.AlignCenter
        self.placeholder = QtWidgets.QLabel(NO_DIFFERENCES, wordWrap=True, alignment=centre)
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
        if (panel := self.panels.get(name)) is not None:
            return panel
        panel = DifferencePanel(name)
        for signal in ("page_requested", "mosaic_width_changed", "channel_clicked"):
            getattr(panel, signal).connect(getattr(self, signal))
        panel.set_selected(name == self._selected)
        self.panels[name] = panel
        if (stand_in := self.cells.get(name)) is not None:
            row, column, _, _ = self.grid.getItemPosition(self.grid.indexOf(stand_in))
            self._discard(stand_in)
            self.grid.addWidget(panel, row, column)
            panel.setVisible(True)  # now: a hidden widget takes no room in the layout
            self.cells[name] = panel
            self.panels = {n: self.panels[n] for n in self.cells if n in self.panels}
        return panel

    def reveal(self, name: str) -> None:
        """Select layer ``name``'s difference panel and scroll it into view."""
        self._selected = name
        for panel_name, panel in self.panels.items():
            panel.set_selected(panel_name == name)
        if (cell := self.cells.get(name)) is not None:
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
            if (cell := self.panels.get(name, self.cells.get(name))) is None:
                cell = QtWidgets.QWidget(minimumHeight=MIN_PANEL_HEIGHT)  # a stand-in
            cells[name] = cell
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
            if (widget := grid.itemAt(0).widget()) is not None:
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
        if (panel := self.panels.get(name)) is None:
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
        cells = self.cells.items()
        return [n for n, c in cells if n in names and c.y() < bottom and c.y() + c.height() > top]

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
        if anchor is not None and anchor[0] in self.cells:
            self.verticalScrollBar().setValue(self.cells[anchor[0]].y() - anchor[1])
