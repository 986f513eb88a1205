"""The window's central area (banner, Layers and Overview tabs), status bar and default size.

Built once, like a ``setupUi``: widgets are stored on the window under the names its public API
documents (``banner``, ``tabs``, ``layers_grid``, ``prediction_panel``, ``progress_bar``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from actviz.ui.banner import MessageBanner
from actviz.ui.panels.channel_view import ChannelView
from actviz.ui.panels.grad_flow import GradFlowPanel
from actviz.ui.panels.histogram import HistogramPanel
from actviz.ui.panels.overlay import OverlayPanel
from actviz.ui.panels.prediction import PredictionPanel
from actviz.ui.panels.stats_table import StatsTable

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.main_window import MainWindow

#: The window never opens larger than this (a 1600x1000 screen keeps room around it).
PREFERRED_SIZE = QSize(1360, 820)
#: Share of the screen's available area the window may take at most.
SCREEN_FRACTION = 0.9


def default_window_size(available: QSize | None) -> QSize:
    """The window's first size on a screen whose available area is ``available``.

    :data:`PREFERRED_SIZE`, shrunk to :data:`SCREEN_FRACTION` of a smaller screen so the title
    bar and the edges stay on screen (None: no screen known, the preferred size).
    """
    if available is None or available.isEmpty():
        return QSize(PREFERRED_SIZE)
    return QSize(
        min(PREFERRED_SIZE.width(), int(available.width() * SCREEN_FRACTION)),
        min(PREFERRED_SIZE.height(), int(available.height() * SCREEN_FRACTION)),
    )


def build_centre(window: MainWindow) -> None:
    """Banner above two tabs: Layers (panel grid | large channel view) and Overview."""
    central = QWidget()
    layout = QVBoxLayout(central)
    layout.setContentsMargins(4, 4, 4, 4)
    layout.setSpacing(4)
    window.banner = MessageBanner()
    layout.addWidget(window.banner)
    window.tabs = QTabWidget()
    layout.addWidget(window.tabs, 1)
    window.setCentralWidget(central)
    window.tabs.addTab(_layers_tab(window), "Layers")
    window.overview_tab = _overview_tab(window)
    window.tabs.addTab(window.overview_tab, "Overview")


def _layers_tab(window: MainWindow) -> QSplitter:
    # Scrollable grid of LayerPanels | the clicked channel, large.
    window.layers_splitter = QSplitter(Qt.Orientation.Horizontal)
    window.layers_scroll = QScrollArea()
    window.layers_scroll.setWidgetResizable(True)
    window.layers_container = QWidget()
    window.layers_grid = QGridLayout(window.layers_container)
    window.layers_grid.setContentsMargins(2, 2, 2, 2)
    window.layers_grid.setSpacing(6)
    window.layers_placeholder = QLabel(
        "Tick layers in the module tree and press Run (Ctrl+R) to see their feature maps."
    )
    window.layers_placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
    window.layers_placeholder.setWordWrap(True)
    window.layers_grid.addWidget(window.layers_placeholder, 0, 0)
    window.layers_scroll.setWidget(window.layers_container)
    window.layers_splitter.addWidget(window.layers_scroll)
    window.channel_box = QWidget()
    box_layout = QVBoxLayout(window.channel_box)
    box_layout.setContentsMargins(0, 0, 0, 0)
    head = QHBoxLayout()
    head.addWidget(QLabel("Channel"), 1)
    close_channel = QToolButton()
    close_channel.setText("✕")
    close_channel.setAutoRaise(True)
    close_channel.setToolTip("Close the channel view")
    close_channel.clicked.connect(lambda: window.channel_box.setVisible(False))
    head.addWidget(close_channel)
    box_layout.addLayout(head)
    window.channel_view = ChannelView()
    box_layout.addWidget(window.channel_view, 1)
    window.layers_splitter.addWidget(window.channel_box)
    window.layers_splitter.setStretchFactor(0, 3)
    window.layers_splitter.setStretchFactor(1, 2)
    window.channel_box.setVisible(False)
    return window.layers_splitter


def _overview_tab(window: MainWindow) -> QWidget:
    # Predictions, saliency, Grad-CAM on top; gradient flow, histogram, statistics below.
    overview = QWidget()
    grid = QGridLayout(overview)
    grid.setContentsMargins(2, 2, 2, 2)
    grid.setSpacing(6)
    window.prediction_panel = PredictionPanel()
    window.saliency_panel = OverlayPanel("Saliency |d target / d input|")
    window.gradcam_panel = OverlayPanel("Grad-CAM", with_layer_selector=True)
    window.gradcam_panel.layer_changed.connect(window._on_gradcam_layer_changed)
    window.grad_flow_panel = GradFlowPanel()
    window.stats_table = StatsTable()
    window.stats_table.layer_selected.connect(window._on_stats_layer_selected)
    window.histogram_panel = HistogramPanel()
    grid.addWidget(window.prediction_panel, 0, 0)
    grid.addWidget(window.saliency_panel, 0, 1)
    grid.addWidget(window.gradcam_panel, 0, 2)
    grid.addWidget(window.grad_flow_panel, 1, 0)
    grid.addWidget(window.histogram_panel, 1, 1)
    grid.addWidget(window.stats_table, 1, 2)
    for c in range(3):
        grid.setColumnStretch(c, 1)
    grid.setRowStretch(0, 1)
    grid.setRowStretch(1, 1)
    return overview


def build_status_bar(window: MainWindow) -> None:
    """Status text, a busy bar (runs, loads, exports) and the last run's timing."""
    status = window.statusBar()
    window.status_label = QLabel("Ready")
    status.addWidget(window.status_label, 1)
    window.progress_bar = QProgressBar()
    window.progress_bar.setRange(0, 0)  # busy indicator: capture has no fraction to report
    window.progress_bar.setMaximumWidth(140)
    window.progress_bar.setVisible(False)
    status.addPermanentWidget(window.progress_bar)
    window.timing_label = QLabel("")
    status.addPermanentWidget(window.timing_label)


__all__ = ["build_centre", "build_status_bar", "default_window_size"]
