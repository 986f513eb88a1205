"""What-if edits for :func:`actviz.capture`: ``actviz.capture(model, x, edits={...})``.

``ablate(channels)`` sets channels to zero, ``scale(channels, factor)`` multiplies them,
``keep(channels)`` zeroes every other channel, ``clamp(min, max)`` clamps, ``patch(source)``
copies the same layer's output from another run's capture, ``concept(concepts, [i])``
removes (or with ``scale=`` scales) concepts of a dictionary (:mod:`actviz.concepts`), and
any callable ``f(output) -> output`` does anything else. See :mod:`actviz.core.edit_kinds` for the details.
"""

from __future__ import annotations

from actviz.core.edit_kinds import (
    KINDS,
    Edit,
    EditError,
    ablate,
    channel_dim,
    clamp,
    concept,
    custom,
    keep,
    normalize_edits,
    patch,
    scale,
)

__all__ = [
    "KINDS",
    "Edit",
    "EditError",
    "ablate",
    "channel_dim",
    "clamp",
    "concept",
    "custom",
    "keep",
    "normalize_edits",
    "patch",
    "scale",
]
