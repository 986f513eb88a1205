"""What colour each dot of the map gets (numpy only, no Qt): by class, prediction,
correctness or one channel's mean activation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from actviz.data.atlas_image import class_colours

#: The colour-by choices, in the combo's order.
COLOUR_MODES = ("Class", "Prediction", "Correct", "Channel")
#: Dots whose class (or prediction) is unknown.
GREY = np.array([150, 150, 150], np.uint8)
_RIGHT = np.array([60, 170, 75], np.uint8)
_WRONG = np.array([220, 50, 50], np.uint8)
#: Steps of the channel colour scale: a few dozen brushes for any number of dots.
LEVELS = 64


@dataclass(frozen=True)
class Colouring:
    """Per-dot ``index`` into ``palette`` (``(P, 3)`` uint8), ``legend`` rows ``(name, rgb,
    count)``, a channel's ``scale`` and a ``note`` when the mode shows nothing useful."""

    index: np.ndarray
    palette: np.ndarray
    legend: tuple[tuple[str, tuple[int, int, int], int], ...] = ()
    scale: tuple[float, float] | None = None
    note: str = ""

    def rgb(self) -> np.ndarray:
        """``(M, 3)`` uint8 colours."""
        return self.palette[self.index]


def model_labels(
    labels: np.ndarray | None, class_names: Sequence[str] | None, categories: Sequence[str] | None
) -> np.ndarray | None:
    """The folder's labels as the model's class indices, by name (-1: none; None: unknown)."""
    if labels is None or not class_names or not categories:
        return None
    where = {name: i for i, name in enumerate(categories)}
    lookup = np.array([where.get(name, -1) for name in class_names] + [-1], np.int64)
    return lookup[np.where(np.asarray(labels) >= 0, labels, len(class_names))]


def _by_category(values: np.ndarray, names: Sequence[str], note_missing: str) -> Colouring:
    n = max(len(names), int(values.max()) + 1 if values.size else 0, 1)
    palette = np.concatenate([class_colours(n), GREY[None]], axis=0)
    index = np.where(values >= 0, values, n).astype(np.int64)
    counts = np.bincount(index, minlength=n + 1)
    legend = _legend([names[i] if i < len(names) else str(i) for i in range(n)], palette, counts)
    return Colouring(index, palette, legend, note="" if legend else note_missing)


def _legend(names: Sequence[str], palette: np.ndarray, counts: np.ndarray) -> tuple:
    """The legend rows of the colours ``palette[i]`` named ``names[i]`` that dots have."""
    return tuple(
        (name, tuple(int(v) for v in palette[i]), int(counts[i]))
        for i, name in enumerate(names)
        if counts[i]
    )


def colouring(
    mode: str,
    count: int,
    *,
    labels: np.ndarray | None = None,
    class_names: Sequence[str] | None = None,
    predictions: np.ndarray | None = None,
    categories: Sequence[str] | None = None,
    channel_values: np.ndarray | None = None,
) -> Colouring:
    """Colours of ``count`` dots for one of :data:`COLOUR_MODES`.

    ``mode``: "Class" (``labels``, ``class_names``), "Prediction" (``predictions``,
    ``categories``), "Correct" (prediction == class) or "Channel" (``channel_values``)."""
    grey = Colouring(np.zeros(count, np.int64), GREY[None])
    if mode == "Class":
        if labels is None:
            return replace(grey, note="The folder has no class folders.")
        return _by_category(np.asarray(labels), list(class_names or ()), "No classes.")
    if mode == "Prediction":
        if predictions is None:
            return replace(grey, note="No classifier layer in the scan: no predictions.")
        return _by_category(np.asarray(predictions), list(categories or ()), "No predictions.")
    if mode == "Correct":
        truth = model_labels(labels, class_names, categories)
        if predictions is None or truth is None:
            need = "Needs class folders named like the model's classes and a classifier layer."
            return replace(grey, note=need)
        known = truth >= 0
        right = known & (np.asarray(predictions) == truth)
        index = np.where(known, np.where(right, 0, 1), 2).astype(np.int64)
        palette = np.stack([_RIGHT, _WRONG, GREY])
        names = ("correct", "wrong", "class unknown to the model")
        return Colouring(index, palette, _legend(names, palette, np.bincount(index, minlength=3)))
    if mode == "Channel":
        if channel_values is None:
            return grey
        v = np.asarray(channel_values, np.float64)
        finite = np.isfinite(v)
        lo, hi = (float(v[finite].min()), float(v[finite].max())) if finite.any() else (0.0, 0.0)
        t = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
        index = np.clip(np.rint(np.nan_to_num(t) * (LEVELS - 1)), 0, LEVELS - 1).astype(np.int64)
        return Colouring(index, viridis(LEVELS), scale=(lo, hi))
    raise ValueError(f"unknown colour mode {mode!r}; one of {', '.join(COLOUR_MODES)}")


def viridis(levels: int) -> np.ndarray:
    """``(levels, 3)`` uint8 steps of viridis (the channel scale and its colour bar)."""
    from actviz.display.colormaps import table

    lut = table("viridis")[:, :3]
    return lut[np.linspace(0, len(lut) - 1, levels).round().astype(np.int64)].astype(np.uint8)
