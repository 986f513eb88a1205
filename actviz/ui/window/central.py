"""The window's central area (banner, Layers and Overview tabs), status bar and default size,
built once like a ``setupUi``: the parts take the widgets they drive from :class:`Centre` and
:class:`StatusWidgets`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QLabel,
    QMainWindow,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from actviz.ui.panels.channel_view import ChannelView
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.grad_flow import GradFlowPanel
from actviz.ui.panels.histogram import HistogramPanel
from actviz.ui.panels.overlay import OverlayPanel
from actviz.ui.panels.prediction import PredictionPanel
from actviz.ui.panels.stats_table import StatsTable
from actviz.ui.panels.style import (
    PAGE_MARGIN,
    PANEL_SPACING,
    ProgressBar,
    ReadoutText,
    SteadyElidedLabel,
)
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


@dataclass(eq=False)
class Centre:
    """The central area's widgets: the banner above the Layers and Overview tabs."""

    banner: MessageBanner
    tabs: QTabWidget
    layers_splitter: QSplitter
    layers_scroll: QScrollArea
    layers_container: QWidget
    layers_grid: QGridLayout
    layers_placeholder: QLabel
    channel_box: QWidget
    channel_view: ChannelView
    overview_tab: QScrollArea
    prediction_panel: PredictionPanel
    saliency_panel: OverlayPanel
    gradcam_panel: OverlayPanel
    grad_flow_panel: GradFlowPanel
    stats_table: StatsTable
    histogram_panel: HistogramPanel
    #: The Overview's splitters: rows (vertical), top row, bottom row.
    overview_splitters: tuple[QSplitter, QSplitter, QSplitter]


@dataclass(eq=False)
class StatusWidgets:
    """The status bar's widgets."""

    status_label: QLabel
    progress_bar: ProgressBar
    timing_label: ReadoutText  # the last run's timing and the memory held


def build_centre(window: QMainWindow) -> Centre:
    """Banner above two tabs, Layers (panel grid | large channel view) and Overview, made the
    central widget of ``window``."""
    central = QWidget()
    layout = QVBoxLayout(central)
    layout.setContentsMargins(*[PAGE_MARGIN] * 4)
    layout.setSpacing(PAGE_MARGIN)
    banner = MessageBanner()
    layout.addWidget(banner)
    tabs = QTabWidget()
    layout.addWidget(tabs, 1)
    window.setCentralWidget(central)
    layers = _layers_tab()
    tabs.addTab(layers["layers_splitter"], "Layers")
    overview = _overview_tab()
    tabs.addTab(overview["overview_tab"], "Overview")
    return Centre(banner=banner, tabs=tabs, **layers, **overview)


def _layers_tab() -> dict[str, Any]:
    splitter = QSplitter(Qt.Orientation.Horizontal)
    scroll = _LayersScroll()
    scroll.setWidgetResizable(True)
    scroll.setMinimumWidth(LAYERS_MIN_WIDTH)
    # Heights follow widths: a scroll bar that came and went would change the widths.
    scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
    container = QWidget()
    grid = QGridLayout(container)
    grid.setContentsMargins(*[PAGE_MARGIN] * 4)
    grid.setSpacing(PANEL_SPACING)
    placeholder = QLabel(
        "Tick layers in the module tree and press Run (Ctrl+R) to see their feature maps."
    )
    placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
    placeholder.setWordWrap(True)
    grid.addWidget(placeholder, 0, 0)
    scroll.setWidget(container)
    splitter.addWidget(scroll)
    channel_box = QWidget()
    box_layout = QVBoxLayout(channel_box)
    box_layout.setContentsMargins(0, 0, 0, 0)
    channel_view = ChannelView()  # its own title, step buttons and close button
    channel_view.close_requested.connect(lambda: channel_box.setVisible(False))
    box_layout.addWidget(channel_view, 1)
    splitter.addWidget(channel_box)
    splitter.setChildrenCollapsible(False)
    splitter.setStretchFactor(0, 2)
    splitter.setStretchFactor(1, 3)
    channel_box.setVisible(False)
    return dict(
        layers_splitter=splitter,
        layers_scroll=scroll,
        layers_container=container,
        layers_grid=grid,
        layers_placeholder=placeholder,
        channel_box=channel_box,
        channel_view=channel_view,
    )


def _overview_tab() -> dict[str, Any]:
    # The page scrolls, so the Overview never sets the window's minimum size.
    panels = dict(
        prediction_panel=PredictionPanel(),
        saliency_panel=OverlayPanel("Saliency |d target / d input|"),
        gradcam_panel=OverlayPanel("Grad-CAM", with_layer_selector=True),
        grad_flow_panel=GradFlowPanel(),
        histogram_panel=HistogramPanel(),
        stats_table=StatsTable(),
    )
    widgets = list(panels.values())
    rows = _splitter(Qt.Orientation.Vertical)
    top = _splitter(Qt.Orientation.Horizontal)
    bottom = _splitter(Qt.Orientation.Horizontal)
    for panel in widgets[:3]:
        top.addWidget(panel)
    for panel in widgets[3:]:
        bottom.addWidget(panel)
    rows.addWidget(top)
    rows.addWidget(bottom)
    # Shares, not pixels; the ten-column statistics table gets the widest.
    for splitter, shares in ((top, (1, 1, 1)), (bottom, (2, 2, 3)), (rows, (1, 1))):
        splitter.setSizes([1000 * share for share in shares])
        for index, share in enumerate(shares):
            splitter.setStretchFactor(index, share)
    content = QWidget()
    box = QVBoxLayout(content)
    box.setContentsMargins(*[PAGE_MARGIN] * 4)
    box.addWidget(rows)
    page = _OverviewPage((top, bottom))
    page.setObjectName("overviewPage")
    page.setWidgetResizable(True)
    page.setFrameShape(QFrame.Shape.NoFrame)
    page.setWidget(content)
    return dict(overview_tab=page, overview_splitters=(rows, top, bottom), **panels)


class _LayersScroll(QScrollArea):
    """The Layers tab's scroll area; says when its viewport's width changes (grid columns)."""

    viewport_resized = Signal(int)

    def __init__(self) -> None:
        super().__init__()
        # Announced after the resize pass, not within it (canvases resize in the re-layout).
        self._announce = DeferredCall(self, self._announce_width)
        self._announced = -1

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self._announce.request()

    def _announce_width(self) -> None:
        width = self.viewport().width()
        if width != self._announced:
            self._announced = width
            self.viewport_resized.emit(width)


class _OverviewPage(QScrollArea):
    """The Overview's page: rows turn into columns when too narrow, so it scrolls only down."""

    def __init__(self, rows: tuple[QSplitter, ...]) -> None:
        super().__init__()
        self._rows = rows

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self.fit_rows(event.size().width())

    def fit_rows(self, width: int) -> None:
        """Lay each row across when ``width`` holds its panels' least widths, else down."""
        spare = 2 * PAGE_MARGIN + self.verticalScrollBar().sizeHint().width() + 2
        for row in self._rows:
            across = Qt.Orientation.Horizontal
            needed = sum(
                max(row.widget(i).minimumSizeHint().width(), row.widget(i).minimumWidth())
                for i in range(row.count())
            )
            needed += row.handleWidth() * max(0, row.count() - 1) + spare
            wanted = across if width >= needed else Qt.Orientation.Vertical
            if row.orientation() != wanted:
                row.setOrientation(wanted)


def _splitter(orientation: Qt.Orientation) -> QSplitter:
    splitter = QSplitter(orientation)
    splitter.setHandleWidth(PANEL_SPACING)
    splitter.setChildrenCollapsible(False)  # a dragged handle never makes a panel vanish
    return splitter


def build_status_bar(window: QMainWindow) -> StatusWidgets:
    """Status text, a busy bar and the last run's timing, in the status bar of ``window``."""
    status = window.statusBar()
    label = SteadyElidedLabel("Ready")  # a live frame's target: no relayout of the window
    status.addWidget(label, 1)
    progress = ProgressBar()
    progress.setRange(0, 0)  # busy indicator: capture has no fraction to report
    progress.setMaximumWidth(140)
    progress.setVisible(False)
    status.addPermanentWidget(progress)
    timing = ReadoutText("")
    status.addPermanentWidget(timing)
    return StatusWidgets(status_label=label, progress_bar=progress, timing_label=timing)


__all__ = ["Centre", "StatusWidgets", "build_centre", "build_status_bar", "default_window_size"]
