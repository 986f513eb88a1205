"""The "Channels that matter" dock: every ticked layer's channels ranked by their effect on
the prediction, estimated per result and verified exactly in the background."""

from __future__ import annotations

from actviz.ui.effects.feature import EffectsFeature

__all__ = ["EffectsFeature"]
