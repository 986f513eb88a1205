"""Typesetting a capture's pictures (PIL only, no Qt): titled mosaics with colour bars and
channel numbers, bar charts, heat maps, saliency strips; for files and the HTML report alike."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from actviz.core.capture import Capture
from actviz.core.structures import first_tensor
from actviz.display import attribution, colormaps
from actviz.display.layer_views import LayerView, layer_view, magnitude_view
from actviz.display.mosaic import Mosaic, mosaic
from actviz.display.prepared import PreparedLayer, RunResult

_BG = (255, 255, 255)
_INK = (30, 30, 30)
_MIN_TILE_PX = 40  # small maps are upscaled so a person can see them
_MAX_IMAGE_PX = 2400
#: Channels per exported mosaic PNG; wider layers are written as several pages.
EXPORT_PAGE_CHANNELS = 1024
#: A picture is widened to show its whole title up to this width; a longer title is elided.
_MAX_TITLE_PX = 1800
#: Colour of mosaic padding (and of non-finite values) in exported PNGs.
MOSAIC_BACKGROUND = (235, 235, 235)
_HEAT_INK = (32, 33, 36)
_CELL = 14  # pixels per heat-map cell (at least)
_MAX_SIDE = 1400  # the longest side of a heat map body
_LABEL_CHARS = 16


def safe_name(layer: str) -> str:
    """A file-name-safe version of a qualified layer name ("" -> "model")."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", layer) or "model"


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def _text_w(draw: ImageDraw.ImageDraw, text: str, font: Any) -> int:
    left, _, right, _ = draw.textbbox((0, 0), text, font=font)
    return int(right - left)


def elide(draw: ImageDraw.ImageDraw, text: str, font: Any, room: int) -> str:
    """``text``, cut with "…" to fit ``room`` pixels."""
    if _text_w(draw, text, font) <= room:
        return text
    while text and _text_w(draw, text + "…", font) > room:
        text = text[:-1]
    return text + "…"


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.2e}"


def _framed(
    body: Image.Image, title: str, lo: float | str = "", hi: float | str = "", cmap: str = ""
) -> Image.Image:
    """Add a title above ``body`` and, with a ``cmap``, a colour bar with its range below."""
    font, small = _font(14), _font(11)
    bar_h, margin = 14, 8
    probe = ImageDraw.Draw(body)
    title_w = min(_text_w(probe, title, font), _MAX_TITLE_PX)
    width = max(body.width + 2 * margin, 320, title_w + 2 * margin)
    title = elide(probe, title, font, width - 2 * margin)
    height = body.height + 2 * margin + 22 + (margin + bar_h + 18 if cmap else 0)
    canvas = Image.new("RGB", (width, height), _BG)
    draw = ImageDraw.Draw(canvas)
    draw.text((margin, margin), title, fill=_INK, font=font)
    y = margin + 22
    canvas.paste(body, ((width - body.width) // 2 if cmap else margin, y))
    if not cmap:  # a bar chart: no colour bar, the chart at the left
        return canvas
    y += body.height + margin
    bar_w = width - 2 * margin
    ramp = colormaps.colorize(np.tile(np.linspace(0, 1, bar_w, dtype=np.float32), (bar_h, 1)), cmap)
    canvas.paste(Image.fromarray(ramp), (margin, y))
    draw.rectangle([margin, y, margin + bar_w - 1, y + bar_h - 1], outline=_INK)
    lo_s, hi_s = (v if isinstance(v, str) else _fmt(v) for v in (lo, hi))
    draw.text((margin, y + bar_h + 2), lo_s, fill=_INK, font=small)
    draw.text(
        (margin + bar_w - _text_w(draw, hi_s, small), y + bar_h + 2), hi_s, fill=_INK, font=small
    )
    return canvas


def tile_sheet(
    tiles: Sequence[Image.Image | None],
    size: tuple[int, int],
    cols: int,
    labels: Sequence[tuple[str, Any]] = (),
    label_h: int = 0,
    font: Any = None,
    gap: int = 6,
    margin: int = 6,
    bg: Any = _BG,
) -> Image.Image:
    """``tiles`` (``size`` ``(w, h)`` at most) in rows of ``cols``, ``gap`` pixels apart and
    ``margin`` from the edge, each under a ``(text, colour)`` label ``label_h`` high; None: blank."""
    (w, h), rows = size, math.ceil(len(tiles) / cols)
    width, height = cols * (w + gap) - gap, rows * (label_h + h + gap) - gap
    sheet = Image.new("RGB", (width + 2 * margin, height + 2 * margin), bg)
    draw = ImageDraw.Draw(sheet)
    for i, tile in enumerate(tiles):
        x, y = margin + i % cols * (w + gap), margin + i // cols * (label_h + h + gap) + label_h
        if i < len(labels):
            draw.text((x, y - label_h), labels[i][0], fill=labels[i][1], font=font)
        box = (x, y) if tile is not None else (x, y, x + w, y + h)
        sheet.paste(tile if tile is not None else MOSAIC_BACKGROUND, box)
    return sheet


def mosaic_rgb(m: Mosaic, cmap: str) -> np.ndarray:
    """The ``(H, W, 3)`` pixels of mosaic ``m`` in map ``cmap``, exactly as a panel paints them."""
    return colormaps.paint(m.indices, cmap, MOSAIC_BACKGROUND)


def _mosaic_png(m: Mosaic, cmap: str, numbers: bool = True) -> Image.Image:
    rgb = mosaic_rgb(m, cmap)
    longest = max(rgb.shape[:2])
    scale = max(
        1, min(math.ceil(_MIN_TILE_PX / max(m.tile_h, m.tile_w)), _MAX_IMAGE_PX // max(longest, 1))
    )
    img = Image.fromarray(rgb).resize((rgb.shape[1] * scale, rgb.shape[0] * scale), Image.NEAREST)
    step_y, step_x = (m.tile_h + m.pad) * scale, (m.tile_w + m.pad) * scale
    if numbers and min(step_x, step_y) >= 16:
        draw = ImageDraw.Draw(img)
        font = _font(max(8, min(12, step_y // 4)))
        channels = m.tile_channels  # the layer's channels, on any page and in any order
        for c in range(m.channels):
            y0, x0 = (c // m.cols) * step_y, (c % m.cols) * step_x
            label = str(channels[c])
            w = _text_w(draw, label, font)
            draw.rectangle([x0, y0, x0 + w + 3, y0 + 12], fill=(255, 255, 255))
            draw.text((x0 + 1, y0), label, fill=_INK, font=font)
    return img


def render_layer_png(
    view: LayerView,
    title: str,
    *,
    cmap: str = colormaps.DEFAULT_ACTIVATION_CMAP,
    normalize: str = "channel",
    max_channels: int | None = EXPORT_PAGE_CHANNELS,
    first_channel: int = 0,
    symmetric: bool = False,
) -> Image.Image:
    """Render one layer output's view (a gradient's is its ``|gradient|``) as a readable image in
    colour map ``cmap`` (:func:`layer_pictures` chooses it and ``symmetric`` as the window does):
    maps as a numbered mosaic with a colour bar, 1-D as bars, sequences as a heat map."""
    if view.kind == "maps":
        m = mosaic(
            view.data,
            normalize=normalize,
            first_channel=first_channel,
            max_channels=max_channels,
            symmetric=symmetric,
        )
        shown = (
            f"channels {m.first_channel}-{m.last_channel} of {m.total_channels}"
            if m.channels < m.total_channels
            else view.description
        )
        body = _mosaic_png(m, cmap)
        lo, hi = m.value_range
        if normalize == "channel":
            # Each tile has its own scale, so the bar can only say low/high within a tile.
            sym = ("-max|x|..+max|x|", "-tile max|x|", "+tile max|x|")
            scale, lo_s, hi_s = sym if symmetric else ("min..max", "tile min", "tile max")
            head = f"{title}  ({shown}; each tile scaled to its own {scale}; all data {_fmt(lo)}..{_fmt(hi)})"
            return _framed(body, head, lo_s, hi_s, cmap)
        lo_s, hi_s = m.scale_range
        return _framed(body, f"{title}  ({shown}; one shared scale)", lo_s, hi_s, cmap)
    if view.kind == "heatmap":
        m = mosaic(view.data[None], normalize="shared")
        body = _mosaic_png(m, cmap, numbers=False)
        return _framed(body, f"{title}  ({view.description})", *m.value_range, cmap)
    values = np.atleast_1d(view.data).astype(np.float32)
    color = (40, 110, 180)
    n = len(values)
    bar = max(1, min(40, 1000 // max(n, 1)))
    w, h = max(n * bar, 200), 220
    img = Image.new("RGB", (w + 50, h + 30), _BG)
    draw = ImageDraw.Draw(img)
    finite = values[np.isfinite(values)]
    lo = min(0.0, float(finite.min())) if finite.size else 0.0
    hi = max(0.0, float(finite.max())) if finite.size else 1.0
    span = (hi - lo) or 1.0
    zero_y = 10 + h * (hi - 0.0) / span
    small = _font(11)
    for i, v in enumerate(values):
        if not math.isfinite(float(v)):
            continue
        y = 10 + h * (hi - float(v)) / span
        x0 = 45 + i * bar
        draw.rectangle([x0, min(y, zero_y), x0 + max(bar - 2, 1), max(y, zero_y)], fill=color)
        if n <= 16:
            draw.text((x0, h + 14), str(i), fill=_INK, font=small)
    draw.line([45, zero_y, 45 + n * bar, zero_y], fill=_INK)
    draw.text((2, 4), _fmt(hi), fill=_INK, font=small)
    draw.text((2, h), _fmt(lo), fill=_INK, font=small)
    return _framed(img, f"{title}  ({view.description})")


def channel_pages(view: LayerView, page: int = EXPORT_PAGE_CHANNELS) -> list[tuple[int, str]]:
    """``(first channel, file-name suffix)`` of each mosaic page of a layer output's view: the first
    page keeps the plain name, the others name their channels (``_ch1024-2047``)."""
    total = int(view.data.shape[0]) if view.kind == "maps" else 0
    rest = range(page, total, page)
    return [(0, ""), *((first, f"_ch{first}-{min(first + page, total) - 1}") for first in rest)]


def pick_gradcam_layer(cap: Capture) -> str | None:
    """The Grad-CAM layer export uses by default: the one rule of
    :func:`actviz.display.attribution.default_gradcam_layer` (never a 1x1 layer)."""
    return attribution.default_gradcam_layer(cap, attribution.gradcam_candidates(cap))


def _heat_png(heat: np.ndarray, image: np.ndarray | None, title: str) -> Image.Image:
    cmap = colormaps.OVERLAY_CMAP  # the window's overlay colours
    if image is not None:
        img = Image.fromarray(colormaps.overlay(image, heat, alpha=0.5, cmap=cmap))
    else:
        img = Image.fromarray(colormaps.colorize(heat, cmap))
    if max(img.size) < 256:
        k = math.ceil(256 / max(img.size))
        img = img.resize((img.width * k, img.height * k), Image.BILINEAR)
    return _framed(img, title, 0.0, 1.0, cmap)


def layer_pictures(
    name: str,
    kind: str,
    layer: PreparedLayer | None,
    grad: torch.Tensor | None,
    cmap: str,
    normalize: str,
    *,
    title: str = "",
    symmetric: bool | None = None,
) -> list[tuple[str, Image.Image]]:
    """A captured layer's pictures of its activations (``kind="features"``) or ``|gradient|``
    (``"grad"``, from ``grad`` when ``layer`` has no view of it; [] without one), as
    :func:`write_pages` saves them and the HTML report embeds them, with each one's file-name
    suffix: per page ``""`` (or ``"_ch1024-2047"``) for the readable picture and, for maps, that
    plus ``"_1x"`` for one pixel per value."""
    gradient = kind == "grad"
    view = None if layer is None else layer.grad_view if gradient else layer.view
    if gradient and view is None and grad is not None:  # its output is not a tensor: no view
        view = magnitude_view(layer_view(grad))
    if view is None or gradient and grad is None:
        return []
    default = f"{name or '(model)'} · {getattr(layer, 'module_type', '')}"
    title = title or (f"|d target / d {name or 'output'}|" if gradient else default)
    pictures = []
    # As the window under "auto": signed activations diverging about 0, the rest sequential.
    if symmetric is None:  # the window's rule (actviz.display.colormaps.painting)
        signed = view.kind == "maps" and bool(view.signed)
        painted, symmetric = colormaps.painting(cmap, signed=signed, gradient=gradient)
    else:
        painted = colormaps.resolve(cmap, signed=symmetric, gradient=gradient)
    for first, suffix in channel_pages(view):
        # The readable picture and the one-pixel-per-value mosaic of one page, scaled alike.
        page = dict(normalize=normalize, first_channel=first, symmetric=symmetric)
        pictures.append((suffix, render_layer_png(view, title, cmap=painted, **page)))
        if view.kind == "maps":
            m = mosaic(view.data, max_channels=EXPORT_PAGE_CHANNELS, **page)
            pictures.append((f"{suffix}_1x", Image.fromarray(mosaic_rgb(m, painted))))
    return pictures


def _short(label: str) -> str:
    text = str(label).replace("\n", "\\n")
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


def _cell(count: int, least: int) -> int:
    """Pixels per cell: short sides grow to about 240 px, long ones shrink to :data:`_MAX_SIDE`."""
    count = max(count, 1)
    return max(least, min(max(_CELL, 240 // count), 40, _MAX_SIDE // count))


def heat_png(
    heat: np.ndarray,
    rows: Sequence[str],
    *,
    title: str,
    cols: Sequence[str] | None = None,
    bars: np.ndarray | None = None,
    gradient: bool = False,
    symmetric: bool | None = None,
    levels: tuple[float, float] | None = None,
    bars_label: str = "norm",
) -> Image.Image:
    """A labelled heat map: ``rows`` beside it, ``cols`` under it (rotated), one bar per row on the
    right (``bars``, headed ``bars_label`` and their largest value), title and range above."""
    heat = np.asarray(heat, dtype=np.float32)
    if symmetric is None:
        symmetric = bool((heat < 0).any())
    lo, hi = levels or colormaps.heat_levels(heat, symmetric=symmetric)
    cmap = colormaps.resolve(colormaps.AUTO, signed=symmetric, gradient=gradient)
    scaled = (heat - lo) / (hi - lo) if hi > lo else np.zeros_like(heat)
    rgb = colormaps.colorize(np.clip(scaled, 0, 1), cmap)
    n_rows, n_cols = heat.shape
    cell_h, cell_w = _cell(n_rows, 3), _cell(n_cols, 2)
    body = Image.fromarray(rgb).resize((n_cols * cell_w, n_rows * cell_h), Image.NEAREST)
    font, small = _font(13), _font(11)
    probe = ImageDraw.Draw(body)
    step = max(1, -(-n_rows * 12 // max(body.height, 1)))  # labels never overlap
    row_labels = [(i, _short(rows[i])) for i in range(0, n_rows, step)]
    left = 8 + max((int(probe.textlength(t, font=small)) for _, t in row_labels), default=0)
    bars_w = 120 if bars is not None else 0
    col_h = 0
    col_labels: list[tuple[int, str]] = []
    if cols is not None:
        cstep = max(1, -(-n_cols * 12 // max(body.width, 1)))
        col_labels = [(j, _short(cols[j])) for j in range(0, n_cols, cstep)]
        col_h = 8 + max((int(probe.textlength(t, font=small)) for _, t in col_labels), default=0)
    top = 44
    width = left + body.width + (bars_w + 16 if bars_w else 8) + 8
    height = top + body.height + col_h + 10
    scale_line = f"{cmap}: {lo:.4g} .. {hi:.4g}"
    # Widened so the title and the range line are read whole, never cut by the edge.
    heads = [(title, font), (scale_line, small)]
    text_w = max(int(probe.textlength(t, font=f)) for t, f in heads)
    width = max(width, 360, min(text_w, _MAX_TITLE_PX) + 16)
    canvas = Image.new("RGB", (width, height), _BG)
    draw = ImageDraw.Draw(canvas)
    for (text, f), y in zip(heads, (6, 24), strict=True):
        draw.text((8, y), elide(draw, text, f, width - 16), fill=_HEAT_INK, font=f)
    x0 = left + 4
    canvas.paste(body, (x0, top))
    for i, text in row_labels:
        x = x0 - 4 - int(draw.textlength(text, font=small))
        draw.text((x, top + i * cell_h + (cell_h - 11) // 2), text, fill=_HEAT_INK, font=small)
    for j, text in col_labels:
        w = int(draw.textlength(text, font=small)) + 2
        label = Image.new("RGB", (w, 13), _BG)
        ImageDraw.Draw(label).text((0, 0), text, fill=_HEAT_INK, font=small)
        rotated = label.rotate(90, expand=True)
        canvas.paste(rotated, (x0 + j * cell_w + (cell_w - 13) // 2, top + body.height + 4))
    if bars is not None:
        values = np.asarray(bars, dtype=np.float32)
        peak = float(np.nanmax(values)) if values.size and np.nanmax(values) > 0 else 1.0
        bx = x0 + body.width + 12
        color = (224, 123, 57) if gradient else (59, 110, 165)
        for i, v in enumerate(values):
            y = top + i * cell_h
            length = int(round(bars_w * max(float(v), 0.0) / peak))
            draw.rectangle([bx, y + 1, bx + max(length, 1), y + cell_h - 2], fill=color)
        draw.text((bx, top - 14), f"{bars_label} (max {peak:.3g})", fill=_HEAT_INK, font=small)
    return canvas


def attribution_images(
    cap: Capture, prepared: RunResult, image: np.ndarray | None, gradcam_layer: str | None = None
) -> tuple[dict[str, tuple[Image.Image, np.ndarray]], dict[str, Any]]:
    """A prepared capture's saliency, Grad-CAM, rollout: ``({name: (picture, values)}, notes)``."""
    pictures: dict[str, tuple[Image.Image, np.ndarray]] = {}
    notes: dict[str, Any] = {}
    if (first_grad := first_tensor(cap.input_grads)) is not None and first_grad.dim() >= 2:
        if (sal := prepared.saliency) is None:  # not image-shaped: the raw strip
            sal = attribution.saliency(first_grad)
        # A 1-D input gives a strip, not a picture: overlay only image-shaped saliency.
        backdrop = image if image is not None and sal.shape == image.shape[:2] else None
        pictures["saliency"] = (_heat_png(sal, backdrop, "saliency |d target / d input|"), sal)
    elif (tokens := prepared.token_saliency) is not None:
        values = np.asarray(tokens.values, dtype=np.float32)
        # "x", not "×": the pictures' default font has no such glyph.
        title = f"saliency per token: |gradient x input embedding| at {tokens.layer}"
        how = {"gradient": True, "symmetric": False, "bars_label": "saliency"}
        how["levels"] = (0.0, tokens.peak)
        strip = heat_png(values[:, None], tokens.tokens, title=title, bars=values, **how)
        pictures["saliency"] = (strip, np.asarray(tokens.values))
        notes["saliency_of"] = f"saliency per token: |gradient × input embedding| at {tokens.layer}"
    # The window's default (ViT token layers included) when the input is an image.
    cam_layer = gradcam_layer or prepared.gradcam_default or pick_gradcam_layer(cap)
    if cam_layer is not None and cam_layer in cap and cap[cam_layer].grad is not None:
        rec = cap[cam_layer]
        size = image.shape[:2] if image is not None else None
        try:
            cam = prepared.grad_cams.get(cam_layer)
            cam = attribution.grad_cam(rec.tensor, rec.grad, size=size) if cam is None else cam
        except ValueError as exc:
            notes["gradcam_error"] = str(exc)
        else:
            pictures["gradcam"] = (_heat_png(cam, image, f"Grad-CAM at {cam_layer}"), cam)
            notes["gradcam_layer"] = cam_layer
    if (rollout := prepared.rollout) is not None:
        pictures["rollout"] = (_heat_png(rollout, image, "attention rollout"), rollout)
    return pictures, notes
