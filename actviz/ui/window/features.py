"""The features a window hosts by default; their order sets where tabs and menus appear."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def default_features() -> tuple[Callable[[Any], Any], ...]:
    """Every default feature class, in the order they attach."""
    from actviz.ui.atlas.feature import AtlasFeature
    from actviz.ui.compare.feature import CompareController
    from actviz.ui.concepts import ConceptsFeature
    from actviz.ui.dataset.feature import DatasetScanUI
    from actviz.ui.effects.feature import EffectsFeature
    from actviz.ui.live.feature import LiveMode
    from actviz.ui.sessions.feature import SessionsFeature
    from actviz.ui.tokens.feature import TokenViews
    from actviz.ui.visualize.feature import VisualizeFeature
    from actviz.ui.whatif.feature import WhatIfController

    first = (TokenViews, WhatIfController, CompareController, DatasetScanUI, AtlasFeature)
    return (*first, LiveMode, SessionsFeature, EffectsFeature, VisualizeFeature, ConceptsFeature)
