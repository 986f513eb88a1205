"""CompareView: the Compare tab's widgets (passive: the controller fills them).

Top: where run B comes from (a pinned result, another input, another model) and the Compare
button, then a line saying what is compared or what went wrong. Below, in splitters the user
can drag: the similarity-by-depth chart beside both predictions, and the difference mosaics
(A - B) per layer, painted by the same :class:`~actviz.ui.panels.feature_map.LayerPanel` as
the Layers tab.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.compare.chart import SimilarityChart
from actviz.ui.panels import style
from actviz.ui.panels.feature_map import MIN_PANEL_HEIGHT, LayerPanel
from actviz.ui.panels.prediction_change import PredictionChangeView
from actviz.workspace.compare_job import INPUT, MODEL, PIN

#: The choices of run B, in the source picker's order.
SOURCES = ((PIN, "a pinned result"), (INPUT, "another input"), (MODEL, "another model"))
#: Placeholder of the difference area before any comparison.
NO_DIFFERENCES = "Choose run B above and press Compare to see A − B for every layer here."
ERROR_COLOUR = style.ERROR_TEXT


class DifferencePanel(LayerPanel):
    """A layer panel of a difference: A - B where the activation goes, |A - B| where the
    gradient magnitude goes, and read-outs that say so."""

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


class _StandIn(QtWidgets.QWidget):
    """Where the difference panel of a layer not yet painted goes: as tall as an empty
    panel, with nothing in it (a panel is made when it comes near the view)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.setMinimumHeight(MIN_PANEL_HEIGHT)


#: Below this width of the tab the similarity chart goes above the predictions table.
NARROW_TAB_PX = 560
#: From this width of the difference area's viewport on, the panels go in two columns.
TWO_COLUMNS_PX = 1300


class CompareView(QtWidgets.QWidget):
    """The Compare tab.

    Signals
    -------
    compare_requested()
        Compare was pressed.
    source_changed(str)
        Another kind of run B was chosen (:data:`~actviz.workspace.compare_job.PIN`, ...).
    browse_input_requested()
        "Browse…" beside the input B.
    open_model_requested()
        "Open model B…".
    page_requested(str, int), mosaic_width_changed(str, int), channel_clicked(str, int)
        A difference panel's (see :class:`~actviz.ui.panels.feature_map.LayerPanel`).
    diff_scrolled()
        The difference area scrolled: other panels may have come into view.
    diff_resized()
        The difference area's viewport or its scroll range changed size.
    """

    compare_requested = QtCore.Signal()
    page_requested = QtCore.Signal(str, int)
    mosaic_width_changed = QtCore.Signal(str, int)
    channel_clicked = QtCore.Signal(str, int)
    source_changed = QtCore.Signal(str)
    browse_input_requested = QtCore.Signal()
    open_model_requested = QtCore.Signal()
    diff_scrolled = QtCore.Signal()
    diff_resized = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(*[style.PAGE_MARGIN] * 4)
        outer.setSpacing(style.PAGE_MARGIN)
        outer.addLayout(self._source_bar())
        # The bar's second half (the source's own row and Compare) goes under the first when
        # the tab is too narrow for one line (docks open on a small screen).
        self._bar_second = QtWidgets.QHBoxLayout()
        self._bar_second.setSpacing(6)
        outer.addLayout(self._bar_second)
        self._bar_split = False
        self.message_label = QtWidgets.QLabel("")
        self.message_label.setWordWrap(True)
        self.message_label.setTextInteractionFlags(
            QtCore.Qt.TextInteractionFlag.TextSelectableByMouse
        )
        outer.addWidget(self.message_label)

        self.chart = SimilarityChart()
        self.predictions = PredictionChangeView(
            "Predictions: A vs B",
            tips=("probability in run A (the latest run)", "probability in run B"),
            caption="Changes are A − B (Δp in percentage points).",
            empty_text="no comparison yet",
        )
        # The table is as tall as its rows (up to both top-5s and the target): the pane
        # scrolls rather than holding the splitter open to that height.
        predictions_scroll = QtWidgets.QScrollArea()
        predictions_scroll.setWidgetResizable(True)
        predictions_scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        predictions_scroll.setHorizontalScrollBarPolicy(
            QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )
        predictions_scroll.setMinimumWidth(260)
        predictions_scroll.setWidget(self.predictions)
        self.top_splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.top_splitter.addWidget(self.chart)
        self.top_splitter.addWidget(predictions_scroll)
        self.top_splitter.setStretchFactor(0, 3)
        self.top_splitter.setStretchFactor(1, 2)
        self.top_splitter.setSizes([3000, 2000])

        self.diff_scroll = QtWidgets.QScrollArea()
        self.diff_scroll.setWidgetResizable(True)
        # As in the Layers tab: widths decide page sizes, so the bar never comes and goes.
        self.diff_scroll.setVerticalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        container = QtWidgets.QWidget()
        self.diff_grid = QtWidgets.QGridLayout(container)
        self.diff_grid.setContentsMargins(*[style.PAGE_MARGIN] * 4)
        self.diff_grid.setSpacing(style.PANEL_SPACING)
        self.diff_placeholder = QtWidgets.QLabel(NO_DIFFERENCES)
        self.diff_placeholder.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.diff_placeholder.setWordWrap(True)
        self.diff_grid.addWidget(self.diff_placeholder, 0, 0)
        self.diff_scroll.setWidget(container)
        bar = self.diff_scroll.verticalScrollBar()
        bar.valueChanged.connect(self.diff_scrolled)
        bar.rangeChanged.connect(self.diff_resized)
        self.diff_scroll.viewport().installEventFilter(self)
        # What the grid holds, in depth order: each layer's panel or, until it is made, its
        # stand-in (making every panel of a deep model at once blocked the GUI thread).
        self._diff_cells: dict[str, QtWidgets.QWidget] = {}
        self._diff_order: list[str] = []
        self._diff_columns = 1
        self._selected_diff: str | None = None

        self.splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.splitter.addWidget(self.top_splitter)
        self.splitter.addWidget(self.diff_scroll)
        for s in (self.splitter, self.top_splitter):
            s.setChildrenCollapsible(False)
            s.setHandleWidth(style.PANEL_SPACING)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setSizes([2000, 3000])
        outer.addWidget(self.splitter, 1)
        #: The difference panels made, by layer, in depth order (see :meth:`diff_order`).
        self.diff_panels: dict[str, DifferencePanel] = {}

    def _source_bar(self) -> QtWidgets.QHBoxLayout:
        bar = QtWidgets.QHBoxLayout()
        self._bar = bar
        bar.setSpacing(6)
        self._bar_label = QtWidgets.QLabel("Compare the latest run (A) with")
        bar.addWidget(self._bar_label)
        self.source_combo = QtWidgets.QComboBox()
        for key, text in SOURCES:
            self.source_combo.addItem(text, key)
        self.source_combo.currentIndexChanged.connect(self._on_source_index_changed)
        bar.addWidget(self.source_combo)
        self.source_stack = QtWidgets.QStackedWidget()
        self.source_stack.setSizePolicy(
            QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Fixed
        )

        self.pin_combo = QtWidgets.QComboBox()
        self.pin_combo.setSizeAdjustPolicy(
            QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.pin_combo.setMinimumContentsLength(10)
        self.pin_combo.setToolTip("Pin results with Run > Pin this result (Ctrl+P)")
        self.source_stack.addWidget(self._page(self.pin_combo))

        self.input_combo = QtWidgets.QComboBox()
        self.input_combo.setEditable(True)
        self.input_combo.setMinimumContentsLength(10)
        self.input_combo.setSizeAdjustPolicy(
            QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.input_combo.lineEdit().setPlaceholderText("image / tensor file or random:SEED")
        self.input_combo.setToolTip(
            "A sample, a recent input, a file path, or random:1x3x224x224:SEED "
            "(random:SEED alone takes the model's input shape)"
        )
        self.input_combo.lineEdit().returnPressed.connect(self.compare_requested)
        self.browse_button = QtWidgets.QPushButton("Browse…")
        self.browse_button.clicked.connect(self.browse_input_requested)
        self.source_stack.addWidget(self._page(self.input_combo, self.browse_button, stretch=0))

        self.model_label = style.ElidedLabel()
        self.model_label.setText("no model B opened")
        self.open_model_button = QtWidgets.QPushButton("Open model B…")
        self.open_model_button.setToolTip(
            "Another checkpoint of the same architecture, opened with the Open model dialog"
        )
        self.open_model_button.clicked.connect(self.open_model_requested)
        self.source_stack.addWidget(self._page(self.open_model_button, self.model_label))
        bar.addWidget(self.source_stack, 1)

        self.compare_button = QtWidgets.QPushButton("Compare")
        self.compare_button.setDefault(True)
        self.compare_button.clicked.connect(self.compare_requested)
        bar.addWidget(self.compare_button)
        return bar

    def event(self, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.ParentChange and self.parentWidget() is not None:
            # In the tab's page the view is never narrower than its minimum, so the room
            # there is the viewport's width: the bar follows the viewport.
            self.parentWidget().installEventFilter(self)
        return super().event(event)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if event.type() == QtCore.QEvent.Type.Resize:
            if watched is self.parentWidget():
                self._fit_bar(self.parentWidget().width())
            elif watched is self.diff_scroll.viewport():
                if self._diff_order and self._columns() != self._diff_columns:
                    self._place_diff_panels(self._diff_order)
                self.diff_resized.emit()
        return super().eventFilter(watched, event)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        parent = self.parentWidget()
        self._fit_bar(parent.width() if parent is not None else event.size().width())

    def _fit_bar(self, width: int) -> None:
        needed = (
            self._bar_label.minimumSizeHint().width()
            + self.source_combo.minimumSizeHint().width()
            + self.source_stack.minimumSizeHint().width()
            + self.compare_button.minimumSizeHint().width()
            + 4 * 6
            + 24
        )
        # The chart above the predictions (not beside them) where both would not fit across.
        across = width >= NARROW_TAB_PX
        wanted = QtCore.Qt.Orientation.Horizontal if across else QtCore.Qt.Orientation.Vertical
        if self.top_splitter.orientation() != wanted:
            self.top_splitter.setOrientation(wanted)
        split = width < needed
        if split == self._bar_split:
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
        row = QtWidgets.QHBoxLayout(page)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        stretch %= len(widgets)
        for i, widget in enumerate(widgets):
            row.addWidget(widget, 1 if i == stretch else 0)
        return page

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt name
        # The page (a scroll area) asks this of a layout with a wrapped label: answer the
        # least height, so the page scrolls only when the tab is smaller than the minimum
        # rather than whenever the preferred height does not fit.
        return self.minimumSizeHint().height()

    # ------------------------------------------------------------------ setters
    @property
    def source(self) -> str:
        """The kind of run B chosen."""
        return str(self.source_combo.currentData())

    def set_source(self, key: str) -> None:
        """Choose the kind of run B (emits ``source_changed`` when it changes)."""
        index = self.source_combo.findData(key)
        if index >= 0:
            self.source_combo.setCurrentIndex(index)

    def set_pins(self, labels: Sequence[str], current: int | None = None) -> None:
        """List the pinned results (newest last); ``current`` stays chosen."""
        combo = self.pin_combo
        keep = combo.currentIndex() if current is None else current
        combo.blockSignals(True)
        combo.clear()
        if labels:
            combo.addItems(list(labels))
            combo.setCurrentIndex(keep if 0 <= keep < len(labels) else len(labels) - 1)
            combo.setEnabled(True)
        else:
            combo.addItem("no pinned result (Ctrl+P pins the one shown)")
            combo.setEnabled(False)
        combo.blockSignals(False)

    def set_input_choices(self, sources: Sequence[str]) -> None:
        """Offer ``sources`` (samples, recent inputs) in the input B box; its text stays."""
        text = self.input_combo.currentText()
        self.input_combo.clear()
        self.input_combo.addItems(list(sources))
        self.input_combo.setEditText(text)

    def set_model_text(self, text: str) -> None:
        """Name the second model (or say none is open)."""
        self.model_label.setText(text)
        self.model_label.setToolTip(text)

    def set_message(self, text: str, *, error: bool = False) -> None:
        """What is compared, or what went wrong (errors in red)."""
        self.message_label.setText(text)
        self.message_label.setStyleSheet(f"color: {ERROR_COLOUR};" if error else "")
        self.message_label.setProperty("error", error)

    def message(self) -> str:
        """The line under the source bar."""
        return self.message_label.text()

    def is_error(self) -> bool:
        """Whether the line under the source bar is an error."""
        return bool(self.message_label.property("error"))

    def set_busy(self, busy: bool) -> None:
        """While a comparison runs, Compare is disabled."""
        self.compare_button.setEnabled(not busy)

    def diff_order(self) -> list[str]:
        """The layers of the comparison shown, in depth order: a panel each (made when it
        is first painted, see :meth:`diff_panel`)."""
        return list(self._diff_order)

    def diff_panel(self, name: str) -> DifferencePanel:
        """The difference panel of layer ``name``, made on first use (in its place in the
        grid when the layer is one of :meth:`diff_order`)."""
        panel = self.diff_panels.get(name)
        if panel is not None:
            return panel
        panel = DifferencePanel(name)
        panel.page_requested.connect(self.page_requested)
        panel.mosaic_width_changed.connect(self.mosaic_width_changed)
        panel.channel_clicked.connect(self.channel_clicked)
        panel.set_selected(name == self._selected_diff)
        self.diff_panels[name] = panel
        stand_in = self._diff_cells.get(name)
        if stand_in is not None:
            grid = self.diff_grid
            row, column, _, _ = grid.getItemPosition(grid.indexOf(stand_in))
            grid.removeWidget(stand_in)
            stand_in.setParent(None)
            stand_in.deleteLater()
            grid.addWidget(panel, row, column)
            panel.setVisible(True)  # now: a hidden widget takes no room in the layout
            self._diff_cells[name] = panel
            self.diff_panels = {
                n: self.diff_panels[n] for n in self._diff_cells if n in self.diff_panels
            }
        return panel

    def reveal_diff_panel(self, name: str) -> None:
        """Select layer ``name``'s difference panel and scroll it into view."""
        self._selected_diff = name
        for panel_name, panel in self.diff_panels.items():
            panel.set_selected(panel_name == name)
        cell = self._diff_cells.get(name)
        if cell is not None:
            self.settle_diff_layout()
            # Its top (title) at the top: a panel is often taller than the area.
            self.diff_scroll.verticalScrollBar().setValue(cell.y())

    def layout_diff_panels(self, order: Sequence[str]) -> None:
        """Give exactly the layers of ``order`` a place (one column, two on a wide area);
        the other panels are deleted. Panels of layers already there are kept as they are
        (with what they show: see :meth:`blank_diff_panel`); the others are made when
        first painted."""
        order = list(order)
        for name in [n for n in self.diff_panels if n not in order]:
            panel = self.diff_panels.pop(name)
            self.diff_grid.removeWidget(panel)
            panel.setParent(None)
            panel.deleteLater()
        cells: dict[str, QtWidgets.QWidget] = {}
        for name in order:
            cell = self.diff_panels.get(name)
            if cell is None:
                cell = self._diff_cells.get(name)
            cells[name] = cell if cell is not None else _StandIn(name)
        for name, cell in self._diff_cells.items():
            if isinstance(cell, _StandIn) and cells.get(name) is not cell:
                self.diff_grid.removeWidget(cell)
                cell.setParent(None)
                cell.deleteLater()
        self.diff_panels = {n: self.diff_panels[n] for n in order if n in self.diff_panels}
        changed = list(cells.items()) != list(self._diff_cells.items())
        self._diff_cells = cells
        if changed or order != self._diff_order or self._columns() != self._diff_columns:
            self._place_diff_panels(order)

    def _columns(self) -> int:
        return 2 if self.diff_scroll.viewport().width() >= TWO_COLUMNS_PX else 1

    def _place_diff_panels(self, order: list[str]) -> None:
        grid = self.diff_grid
        while grid.count():
            widget = grid.itemAt(0).widget()
            if widget is not None:
                # removeWidget, not takeAt: a widget whose old layout item stays alive is
                # never tied to its new one, whose cached height-for-width then goes stale.
                grid.removeWidget(widget)
            else:
                grid.takeAt(0)
        for row in range(grid.rowCount()):
            grid.setRowStretch(row, 0)
        self._diff_order = order
        self._diff_columns = columns = self._columns()
        self.diff_placeholder.setVisible(not order)
        if not order:
            grid.addWidget(self.diff_placeholder, 0, 0)
            return
        for i, name in enumerate(order):
            cell = self._diff_cells[name]
            grid.addWidget(cell, i // columns, i % columns)
            cell.setVisible(True)
        # Spare height below the last row, not in stretched rows around the mosaics.
        grid.setRowStretch((len(order) + columns - 1) // columns, 1)

    def blank_diff_panel(self, name: str, title: str = "") -> None:
        """Empty layer ``name``'s panel, if made (it waits to be painted), keeping its
        height so that the panels around it stay where they are; ``title``: the module type
        it names."""
        panel = self.diff_panels.get(name)
        if panel is None:
            return
        height = panel.height() if panel.activation_slot.view is not None else 0
        panel.clear()
        panel.set_module_type(title)
        panel.set_minimum_panel_height(max(height, MIN_PANEL_HEIGHT))

    def settle_diff_layout(self) -> None:
        """Lay the difference area out now (panels placed, the scroll range updated), so
        geometry read next is that of what is about to be painted."""
        for _ in range(3):
            QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.LayoutRequest)

    def diff_panels_near_view(self, names: Sequence[str] | set[str], margin: int) -> list[str]:
        """Those of ``names`` whose panels (or their stand-ins) are in the difference area's
        viewport or within ``margin`` pixels of it, in depth order (the layout is settled
        first)."""
        self.settle_diff_layout()
        top = self.diff_scroll.verticalScrollBar().value() - margin
        bottom = top + self.diff_scroll.viewport().height() + 2 * margin
        return [
            name
            for name, cell in self._diff_cells.items()
            if name in names and cell.y() < bottom and cell.y() + cell.height() > top
        ]

    def diff_anchor(self) -> tuple[str, int] | None:
        """The first panel whose bottom is in view, and how far its top is from the view's
        top: :meth:`keep_diff_anchor` puts it back there after panels above it changed."""
        value = self.diff_scroll.verticalScrollBar().value()
        for name, cell in self._diff_cells.items():
            if cell.y() + cell.height() > value:
                return name, cell.y() - value
        return None

    def keep_diff_anchor(self, anchor: tuple[str, int] | None) -> None:
        """Scroll so that ``anchor`` (from :meth:`diff_anchor`) is where it was."""
        self.settle_diff_layout()
        if anchor is None or anchor[0] not in self._diff_cells:
            return
        name, offset = anchor
        bar = self.diff_scroll.verticalScrollBar()
        bar.setValue(self._diff_cells[name].y() - offset)

    def clear(self, message: str = "") -> None:
        """Forget the comparison shown."""
        self.chart.clear()
        self.predictions.clear()
        self.layout_diff_panels([])
        self.set_message(message)

    def _on_source_index_changed(self, index: int) -> None:
        self.source_stack.setCurrentIndex(index)
        self.source_changed.emit(self.source)


__all__ = ["SOURCES", "CompareView", "DifferencePanel"]
