"""The features a window hosts by default, in the order they attach.

Each is a class constructed with the window's :class:`~actviz.ui.host.Host`; the order sets
where their tabs, toolbars and menu entries appear.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["default_features"]


def default_features() -> tuple[Callable[[Any], Any], ...]:
    """Token views, what-if edits, the Compare tab, dataset scans, live mode and session
    files (File > Save session / Open session / Export report), and concepts (Data > Train
    concepts…, panels of concepts)."""
    from actviz.ui.atlas.feature import AtlasFeature
    from actviz.ui.compare.feature import CompareController
    from actviz.ui.concepts import ConceptsFeature
    from actviz.ui.dataset.feature import DatasetScanUI
    from actviz.ui.effects import EffectsFeature
    from actviz.ui.live.feature import LiveMode
    from actviz.ui.sessions import SessionsFeature
    from actviz.ui.tokens.feature import TokenViews
    from actviz.ui.visualize import VisualizeFeature
    from actviz.ui.whatif.feature import WhatIfController

    return (
        TokenViews,
        WhatIfController,
        CompareController,
        DatasetScanUI,
        AtlasFeature,
        LiveMode,
        SessionsFeature,
        EffectsFeature,
        VisualizeFeature,
        ConceptsFeature,
    )
