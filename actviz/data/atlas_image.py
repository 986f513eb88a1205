"""The atlas as a picture: every image a dot at its projected place, coloured by class, with a
legend (PIL only). ``actviz atlas`` writes it as ``atlas.png``; :func:`class_colours` is the
one palette, so a window's scatter colours classes the same way.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

from actviz.io.export import _font, _text_w

__all__ = ["atlas_image", "class_colours", "splat_dots"]

# Ten well-separated hues first (Tableau 10), then evenly spread ones for more classes.
_BASE = (
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
)
_UNLABELLED = (110, 110, 110)
_INK = (30, 30, 30)
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
    """Draw points as ``dot`` x ``dot`` squares into an ``(height, width, 4)`` uint8 RGBA
    image (transparent where no point is); later points cover earlier ones.

    A few numpy assignments for any number of points (50,000 in about a millisecond): what
    :func:`atlas_image` draws with, and a fast way for a window to paint a large scatter as
    one image per frame.

    Parameters
    ----------
    x, y
        ``(N,)`` pixel coordinates (column, row; rounded); points outside are left out.
    rgba
        ``(N, 4)`` or ``(N, 3)`` uint8 colours (3 columns: opaque).
    width, height
        The image size.
    dot
        Side of each square in pixels.
    out
        An image to draw into (reused between frames); None: a new transparent one.
    """
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
    # One 32-bit word per pixel: a 1-D scatter is some 30 times faster than assigning RGBA
    # rows through a 2-D index.
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
) -> Image.Image:
    """Draw 2-D ``coords`` as dots, coloured by ``labels`` (indices into ``class_names``;
    -1 or no labels: grey), with a legend of the classes and their counts.

    Parameters
    ----------
    coords
        ``(N, 2)`` (only the first two columns are drawn).
    labels, class_names
        Each point's class and the class names.
    title
        A line above the plot.
    size
        ``(width, height)`` of the picture in pixels.
    marker
        ``(2,)`` a point to mark with a ring (e.g. the current input), or None.
    dot
        Side of each dot in pixels; None: larger for fewer points (5 up to 2,000, 4 up to
        20,000, else 3).
    """
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
    legend_w = 0
    if names:
        legend_w = min(width // 3, 24 + max(_text_w(draw, f"{s} (000000)", font) for s in names))
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
    colours = class_colours(len(names))
    rgb = np.empty((n, 3), dtype=np.uint8)
    rgb[:] = _UNLABELLED
    known = (lab >= 0) & (lab < len(names))
    rgb[known] = colours[lab[known]]
    canvas = np.asarray(img).copy()
    ok = np.isfinite(coords[:, :2]).all(axis=1)
    # The largest classes first, so small ones stay visible on top.
    counts = np.bincount(lab[known], minlength=len(names)) if names else np.zeros(0, int)
    rank = np.full(n, -1, dtype=np.int64)
    if names:
        rank[known] = counts[lab[known]]
    order = np.argsort(-rank, kind="stable")
    order = order[ok[order]]
    layer = splat_dots(px[order, 0], px[order, 1], rgb[order], width, height, dot)
    drawn = layer[..., 3] > 0
    canvas[drawn] = layer[drawn][:, :3]
    img = Image.fromarray(canvas)
    draw = ImageDraw.Draw(img)
    if marker is not None and np.isfinite(np.asarray(marker, float)[:2]).all():
        mx, my = to_px(np.asarray(marker, dtype=np.float64)[:2])
        for r, colour in ((9, (255, 255, 255)), (7, (0, 0, 0))):
            draw.ellipse([mx - r, my - r, mx + r, my + r], outline=colour, width=3)
    if names:
        x0, y = width - legend_w - 8, top
        shown = min(len(names), LEGEND_ROWS)
        for i in range(shown):
            draw.rectangle([x0, y + 3, x0 + 10, y + 13], fill=tuple(int(v) for v in colours[i]))
            draw.text((x0 + 16, y), f"{names[i]} ({counts[i]})", fill=_INK, font=font)
            y += 18
        if len(names) > shown:
            draw.text((x0, y), f"+ {len(names) - shown} more classes", fill=_INK, font=font)
            y += 18
        unlabelled = int((~known).sum())
        if unlabelled:
            draw.rectangle([x0, y + 3, x0 + 10, y + 13], fill=_UNLABELLED)
            draw.text((x0 + 16, y), f"no class ({unlabelled})", fill=_INK, font=font)
    return img
