"""A concept sheet: the top concepts of a concept scan, each with its top images and where it
fires on them (a red overlay whose strength is the concept's activation). No Qt here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from actviz.analysis.concepts.concept_scan import ConceptScan, top_heatmaps
from actviz.analysis.concepts.dictionary import Concepts
from actviz.io.export.typeset import _font, _framed

_GAP = 6
_LABEL_W = 150
_EMPTY = (235, 235, 235)
_INK = (30, 30, 30)
_FIRE = np.array([255.0, 40.0, 0.0])


def overlay(picture: np.ndarray, heat: np.ndarray, strength: float = 0.45) -> np.ndarray:
    """``picture`` ``(H, W, 3)`` uint8 with where ``heat`` (``(H, W)``, >= 0) is high shown:
    the rest dimmed to a third, the firing part tinted red (heat relative to its own peak)."""
    peak = float(heat.max()) if heat.size else 0.0
    h = np.clip(heat / peak, 0.0, 1.0)[..., None] if peak > 0 else np.zeros((*heat.shape, 1))
    lit = picture.astype(np.float32) * (0.3 + 0.7 * h)
    out = lit * (1.0 - strength * h) + _FIRE * (strength * h)
    return np.clip(out, 0, 255).astype(np.uint8)


def concept_sheet(
    model: Any,
    concepts: Concepts,
    result: ConceptScan,
    *,
    top: int = 24,
    by: str = "rate",
    tile: int = 64,
    data: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> Image.Image:
    """One picture: the ``top`` concepts (ordered ``by`` :meth:`ConceptScan.order`), a row
    each: its number, firing rate and best value, then its top images with their heatmaps."""
    order = [int(i) for i in result.order(by)[: max(1, top)]]
    k = max(1, result.k)
    row_h = tile
    width = _LABEL_W + k * (tile + 2) + 2 * _GAP
    height = len(order) * (row_h + _GAP) + _GAP
    sheet = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    font = _font(11)
    for r, concept in enumerate(order):
        if progress is not None:
            progress(r, len(order))
        y = _GAP + r * (row_h + _GAP)
        rate = 100 * float(result.image_rate[concept])
        best = float(result.values[concept, 0]) if np.isfinite(result.values[concept, 0]) else 0
        draw.text((_GAP, y + 2), f"concept {concept}", fill=_INK, font=font)
        draw.text((_GAP, y + 18), f"fires on {rate:.0f}% of images", fill=_INK, font=font)
        draw.text((_GAP, y + 34), f"best {best:.3g}", fill=_INK, font=font)
        shown = top_heatmaps(model, concepts, result, concept, data=data)
        for j in range(k):
            x = _GAP + _LABEL_W + j * (tile + 2)
            if j < len(shown):
                _, picture, heat = shown[j]
                img = Image.fromarray(overlay(picture, heat)).resize((tile, tile), Image.BILINEAR)
                sheet.paste(img, (x, y))
            else:
                draw.rectangle([x, y, x + tile - 1, y + tile - 1], fill=_EMPTY)
    title = (
        f"{result.layer or '(model)'}: {len(order)} of {result.n_concepts} concepts "
        f"(by {by}), top {result.k} of {result.count} images each"
    )
    return _framed(sheet, title)
