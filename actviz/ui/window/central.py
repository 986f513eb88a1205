"""The window's central area (banner, Layers and Overview tabs), status bar and first size."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QGridLayout,
    QLabel,
    QMainWindow,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from actviz.ui.panels import style
from actviz.ui.panels.channel_view import ChannelView
from actviz.ui.panels.overlay import OverlayPanel
from actviz.ui.panels.plot_panel import GradFlowPanel, HistogramPanel
from actviz.ui.panels.prediction import PredictionPanel
from actviz.ui.panels.stats_table import StatsTable
from actviz.ui.panels.style import PAGE_MARGIN, PANEL_SPACING, ElidedLabel, ProgressBar
from actviz.ui.window.banner import MessageBanner

#: The window never opens larger than this (a 1600x1000 screen keeps room around it).
PREFERRED_SIZE = QSize(1360, 820)
#: The Layers tab's panel column is never narrower than this beside the channel view.
LAYERS_MIN_WIDTH = 180
#: Share of the screen's available area the window may take at most.
SCREEN_FRACTION = 0.9
#: The smallest size the window is laid out for (a first start never opens it smaller).
MINIMUM_SIZE = QSize(1024, 640)


def default_window_size(available: QSize | None) -> QSize:
    """The window's first size: :data:`PREFERRED_SIZE`, shrunk to :data:`SCREEN_FRACTION` of a
    smaller ``available`` area but not below :data:`MINIMUM_SIZE` (or the whole area)."""
    if available is None or available.isEmpty():
        return QSize(PREFERRED_SIZE)
    fraction = QSize(
        min(PREFERRED_SIZE.width(), int(available.width() * SCREEN_FRACTION)),
        min(PREFERRED_SIZE.height(), int(available.height() * SCREEN_FRACTION)),
    )
    return fraction.expandedTo(MINIMUM_SIZE.boundedTo(available))


class Centre:
    """``window``'s central widget: the banner above the Layers and Overview tabs."""

    def __init__(self, window: QMainWindow) -> None:
        central = QWidget()
        layout = QVBoxLayout(central, spacing=PAGE_MARGIN)
        layout.setContentsMargins(*[PAGE_MARGIN] * 4)
        self.banner = MessageBanner()
        layout.addWidget(self.banner)
        self.tabs = QTabWidget()
        layout.addWidget(self.tabs, 1)
        window.setCentralWidget(central)
        self._layers_tab()
        self.tabs.addTab(self.layers_splitter, "Layers")
        self._overview_tab()
        self.tabs.addTab(self.overview_tab, "Overview")

    def _layers_tab(self) -> None:
        splitter = self.layers_splitter = QSplitter(Qt.Orientation.Horizontal)
        scroll = self.layers_scroll = style.scroll_area(cls=_LayersScroll)
        scroll.setMinimumWidth(LAYERS_MIN_WIDTH)
        # Heights follow widths: a scroll bar that came and went would change the widths.
        scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        container = QWidget()
        # Grown by each new row: only the new part paints, not every panel on screen again.
        container.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
        self.layers_grid = scroll.grid = LayersGrid(container)
        self.layers_grid.setContentsMargins(*[PAGE_MARGIN] * 4)
        self.layers_grid.setSpacing(PANEL_SPACING)
        # Its text says what it waits for (PanelGrid).
        self.layers_placeholder = QLabel(alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
        self.layers_grid.addWidget(self.layers_placeholder, 0, 0)
        scroll.setWidget(container)
        splitter.addWidget(scroll)
        box = self.channel_box = QWidget()
        self.channel_view = ChannelView()  # its own title, step buttons and close button
        self.channel_view.close_requested.connect(lambda: box.setVisible(False))
        style.bare_box(box, vertical=True).addWidget(self.channel_view, 1)
        splitter.addWidget(box)
        splitter.setChildrenCollapsible(False)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        box.setVisible(False)

    def _overview_tab(self) -> None:
        # The page scrolls, so the Overview never sets the window's minimum size.
        self.prediction_panel = PredictionPanel()
        self.saliency_panel = OverlayPanel("Saliency |d target / d input|")
        self.gradcam_panel = OverlayPanel("Grad-CAM", with_layer_selector=True)
        self.grad_flow_panel = GradFlowPanel()
        self.histogram_panel = HistogramPanel()
        self.stats_table = StatsTable()
        across = Qt.Orientation.Horizontal
        top = _splitter(across, self.prediction_panel, self.saliency_panel, self.gradcam_panel)
        bottom = _splitter(across, self.grad_flow_panel, self.histogram_panel, self.stats_table)
        rows = _splitter(Qt.Orientation.Vertical, top, bottom)
        #: The Overview's splitters: rows (vertical), top row, bottom row.
        self.overview_splitters = (rows, top, bottom)
        # Shares, not pixels; the ten-column statistics table gets the widest.
        for splitter, shares in ((top, (1, 1, 1)), (bottom, (2, 2, 3)), (rows, (1, 1))):
            splitter.setSizes([1000 * share for share in shares])
            for index, share in enumerate(shares):
                splitter.setStretchFactor(index, share)
        content = QWidget()
        box = QVBoxLayout(content)
        box.setContentsMargins(*[PAGE_MARGIN] * 4)
        box.addWidget(rows)
        page = self.overview_tab = style.scroll_area(
            name="overviewPage", frameless=True, cls=_OverviewPage
        )
        page.rows = (top, bottom)
        page.setWidget(content)


class _LayersScroll(QScrollArea):
    """The Layers tab's scroll area; says when its viewport's width changes (grid columns)."""

    viewport_resized = Signal(int)
    _announced = -1
    grid: LayersGrid | None = None  # arranges its panels for the new width before its pass

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        # The viewport's width changes only here (its bar is always on): columns before layout.
        if (width := self.viewport().width()) != self._announced:
            self._announced = width
            self.viewport_resized.emit(width)
            if self.grid is not None:
                self.grid.arrange(width)
        super().resizeEvent(event)


class LayersGrid(QGridLayout):
    """The Layers tab's panel grid, whose container takes the rows' height before they are
    placed: Qt lays a grid out at once, before the scroll area grows it (rows squeezed)."""

    #: Run after each pass; True: it changed heights (pages re-made for the panels' widths).
    after_pass: Callable[[], bool] | None = None

    def arrange(self, width: int) -> None:
        """Each panel's sides stacked or side by side for its column's width in ``width`` before
        its height is asked (arranged after its resize, every panel was laid out twice)."""
        columns = 1 + max((self.getItemPosition(i)[1] for i in range(self.count())), default=0)
        room = (width - 2 * PAGE_MARGIN + PANEL_SPACING) // columns - PANEL_SPACING
        for panel in (self.itemAt(i).widget() for i in range(self.count())):
            if (arrange_for := getattr(panel, "arrange_for", None)) is not None:
                arrange_for(room)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt name
        container = self.parentWidget()
        need = self.totalHeightForWidth(rect.width()) if self.hasHeightForWidth() else -1
        if container is not None and container.height() < need:
            container.resize(container.width(), need)  # lays the grid out at that height
            return
        super().setGeometry(rect)
        if self.after_pass is not None and self.after_pass():
            self.setGeometry(rect)  # at the new pages' heights, before a paint at the old ones


class _OverviewPage(QScrollArea):
    """The Overview's page: rows turn into columns when too narrow, so it scrolls only down."""

    #: The splitters whose panels go across or down.
    rows: tuple[QSplitter, ...] = ()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self.fit_rows(event.size().width())

    def fit_rows(self, width: int) -> None:
        """Lay each row across when ``width`` holds its panels' least widths, else down."""
        spare = 2 * PAGE_MARGIN + self.verticalScrollBar().sizeHint().width() + 2
        for row in self.rows:
            needed = sum(
                max(row.widget(i).minimumSizeHint().width(), row.widget(i).minimumWidth())
                for i in range(row.count())
            )
            needed += row.handleWidth() * max(0, row.count() - 1) + spare
            wanted = Qt.Orientation.Horizontal if width >= needed else Qt.Orientation.Vertical
            if row.orientation() != wanted:
                row.setOrientation(wanted)


def _splitter(orientation: Qt.Orientation, *widgets: QWidget) -> QSplitter:
    splitter = QSplitter(orientation, handleWidth=PANEL_SPACING)
    splitter.setChildrenCollapsible(False)  # a dragged handle never makes a panel vanish
    for widget in widgets:
        splitter.addWidget(widget)
    return splitter


class StatusWidgets:
    """The status bar of ``window``: its text, a busy bar and the last run's timing."""

    def __init__(self, window: QMainWindow) -> None:
        status = window.statusBar()
        self.status_label = ElidedLabel("Ready", steady=True)  # a live frame's: no window relayout
        status.addWidget(self.status_label, 1)
        # A busy indicator: a capture has no fraction to report.
        self.progress_bar = ProgressBar(maximum=0, maximumWidth=140, visible=False)
        status.addPermanentWidget(self.progress_bar)
        #: The last run's timing and the memory held.
        self.timing_label = ElidedLabel(grow=True)
        status.addPermanentWidget(self.timing_label)
