"""What-if edits for ``actviz.capture(model, x, edits={...})``: ``ablate``, ``scale``, ``keep``,
``clamp``, ``patch``, ``concept`` or any ``f(output) -> output`` (:mod:`actviz.core.edit_kinds`)."""

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
    "KINDS", "Edit", "EditError", "ablate", "channel_dim", "clamp", "concept", "custom", "keep",
    "normalize_edits", "patch", "scale",
]  # fmt: skip
