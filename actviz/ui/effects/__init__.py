"""The "Channels that matter" dock: channels ranked by estimated (and verified) effect."""

from __future__ import annotations

from actviz.ui.effects.feature import EffectsFeature

__all__ = ["EffectsFeature"]
