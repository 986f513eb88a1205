"""Writing a capture to disk: readable PNGs, raw arrays and a summary.json.

Per layer: a feature-map mosaic PNG (colormap, channel numbers, colour bar), a gradient-magnitude
PNG in the same layout, the same mosaics at one pixel per value (``_1x.png``: exactly the pixels a
window panel paints for that layer, colour map and normalisation), and the raw arrays (``.npz``).
Everything shown is prepared by :func:`actviz.display.prepare.prepare`, the window's own path. For the model: saliency and Grad-CAM
overlaid on the input image (a text input: |gradient x input embedding| per token, as a strip
and as ``token_saliency.json`` / ``.csv``), and ``summary.json`` (shapes, statistics,
prediction, the target with its name and how it was chosen, the edits the run was made with,
warnings, the files written). No Qt here: the GUI and the CLI both call :func:`export_capture`.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from actviz.core.capture import Capture, LayerRecord
from actviz.core.structures import first_tensor
from actviz.core.targets import resolve_target
from actviz.display import colormaps
from actviz.display.attribution import (
    TokenSaliency,
    default_gradcam_layer,
    grad_cam,
    input_embedding,
    spatial_layers,
    token_input,
)
from actviz.display.layer_views import LayerView, layer_view, magnitude_view
from actviz.display.logit_lens import token_texts
from actviz.display.mosaic import Mosaic, mosaic
from actviz.display.prepare import prepare, symmetric_for
from actviz.display.prepared import DisplaySpec, PreparedLayer, RunResult
from actviz.io.errors import ActvizError
from actviz.io.files import check_out_folder
from actviz.io.reproduce import RunSource, write_reproduce
from actviz.io.token_export import sequence_inputs, write_sequence_views

__all__ = [
    "EXPORT_PAGE_CHANNELS",
    "attribution_images",
    "channel_pages",
    "export_capture",
    "layer_page_images",
    "pick_gradcam_layer",
    "prepare_export",
    "render_layer_png",
    "safe_name",
    "target_record",
    "token_saliency_picture",
    "with_input_embedding",
    "write_pages",
    "write_token_saliency",
]

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]

_BG = (255, 255, 255)
_INK = (30, 30, 30)
_MIN_TILE_PX = 40  # small maps are upscaled so a person can see them
_MAX_IMAGE_PX = 2400
#: Channels per exported mosaic PNG; wider layers are written as several pages.
EXPORT_PAGE_CHANNELS = 1024
#: A picture is widened to show its whole title up to this width; a longer title is elided.
_MAX_TITLE_PX = 1800


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


def _fit_title(
    draw: ImageDraw.ImageDraw, title: str, font: Any, body_w: int, margin: int
) -> tuple[int, str]:
    """The picture's width (the body's, widened so the title fits, at least 320 px) and the
    title to draw: whole, or cut with "…" past :data:`_MAX_TITLE_PX`."""
    width = max(
        body_w + 2 * margin, 320, min(_text_w(draw, title, font), _MAX_TITLE_PX) + 2 * margin
    )
    room = width - 2 * margin
    if _text_w(draw, title, font) > room:
        while title and _text_w(draw, title + "…", font) > room:
            title = title[:-1]
        title += "…"
    return width, title


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.2e}"


def _framed(
    body: Image.Image, title: str, lo: float | str, hi: float | str, cmap: str
) -> Image.Image:
    """Add a title above and a colour bar with its value range below ``body``."""
    font, small = _font(14), _font(11)
    bar_h, margin = 14, 8
    width, title = _fit_title(ImageDraw.Draw(body), title, font, body.width, margin)
    height = body.height + 3 * margin + 22 + bar_h + 18
    canvas = Image.new("RGB", (width, height), _BG)
    draw = ImageDraw.Draw(canvas)
    draw.text((margin, margin), title, fill=_INK, font=font)
    y = margin + 22
    canvas.paste(body, ((width - body.width) // 2, y))
    y += body.height + margin
    bar_w = width - 2 * margin
    ramp = colormaps.colorize(np.tile(np.linspace(0, 1, bar_w, dtype=np.float32), (bar_h, 1)), cmap)
    canvas.paste(Image.fromarray(ramp), (margin, y))
    draw.rectangle([margin, y, margin + bar_w - 1, y + bar_h - 1], outline=_INK)
    lo_s = lo if isinstance(lo, str) else _fmt(lo)
    hi_s = hi if isinstance(hi, str) else _fmt(hi)
    draw.text((margin, y + bar_h + 2), lo_s, fill=_INK, font=small)
    draw.text(
        (margin + bar_w - _text_w(draw, hi_s, small), y + bar_h + 2), hi_s, fill=_INK, font=small
    )
    return canvas


#: Colour of mosaic padding (and of non-finite values) in exported PNGs.
MOSAIC_BACKGROUND = (235, 235, 235)


def mosaic_rgb(m: Mosaic, cmap: str) -> np.ndarray:
    """The ``(H, W, 3)`` pixels of mosaic ``m`` in map ``cmap``, exactly as a panel paints them
    (padding in :data:`MOSAIC_BACKGROUND`)."""
    return colormaps.paint(m.indices, cmap, MOSAIC_BACKGROUND)


def _mosaic_png(m: Mosaic, title: str, cmap: str, numbers: bool = True) -> Image.Image:
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


def _bars_png(values: np.ndarray, title: str, color: tuple[int, int, int]) -> Image.Image:
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
    return _titled(img, title)


def _titled(body: Image.Image, title: str) -> Image.Image:
    font = _font(14)
    width, title = _fit_title(ImageDraw.Draw(body), title, font, body.width, 8)
    canvas = Image.new("RGB", (width, body.height + 38), _BG)
    ImageDraw.Draw(canvas).text((8, 8), title, fill=_INK, font=font)
    canvas.paste(body, (8, 30))
    return canvas


def render_layer_png(
    tensor: torch.Tensor | LayerView,
    title: str,
    *,
    cmap: str = colormaps.DEFAULT_ACTIVATION_CMAP,
    normalize: str = "channel",
    magnitude: bool = False,
    max_channels: int | None = EXPORT_PAGE_CHANNELS,
    first_channel: int = 0,
    symmetric: bool | None = None,
) -> Image.Image:
    """Render one layer output (or gradient, with ``magnitude=True``) as a readable image.

    Maps become a channel mosaic with channel numbers and a colour bar (``max_channels`` of
    them from ``first_channel``: see :func:`channel_pages`); 1-D outputs a bar chart;
    sequences a heat map; scalars a bar of one. ``tensor`` may be a prepared
    :class:`~actviz.display.layer_views.LayerView` (of sample 0 of the output). ``cmap`` may be
    "auto" (one map per layer, :func:`actviz.display.colormaps.resolve`); ``symmetric``
    normalises about 0 (None: as "auto" does, for a signed activation).
    """
    view = tensor if isinstance(tensor, LayerView) else layer_view(tensor)
    if magnitude and not isinstance(tensor, LayerView):
        view = magnitude_view(view)
    if symmetric is None:
        symmetric = not magnitude and symmetric_for(cmap, view)
    if view.kind == "maps":
        cmap = colormaps.resolve(cmap, signed=symmetric, gradient=magnitude)
        m = page_mosaic(view, normalize, first_channel, max_channels, symmetric=symmetric)
        shown = (
            f"channels {m.first_channel}-{m.last_channel} of {m.total_channels}"
            if m.channels < m.total_channels
            else view.description
        )
        body = _mosaic_png(m, title, cmap)
        lo, hi = m.value_range
        if normalize == "channel":
            # Each tile has its own scale, so the bar can only say low/high within a tile.
            if symmetric:
                head = f"{title}  ({shown}; each tile scaled to its own -max|x|..+max|x|; all data {_fmt(lo)}..{_fmt(hi)})"
                return _framed(body, head, "-tile max|x|", "+tile max|x|", cmap)
            head = f"{title}  ({shown}; each tile scaled to its own min..max; all data {_fmt(lo)}..{_fmt(hi)})"
            return _framed(body, head, "tile min", "tile max", cmap)
        lo_s, hi_s = m.scale_range
        return _framed(body, f"{title}  ({shown}; one shared scale)", lo_s, hi_s, cmap)
    cmap = colormaps.resolve(cmap, gradient=magnitude)
    if view.kind == "heatmap":
        m = mosaic(view.data[None], normalize="shared")
        body = _mosaic_png(m, title, cmap, numbers=False)
        return _framed(body, f"{title}  ({view.description})", *m.value_range, cmap)
    values = np.atleast_1d(view.data).astype(np.float32)
    color = (200, 80, 40) if magnitude else (40, 110, 180)
    return _bars_png(values, f"{title}  ({view.description})", color)


def page_mosaic(
    view: LayerView,
    normalize: str = "channel",
    first_channel: int = 0,
    max_channels: int | None = EXPORT_PAGE_CHANNELS,
    *,
    symmetric: bool = False,
) -> Mosaic:
    """The exported mosaic of a page of ``view``'s channels: the window's mosaic (same function,
    full resolution) with pages of ``max_channels``."""
    return mosaic(
        view.data,
        normalize=normalize,
        first_channel=first_channel,
        max_channels=max_channels,
        symmetric=symmetric,
    )


def channel_pages(
    tensor: torch.Tensor | LayerView, page: int = EXPORT_PAGE_CHANNELS
) -> list[tuple[int, str]]:
    """``(first channel, file-name suffix)`` of each mosaic page of a layer output.

    Maps with more than ``page`` channels are written as several PNGs: the first keeps the
    plain name, the others say their channels (``_ch1024-2047``). Other outputs: one page.
    """
    view = tensor if isinstance(tensor, LayerView) else layer_view(tensor)
    total = int(view.data.shape[0]) if view.kind == "maps" else 0
    pages = [(0, "")]
    for first in range(page, total, page):
        pages.append((first, f"_ch{first}-{min(first + page, total) - 1}"))
    return pages


def pick_gradcam_layer(cap: Capture) -> str | None:
    """The Grad-CAM layer export uses by default: the one rule of
    :func:`actviz.display.attribution.default_gradcam_layer` (never a 1x1 layer)."""
    return default_gradcam_layer(cap, spatial_layers(cap))


def _heat_png(heat: np.ndarray, image: np.ndarray | None, title: str) -> Image.Image:
    cmap = colormaps.OVERLAY_CMAP  # the window's overlay colours
    if image is not None:
        rgb = colormaps.overlay(image, heat, alpha=0.5, cmap=cmap)
    else:
        rgb = colormaps.colorize(heat, cmap)
    img = Image.fromarray(rgb)
    if max(img.size) < 256:
        k = math.ceil(256 / max(img.size))
        img = img.resize((img.width * k, img.height * k), Image.BILINEAR)
    return _framed(img, title, 0.0, 1.0, cmap)


def write_pages(
    out: Path,
    base: str,
    kind: str,
    layer: PreparedLayer | torch.Tensor,
    cmap: str,
    entry: dict[str, Any],
    title: str | None = None,
    normalize: str | None = None,
    *,
    symmetric: bool | None = None,
    stem: str | None = None,
) -> list[Path]:
    """Write one layer's activation (``kind="features"``) or |gradient| (``"grad"``) pages:
    the readable PNG and, for maps, the one-pixel-per-value ``_1x.png`` of the same mosaic
    (the pictures of :func:`layer_page_images`).

    ``symmetric`` overrides the window's rule (a difference is always symmetric about 0) and
    ``stem`` the file names' ``<base>_<kind>`` (``actviz compare``'s ``diff_<layer>``)."""
    written = []
    stem = stem or f"{base}_{kind}"
    for suffix, picture in layer_page_images(
        base, kind, layer, cmap, title, normalize, symmetric=symmetric
    ):
        path = out / f"{stem}{suffix}.png"
        picture.save(path)
        written.append(path)
    entry["files"] += [p.name for p in written]
    return written


def layer_page_images(
    base: str,
    kind: str,
    layer: PreparedLayer | torch.Tensor,
    cmap: str,
    title: str | None = None,
    normalize: str | None = None,
    *,
    symmetric: bool | None = None,
) -> list[tuple[str, Image.Image]]:
    """The pictures :func:`write_pages` saves (and the HTML report embeds), with each one's
    file-name suffix: per page ``""`` (or ``"_ch1024-2047"``) for the readable picture and,
    for maps, that plus ``"_1x"`` for one pixel per value."""
    if isinstance(layer, PreparedLayer):
        view = layer.view if kind == "features" else layer.grad_view
        module_type = layer.module_type
    else:  # a gradient whose layer has no view (its output is not a tensor)
        view, module_type = magnitude_view(layer_view(layer)), ""
    assert view is not None
    if normalize is None:
        normalize = "channel" if kind == "features" else "shared"
    if title is None:
        name = layer.name if isinstance(layer, PreparedLayer) else base
        title = f"{name or '(model)'} · {module_type}"
    pictures = []
    gradient = kind == "grad"
    # The window's per-layer choice under "auto": signed activations symmetric about 0 in the
    # diverging map, the others (and |gradient|) in a sequential one.
    if symmetric is None:  # the window's rule (actviz.display.colormaps.painting)
        signed = view.kind == "maps" and bool(view.signed)
        painted, symmetric = colormaps.painting(cmap, signed=signed, gradient=gradient)
    else:
        painted = colormaps.resolve(cmap, signed=symmetric, gradient=gradient)
    for first, suffix in channel_pages(view):
        pictures.append(
            (
                suffix,
                render_layer_png(
                    view,
                    title,
                    cmap=painted,
                    normalize=normalize,
                    first_channel=first,
                    symmetric=symmetric,
                ),
            )
        )
        if view.kind == "maps":
            m = page_mosaic(view, normalize, first, symmetric=symmetric)
            pictures.append((f"{suffix}_1x", Image.fromarray(mosaic_rgb(m, painted))))
    return pictures


def _record_arrays(recs: Sequence[LayerRecord]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for rec in recs:
        prefix = "" if len(recs) == 1 else f"call{rec.call_index}_"
        if rec.tensor is not None:
            arrays[f"{prefix}output"] = (
                rec.tensor.float().numpy() if rec.tensor.is_floating_point() else rec.tensor.numpy()
            )
        if rec.grad is not None:
            arrays[f"{prefix}grad_output"] = rec.grad.float().numpy()
        for i, g in enumerate(rec.grad_inputs or ()):
            if g is not None:
                arrays[f"{prefix}grad_input{i}"] = g.float().numpy()
    return arrays


def _edit_rows(edits: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The edits a capture ran with, one row each, as summary.json records them."""
    rows = []
    for layer, items in edits.items():
        for edit in items:
            row: dict[str, Any] = {"layer": layer, "kind": edit.kind, "edit": edit.describe()}
            row["channels"] = list(edit.channels) if edit.channels is not None else None
            for key in ("factor", "min", "max", "call", "dim"):
                if getattr(edit, key) is not None:
                    row[key] = getattr(edit, key)
            rows.append(row)
    return rows


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, tuple):
        return list(v)
    return v


def export_capture(
    cap: Capture,
    out_dir: str | Path,
    *,
    image: np.ndarray | None = None,
    categories: list[str] | None = None,
    model_name: str = "",
    input_name: str = "",
    input_path: str = "",
    frame: int | None = None,
    perturbation: Mapping[str, Any] | None = None,
    cmap: str = colormaps.DEFAULT_ACTIVATION_CMAP,
    normalize: str = "channel",
    gradcam_layer: str | None = None,
    layers: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
    source: RunSource | None = None,
    tokens: Sequence[str] | None = None,
    model: Any = None,
    tokenizer: Any = None,
    logit_lens: Any = None,
    layout: Any = None,
    token_saliency: TokenSaliency | None = None,
    layer_writers: Sequence[Callable[[Path, str, PreparedLayer, DisplaySpec], list[Path]]] = (),
) -> list[Path]:
    """Write everything about ``cap`` to ``out_dir``.

    Parameters
    ----------
    cap
        The capture.
    out_dir
        Folder to write into (created if missing).
    image
        ``(H, W, 3)`` uint8 input image for the saliency and Grad-CAM overlays.
    categories
        Class names for the prediction in summary.json.
    model_name, input_name
        Recorded in summary.json (``input_name``: the file of the frame that ran, e.g.
        ``"frame_007.png"``, not the opened input's when a sequence plays).
    input_path
        The input's full path, recorded as ``"input_path"`` ("" when not a file).
    frame
        Index of the frame in its sequence (0 = first), recorded as ``"frame"``, and as
        ``"frame_number"`` counted from 1 as the window shows it ("frame 67/200" is index 66);
        None: not a sequence.
    perturbation
        Every perturbation applied to the input with its value, recorded as
        ``"perturbation"`` (``{}``: the input as opened), e.g. ``{"noise": 0.2}``.
    cmap
        Colormap of the feature-map PNGs; "auto": per layer as the window does (diverging and
        symmetric about 0 for signed activations, sequential otherwise).
    normalize
        ``"channel"`` (each tile its own min..max) or ``"shared"`` normalisation of the
        feature-map mosaics (|gradient| mosaics always share one range).
    gradcam_layer
        Layer for Grad-CAM; default: the last captured layer with a spatial output.
    layers
        Subset of ``cap.names`` to write (default all).
    progress
        Called as ``progress(done, total, what)`` while writing.
    source
        How the model and input were opened, for ``reproduce.py``
        (:mod:`actviz.io.reproduce`), which rebuilds the run, its target and its edits
        (``cap.edits``); None: the script says the model is unknown.
    tokens, model, tokenizer, logit_lens, layout
        Sequence views (:mod:`actviz.io.token_export`): the input's token strings; the model
        (its ViT patch layout, attention maps when ``cap.extra`` has none, the logit lens);
        the tokenizer (lens strings); a logit lens computed already and a ViT patch layout
        (the window's, which passes no model: its capture worker may be using it).
    token_saliency
        A text input's saliency per token computed already (the window's result holds it);
        without it, it is computed with ``model`` when the capture recorded the model's input
        embedding with its gradient (:func:`actviz.display.attribution.token_saliency`).
        Written as ``saliency.png`` (a strip of the tokens), ``saliency.npy``,
        ``token_saliency.json`` and ``token_saliency.csv``.
    layer_writers
        More pictures per layer (plugins' layer views):
        ``write(out, base, prepared_layer, spec) -> files written``.

    Returns
    -------
    list of Path
        Every file written, summary.json last.
    """
    out = check_out_folder(out_dir)
    names = list(layers) if layers is not None else list(cap.names)
    missing = [n for n in names if n not in cap.names]
    if missing:
        # A TorchScript model, a layer that did not run: the capture says why in a warning.
        why = f" ({cap.warnings[0]})" if cap.warnings else ""
        shown = ", ".join(repr(n) for n in missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise ActvizError(f"{shown} {'was' if len(missing) == 1 else 'were'} not captured{why}")
    out.mkdir(parents=True, exist_ok=True)
    cap, prepared = prepare_export(
        cap,
        names,
        image=image,
        categories=categories,
        cmap=cmap,
        normalize=normalize,
        gradcam_layer=gradcam_layer,
        tokens=tokens,
        model=model,
        tokenizer=tokenizer,
        logit_lens=logit_lens,
        layout=layout,
        token_saliency=token_saliency,
    )
    written: list[Path] = []
    layer_summary: dict[str, Any] = {}
    npz_files: dict[str, str] = {}  # for reproduce.py
    total = len(names) + 1
    for i, name in enumerate(names):
        if progress is not None:
            progress(i, total, name)
        recs = cap.calls(name)
        rec = recs[0]
        base = safe_name(name)
        entry: dict[str, Any] = {"type": rec.module_type, "calls": len(recs), "files": []}
        layer = prepared.layers.get(name)
        if layer is not None and layer.view is not None:
            entry.update(
                {k: _jsonable(v) for k, v in layer.stats.items() if k not in ("name", "type")}
            )
            written += write_pages(out, base, "features", layer, cmap, entry, normalize=normalize)
            for write in layer_writers:
                extra = write(out, base, layer, prepared.spec)
                written += extra
                entry["files"] += [p.name for p in extra]
        if rec.grad is not None:
            grad_layer = layer if layer is not None and layer.grad_view is not None else None
            # Painted and scaled as the window paints |gradient| under the same choice.
            written += write_pages(
                out,
                base,
                "grad",
                grad_layer or rec.grad,
                cmap,
                entry,
                title=f"|d target / d {name or 'output'}|",
                normalize=normalize,
            )
        arrays = _record_arrays(recs)
        if arrays:
            npz = out / f"{base}.npz"
            np.savez_compressed(npz, **arrays)
            written.append(npz)
            entry["files"].append(npz.name)
            npz_files[name] = npz.name
        layer_summary[name] = entry
    if progress is not None:
        progress(len(names), total, "saliency and Grad-CAM")
    pictures, attribution = attribution_images(cap, prepared, image, gradcam_layer)
    for key in ("saliency", "gradcam"):
        written += _save_attribution(out, key, pictures, attribution)
    target = target_record(cap, prepared, categories)
    if prepared.token_saliency is not None:
        token_files = write_token_saliency(out, prepared.token_saliency, target["text"])
        attribution["token_saliency"] = [p.name for p in token_files]
        written += token_files
    written += write_reproduce(out, cap, source, names, npz_files)
    sequence_files, sequence_summary = write_sequence_views(prepared, out, names)
    written += sequence_files
    written += _save_attribution(out, "rollout", pictures, attribution)
    if image is not None:
        inp = out / "input.png"
        Image.fromarray(np.ascontiguousarray(image)).save(inp)
        written.append(inp)
    summary = {
        "model": model_name,
        "input": input_name,
        "input_path": input_path,
        "frame": frame,
        "frame_number": frame + 1 if frame is not None else None,
        "perturbation": dict(perturbation or {}),
        "input_shapes": _shapes(cap.inputs),
        "output_shapes": _shapes(cap.output),
        "target": target,
        "prediction": [
            {"index": i, "label": label, "probability": p} for i, label, p in prepared.predictions
        ],
        # The capture ran with its edits: its prediction (and every map) is the edited run's.
        "prediction_of": "the edited run (the edits listed under 'edits' applied)"
        if cap.edits
        else "the run without edits",
        "edits": _edit_rows(cap.edits),
        "layers": layer_summary,
        "attribution": attribution,
        **sequence_summary,
        "warnings": list(cap.warnings),
        "elapsed_s": cap.elapsed_s,
        "files": [p.name for p in written],
    }
    path = out / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=_jsonable))
    written.append(path)
    if progress is not None:
        progress(total, total, "done")
    return written


def prepare_export(
    cap: Capture,
    names: Sequence[str],
    *,
    image: np.ndarray | None = None,
    categories: Sequence[str] | None = None,
    cmap: str = colormaps.DEFAULT_ACTIVATION_CMAP,
    normalize: str = "channel",
    gradcam_layer: str | None = None,
    tokens: Sequence[str] | None = None,
    model: Any = None,
    tokenizer: Any = None,
    logit_lens: Any = None,
    layout: Any = None,
    token_saliency: TokenSaliency | None = None,
) -> tuple[Capture, RunResult]:
    """The capture (with its sequence inputs) and its preparation for export and the HTML
    report: the window's own path (exact variant) for layers ``names`` (see
    :func:`export_capture` for the arguments).

    Raises
    ------
    ValueError
        An unknown normalisation or colour map.
    """
    # The window's own preparation (exact variant): statistics, views, Grad-CAM layer, saliency.
    if normalize not in ("channel", "shared"):
        raise ValueError(f"normalize must be 'channel' or 'shared', not {normalize!r}")
    if cmap != colormaps.AUTO and cmap not in colormaps.COLORMAPS:
        raise ValueError(
            f"unknown colour map {cmap!r}; choose from "
            f"{', '.join([colormaps.AUTO, *colormaps.COLORMAPS])}"
        )
    spec = DisplaySpec(
        layers=tuple(names),
        normalize=normalize,
        image=image,
        categories=tuple(categories) if categories else None,
        gradcam_layer=gradcam_layer,
        colormap=cmap,
    )
    cap, spec = sequence_inputs(
        cap, spec, tokens=tokens, model=model, tokenizer=tokenizer, layout=layout
    )
    prepared = prepare(cap, spec, eager_hist=(), model=model)
    if prepared.logit_lens is None and logit_lens is not None:
        prepared = replace(prepared, logit_lens=logit_lens)
    if prepared.token_saliency is None and token_saliency is not None:
        prepared = replace(prepared, token_saliency=token_saliency)
    return cap, prepared


def target_record(
    cap: Capture, prepared: RunResult, categories: Sequence[str] | None = None
) -> dict[str, Any]:
    """What ``summary.json`` says of the target: the class or token index, its name (a class
    name, a token's text), the window's sentence for it, its value, and how it was chosen.

    ``chosen`` is ``"top prediction"`` when the target is the output's default (the one rule
    of :func:`actviz.core.targets.resolve_target`, asked again of the capture's output),
    ``"picked"`` for a class, token or detection named by the user, ``"custom"`` for a target
    function and ``"none"`` when the run had no target.
    """
    index = cap.target_index
    kind = prepared.prediction_kind
    label = None
    if index is not None and categories and 0 <= index < len(categories):
        label = str(categories[index])
    elif index is not None and kind == "token":
        label = token_texts(prepared.spec.tokenizer, [index])[0]
    return {
        "description": cap.target_description,
        "text": prepared.target_text,
        "kind": kind,
        "index": index,
        "label": label,
        "value": _jsonable(cap.target_value) if cap.target_value is not None else None,
        "chosen": _how_chosen(cap),
    }


def _how_chosen(cap: Capture) -> str:
    if cap.target_value is None:
        return "none"
    if cap.target_description.startswith("custom target"):
        return "custom"
    try:
        default = resolve_target(cap.output, None)
    except (ValueError, TypeError, RuntimeError):
        return "picked"  # the output has no default target, so this one was named
    # A named target reads "class 7", the default "top-1 logit (class 7)": the same index
    # picked by the user still counts as picked.
    return "top prediction" if default.description == cap.target_description else "picked"


def with_input_embedding(
    model: torch.nn.Module, inputs: Any, layers: Sequence[str] | None
) -> list[str] | None:
    """The layers to capture for an export of ``layers``: for token ids, the model's input
    embedding first (a text input's saliency is read at it, |gradient x embedding| per
    token, as the window's runs record it); None (every leaf, the embedding among them) and
    other inputs' layers as they are."""
    if layers is None or not token_input(inputs):
        return None if layers is None else list(layers)
    embedding = input_embedding(model)
    if embedding is None or embedding in layers:
        return list(layers)
    return [embedding, *layers]


def token_saliency_picture(tokens: TokenSaliency, title: str | None = None) -> Image.Image:
    """A text input's saliency as a labelled strip: one row per token (its text beside it),
    coloured and with a bar by its ``|gradient x input embedding|`` (0 .. the largest)."""
    from actviz.io.token_export import heat_png

    values = np.asarray(tokens.values, dtype=np.float32)
    if title is None:
        # "x", not "×": the pictures' default font has no such glyph.
        title = f"saliency per token: |gradient x input embedding| at {tokens.layer}"
    return heat_png(
        values[:, None],
        tokens.tokens,
        title=title,
        bars=values,
        gradient=True,
        symmetric=False,
        levels=(0.0, tokens.peak),
        bars_label="saliency",
    )


def write_token_saliency(out: Path, tokens: TokenSaliency, target: str = "") -> list[Path]:
    """Write a text input's saliency per token as ``token_saliency.json`` (the layer, the
    target and one row per token) and ``token_saliency.csv`` (``index,token,saliency,share``:
    the raw value and its share of the largest)."""
    shares = tokens.shares()
    rows = [
        {
            "index": i,
            "token": token,
            "saliency": float(tokens.values[i]),
            "share": float(shares[i]),
        }
        for i, token in enumerate(tokens.tokens)
    ]
    path_json = out / "token_saliency.json"
    record = {
        "what": "|gradient x input embedding| per token, summed over the embedding dimension",
        "layer": tokens.layer,
        "sample": tokens.sample,
        "target": target,
        "tokens": rows,
    }
    path_json.write_text(json.dumps(record, indent=1, ensure_ascii=False))
    path_csv = out / "token_saliency.csv"
    with path_csv.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["index", "token", "saliency", "share"])
        writer.writeheader()
        writer.writerows(rows)
    return [path_json, path_csv]


def attribution_images(
    cap: Capture, prepared: RunResult, image: np.ndarray | None, gradcam_layer: str | None = None
) -> tuple[dict[str, tuple[Image.Image, np.ndarray]], dict[str, Any]]:
    """The saliency, Grad-CAM and attention-rollout pictures of a prepared capture (over the
    input ``image`` when it has one), as export writes them and the HTML report embeds them.

    Returns ``({"saliency" | "gradcam" | "rollout": (picture, values)}, notes)``; ``notes``
    holds ``gradcam_layer`` or ``gradcam_error``, and ``saliency_of`` when the saliency is a
    text input's, per token (:func:`token_saliency_picture`).
    """
    pictures: dict[str, tuple[Image.Image, np.ndarray]] = {}
    notes: dict[str, Any] = {}
    first_grad = first_tensor(cap.input_grads)
    if first_grad is not None and first_grad.dim() >= 2:
        sal = prepared.saliency
        if sal is None:  # not image-shaped: the raw strip
            from actviz.display.attribution import saliency

            sal = saliency(first_grad)
        # A 1-D input gives a strip, not a picture: overlay only image-shaped saliency.
        backdrop = image if image is not None and sal.shape == image.shape[:2] else None
        pictures["saliency"] = (_heat_png(sal, backdrop, "saliency |d target / d input|"), sal)
    elif prepared.token_saliency is not None:
        tokens = prepared.token_saliency
        pictures["saliency"] = (token_saliency_picture(tokens), np.asarray(tokens.values))
        notes["saliency_of"] = f"saliency per token: |gradient × input embedding| at {tokens.layer}"
    # The window's default (ViT token layers included) when the input is an image.
    cam_layer = gradcam_layer or prepared.gradcam_default or pick_gradcam_layer(cap)
    if cam_layer is not None and cam_layer in cap and cap[cam_layer].grad is not None:
        rec = cap[cam_layer]
        size = image.shape[:2] if image is not None else None
        try:
            cam = (
                prepared.grad_cams[cam_layer]
                if cam_layer in prepared.grad_cams
                else grad_cam(rec.tensor, rec.grad, size=size)
            )
        except ValueError as exc:
            notes["gradcam_error"] = str(exc)
        else:
            pictures["gradcam"] = (_heat_png(cam, image, f"Grad-CAM at {cam_layer}"), cam)
            notes["gradcam_layer"] = cam_layer
    if prepared.rollout is not None:
        pictures["rollout"] = (
            _heat_png(prepared.rollout, image, "attention rollout"),
            prepared.rollout,
        )
    return pictures, notes


def _save_attribution(
    out: Path,
    key: str,
    pictures: Mapping[str, tuple[Image.Image, np.ndarray]],
    attribution: dict[str, Any],
) -> list[Path]:
    if key not in pictures:
        return []
    picture, values = pictures[key]
    path = out / f"{key}.png"
    picture.save(path)
    np.save(out / f"{key}.npy", values)
    attribution[key] = path.name
    return [path, out / f"{key}.npy"]


def _shapes(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return list(obj.shape)
    if isinstance(obj, dict):
        return {k: _shapes(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_shapes(v) for v in obj]
    return None
