"""The atlas as a picture (``actviz atlas``'s ``atlas.png``): every image a dot at its projected
place, coloured by class as the window's scatter (:func:`class_colours`), with a legend."""

from __future__ import annotations

import colorsys
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

from actviz.io.export.typeset import _INK, _font, _text_w

# Ten well-separated hues first (Tableau 10), then evenly spread ones for more classes.
_TABLEAU = "1f77b4 ff7f0e 2ca02c d62728 9467bd 8c564b e377c2 7f7f7f bcbd22 17becf"
_BASE = tuple(tuple(bytes.fromhex(code)) for code in _TABLEAU.split())
_UNLABELLED = (110, 110, 110)
#: The frame of a selected dot, in the window and the report: black, far from class colours.
SELECTED_RGB = (0, 0, 0)
_FRAME = (200, 200, 200)
#: Classes named in the legend; the rest are counted on one line.
LEGEND_ROWS = 24


def class_colours(count: int) -> np.ndarray:
    """``(count, 3)`` uint8 RGB, one colour per class: the ten Tableau colours, then hues
    spread by the golden angle (distinct for any count, the same for a given count)."""
    out = np.zeros((max(0, count), 3), dtype=np.uint8)
    for i in range(len(out)):
        if i < len(_BASE):
            out[i] = _BASE[i]
        else:
            hue = (i * 0.618033988749895) % 1.0
            light = 0.45 if i % 2 else 0.6
            out[i] = [round(v * 255) for v in colorsys.hls_to_rgb(hue, light, 0.75)]
    return out


def splat_dots(
    x: np.ndarray,
    y: np.ndarray,
    rgba: np.ndarray,
    width: int,
    height: int,
    dot: int = 3,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Draw points as ``dot`` x ``dot`` squares into an ``(height, width, 4)`` uint8 RGBA image
    (or into ``out``), later over earlier, outside left out; ``rgba`` may be ``(N, 3)``."""
    width, height = int(width), int(height)
    if out is None:
        out = np.zeros((height, width, 4), dtype=np.uint8)
    elif out.shape != (height, width, 4) or out.dtype != np.uint8 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous ({height}, {width}, 4) uint8 image")
    colours = np.asarray(rgba, dtype=np.uint8)
    if colours.shape[1] == 3:
        colours = np.concatenate([colours, np.full((len(colours), 1), 255, np.uint8)], axis=1)
    ix = np.rint(np.asarray(x, dtype=np.float64))
    iy = np.rint(np.asarray(y, dtype=np.float64))
    half = int(dot) // 2
    keep = (
        np.isfinite(ix)
        & np.isfinite(iy)
        & (ix >= -half)
        & (iy >= -half)
        & (ix < width + half)
        & (iy < height + half)
    )
    ix, iy = ix[keep].astype(np.int64), iy[keep].astype(np.int64)
    # One 32-bit word per pixel: a 1-D scatter is far faster than RGBA rows by a 2-D index.
    words = np.ascontiguousarray(colours[keep]).view(np.uint32).reshape(-1)
    flat = out.reshape(-1).view(np.uint32)
    lo, hi = half, int(dot) - half - 1  # a square spans [p - lo, p + hi]
    # Squares wholly inside: one offset added to their first pixel per step, no clipping.
    whole = (ix >= lo) & (ix < width - hi) & (iy >= lo) & (iy < height - hi)
    base, inner = iy[whole] * width + ix[whole], words[whole]
    edge_x, edge_y, edge_words = ix[~whole], iy[~whole], words[~whole]
    for dy in range(-lo, hi + 1):
        for dx in range(-lo, hi + 1):
            flat[base + (dy * width + dx)] = inner
            if len(edge_x):
                xs, ys = edge_x + dx, edge_y + dy
                ok = (xs >= 0) & (xs < width) & (ys >= 0) & (ys < height)
                flat[ys[ok] * width + xs[ok]] = edge_words[ok]
    return out


def atlas_image(
    coords: np.ndarray,
    labels: np.ndarray | None = None,
    class_names: Sequence[str] | None = None,
    *,
    title: str = "",
    size: tuple[int, int] = (1280, 720),
    marker: np.ndarray | None = None,
    dot: int | None = None,
    rgb: np.ndarray | None = None,
    legend: Sequence[tuple[str, Sequence[int], int]] | None = None,
    colour_bar: tuple[float, float, np.ndarray] | None = None,
    selected: np.ndarray | Sequence[int] | None = None,
) -> Image.Image:
    """Draw 2-D ``coords`` as dots coloured by ``labels`` (-1 or none: grey), with a class legend:
    ``marker`` rings a point; ``dot`` defaults larger for fewer points; ``rgb`` colours and
    ``legend`` entries replace the class colours and legend; ``colour_bar`` ``(low, high,
    palette)`` goes where the legend goes; ``selected`` rows get a black frame."""
    coords = np.asarray(coords, dtype=np.float64)
    if coords.ndim != 2 or coords.shape[1] < 2:
        raise ValueError(f"coords must be (N, 2), got {coords.shape}")
    if dot is None:
        dot = 5 if len(coords) <= 2000 else 4 if len(coords) <= 20_000 else 3
    width, height = (int(v) for v in size)
    img = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    font = _font(13)
    names = list(class_names or ())
    n = coords.shape[0]
    lab = np.full(n, -1, dtype=np.int64) if labels is None else np.asarray(labels, np.int64)
    colours = class_colours(len(names))
    known = (lab >= 0) & (lab < len(names))
    counts = np.bincount(lab[known], minlength=len(names)) if names else np.zeros(0, int)
    # What the legend lists: the given entries, else the classes (and the unlabelled ones).
    if legend is not None:
        entries = [(str(a), tuple(int(v) for v in c[:3]), int(k)) for a, c, k in legend]
        more = 0
    else:
        entries = [
            (names[i], tuple(int(v) for v in colours[i]), int(counts[i]))
            for i in range(min(len(names), LEGEND_ROWS))
        ]
        more = max(0, len(names) - LEGEND_ROWS)
        unlabelled = int((~known).sum())
        if names and unlabelled:
            entries.append(("no class", _UNLABELLED, unlabelled))
    legend_w = 0
    if entries:
        listed = names if legend is None and names else [name for name, _c, _k in entries]
        legend_w = min(width // 3, 24 + max(_text_w(draw, f"{s} (000000)", font) for s in listed))
    elif colour_bar is not None:
        legend_w = min(width // 3, 90)
    top = 34 if title else 12
    box = (12, top, width - legend_w - 24, height - 12)  # the plot's frame
    draw.rectangle(box, outline=_FRAME)
    if title:
        draw.text((12, 10), title, fill=_INK, font=font)
    pts = coords[:, :2]
    if marker is not None:
        pts = np.vstack([pts, np.asarray(marker, dtype=np.float64)[None, :2]])
    finite = np.isfinite(pts).all(axis=1)
    lo = pts[finite].min(axis=0) if finite.any() else np.zeros(2)
    hi = pts[finite].max(axis=0) if finite.any() else np.ones(2)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    inner = np.array([box[2] - box[0] - 2 * dot - 8, box[3] - box[1] - 2 * dot - 8], float)
    scale = inner / span

    def to_px(p: np.ndarray) -> np.ndarray:
        x = box[0] + dot + 4 + (p[..., 0] - lo[0]) * scale[0]
        y = box[3] - dot - 4 - (p[..., 1] - lo[1]) * scale[1]  # y up
        return np.stack([x, y], axis=-1)

    px = to_px(coords[:, :2])
    if rgb is not None:
        dots = np.asarray(rgb, dtype=np.uint8).reshape(n, -1)[:, :3]
    else:
        dots = np.full((n, 3), _UNLABELLED, dtype=np.uint8)
        dots[known] = colours[lab[known]]
    canvas = np.asarray(img).copy()
    ok = np.isfinite(coords[:, :2]).all(axis=1)
    # The largest classes first, so small ones stay visible on top.
    rank = np.full(n, -1, dtype=np.int64)
    if names:
        rank[known] = counts[lab[known]]
    order = np.argsort(-rank, kind="stable")
    order, layer = order[ok[order]], None
    if selected is not None and len(selected):
        rows = np.unique(np.asarray(selected, dtype=np.int64))
        rows = rows[(rows >= 0) & (rows < n)]
        rows = rows[ok[rows]]
        rim = np.broadcast_to(np.array(SELECTED_RGB, np.uint8), (len(rows), 3))
        layer = splat_dots(px[rows, 0], px[rows, 1], rim, width, height, dot + 4)
    layer = splat_dots(px[order, 0], px[order, 1], dots[order], width, height, dot, out=layer)
    drawn = layer[..., 3] > 0
    canvas[drawn] = layer[drawn][:, :3]
    img = Image.fromarray(canvas)
    draw = ImageDraw.Draw(img)
    if marker is not None and np.isfinite(np.asarray(marker, float)[:2]).all():
        mx, my = to_px(np.asarray(marker, dtype=np.float64)[:2])
        for r, colour in ((9, (255, 255, 255)), (7, (0, 0, 0))):
            draw.ellipse([mx - r, my - r, mx + r, my + r], outline=colour, width=3)
    x0, y = width - legend_w - 8, top
    for name, colour, count in entries:
        draw.rectangle([x0, y + 3, x0 + 10, y + 13], fill=colour)
        draw.text((x0 + 16, y), f"{name} ({count})", fill=_INK, font=font)
        y += 18
    if more:
        draw.text((x0, y), f"+ {more} more classes", fill=_INK, font=font)
    if not entries and colour_bar is not None:
        low, high, palette = colour_bar
        pal = np.asarray(palette, dtype=np.uint8).reshape(-1, 3)
        bar_top, bar_bottom = top + 20, min(height - 32, top + 260)
        steps = np.linspace(len(pal) - 1, 0, max(bar_bottom - bar_top, 1)).round().astype(int)
        for i, j in enumerate(steps):  # high at the top
            draw.line([x0, bar_top + i, x0 + 14, bar_top + i], fill=tuple(int(v) for v in pal[j]))
        draw.text((x0 + 20, bar_top - 6), f"{high:.3g}", fill=_INK, font=font)
        draw.text((x0 + 20, bar_bottom - 8), f"{low:.3g}", fill=_INK, font=font)
    return img
