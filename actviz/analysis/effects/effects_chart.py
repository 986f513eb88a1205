"""Bar charts of channel effects (PIL, no Qt), as ``actviz effects`` writes them. Colours say the
sign everywhere: :data:`SUPPORTS_RGB` when replacing lowers the target, :data:`OPPOSES_RGB`
when it raises it; exact values in a darker shade beside their estimate."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from actviz.analysis.effects.effect_results import Effects
from actviz.io.export.typeset import _BG, _INK, _fmt, _font, _text_w

#: Negative effect: setting the channel to the baseline lowers the target.
SUPPORTS_RGB = (52, 112, 184)
#: Positive effect: setting the channel to the baseline raises the target.
OPPOSES_RGB = (200, 70, 60)
_GRID = (215, 215, 215)


def effect_colour(value: float, exact: bool = False) -> tuple[int, int, int]:
    """The bar colour of an effect: by sign, darker for an exact value."""
    rgb = SUPPORTS_RGB if value < 0 else OPPOSES_RGB
    return tuple(int(c * 0.6) for c in rgb) if exact else rgb  # type: ignore[return-value]


def _unit(eff: Effects, layer: str) -> str:
    # A layer ranked by a dictionary's concepts: each bar removes one concept (x - z_i d_i).
    return "concept" if getattr(eff, "dictionaries", {}).get(layer) is not None else "channel"


def chart_title(eff: Effects, layer: str) -> str:
    """What :func:`effects_chart`'s bars of ``layer`` measure, as its title says it."""
    if _unit(eff, layer) == "concept":
        return f"{layer}: effect of removing each concept"
    return f"{layer}: effect of setting each channel to {eff.baseline}"


def effects_chart(eff: Effects, layer: str, k: int = 32) -> Image.Image:
    """The ``k`` channels of ``layer`` with the largest ``|estimate|`` as bars, largest first,
    with exact bars where verified; channels without effect are left out and counted."""
    top_rows = eff.top(layer, k)
    # As in the window: channels without effect get no empty slot; the footer counts them.
    rows = [r for r in top_rows if r.has_effect]
    left_out = len(top_rows) - len(rows)
    n = max(len(rows), 1)
    values = [r.estimate for r in rows] + [r.exact for r in rows if r.exact is not None]
    finite = np.array([v for v in values if math.isfinite(v)] or [0.0])
    hi, lo = max(0.0, float(finite.max())), min(0.0, float(finite.min()))
    span = (hi - lo) or 1.0
    slot = max(14, min(36, 960 // n))
    plot_h, left, top = 240, 64, 58
    width = max(left + n * slot + 16, 420)
    height = top + plot_h + 52
    img = Image.new("RGB", (width, height), _BG)
    draw = ImageDraw.Draw(img)
    font, small = _font(13), _font(10)

    def y_of(v: float) -> float:
        return top + plot_h * (hi - v) / span

    zero = y_of(0.0)
    verified = sum(r.exact is not None for r in rows)
    sub = f"target {eff.target_description}"
    if verified:
        rho = eff.rank_correlation(layer)
        rho_text = f"{rho:.2f}" if math.isfinite(rho) else "n/a"
        sub += f"; exact beside estimate for {verified}, rank correlation {rho_text}"
    draw.text((8, 6), chart_title(eff, layer), fill=_INK, font=font)
    draw.text((8, 24), sub, fill=_INK, font=small)
    legend_x = 8
    for label, colour in (
        ("supports (lowers target)", SUPPORTS_RGB),
        ("opposes (raises target)", OPPOSES_RGB),
        ("exact: darker", effect_colour(-1.0, exact=True)),
    ):
        draw.rectangle([legend_x, 40, legend_x + 9, 49], fill=colour)
        draw.text((legend_x + 13, 39), label, fill=_INK, font=small)
        legend_x += 22 + _text_w(draw, label, small)
    for v in (hi, lo):
        draw.line([left - 4, y_of(v), width - 8, y_of(v)], fill=_GRID)
        text = _fmt(v)
        draw.text((left - 8 - _text_w(draw, text, small), y_of(v) - 6), text, fill=_INK, font=small)
    for i, row in enumerate(rows):
        x0 = left + i * slot
        bar = (slot - 4) // (2 if row.exact is not None else 1)
        pairs = [(row.estimate, False)] + ([(row.exact, True)] if row.exact is not None else [])
        for j, (v, exact) in enumerate(pairs):
            if not math.isfinite(v):
                continue
            x, y = x0 + 2 + j * bar, y_of(v)
            draw.rectangle(
                [x, min(y, zero), x + max(bar - 1, 1), max(y, zero)], fill=effect_colour(v, exact)
            )
        label = str(row.channel)
        lx = x0 + (slot - _text_w(draw, label, small)) // 2
        draw.text((lx, top + plot_h + 6 + (i % 2) * 12 * (slot < 26)), label, fill=_INK, font=small)
    draw.line([left - 4, zero, width - 8, zero], fill=_INK)
    footer = f"{_unit(eff, layer)} (largest |estimate| first)"
    if left_out:
        footer += f"; {left_out} without effect left out"
    draw.text((8, height - 16), footer, fill=_INK, font=small)
    return img
