"""Passive pyqtgraph panels: typed numpy setters in, signals out, no torch; each has
``clear()`` and ``export_png(path)``."""

from __future__ import annotations

from actviz.display.colormaps import COLORMAPS
from actviz.ui.panels.channel_view import ChannelView
from actviz.ui.panels.colorbar import lut
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.panels.overlay import InputPreview, OverlayPanel
from actviz.ui.panels.plot_panel import GradFlowPanel, HistogramPanel
from actviz.ui.panels.prediction import PredictionPanel
from actviz.ui.panels.stats_table import StatsTable

__all__ = [
    "COLORMAPS", "ChannelView", "GradFlowPanel", "HistogramPanel", "InputPreview", "LayerPanel",
    "OverlayPanel", "PredictionPanel", "StatsTable", "lut",
]  # fmt: skip
