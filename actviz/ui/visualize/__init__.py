"""The window's feature visualisation: "What it wants" in the channel view."""

from __future__ import annotations

from actviz.ui.visualize.feature import VisualizeFeature

__all__ = ["VisualizeFeature"]
