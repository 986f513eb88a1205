"""Writing a capture to disk: readable PNGs, raw arrays and a summary.json.

Per layer: a feature-map mosaic PNG (colormap, channel numbers, colour bar), a gradient-magnitude
PNG in the same layout, and the raw arrays (``.npz``). For the model: saliency and Grad-CAM
overlaid on the input image, and ``summary.json`` (shapes, statistics, prediction, target,
warnings, the files written). No Qt here: the GUI and the CLI both call :func:`export_capture`.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from actviz.core import views
from actviz.core.capture import Capture, LayerRecord
from actviz.core.structures import first_tensor

__all__ = [
    "EXPORT_PAGE_CHANNELS",
    "channel_pages",
    "export_capture",
    "pick_gradcam_layer",
    "render_layer_png",
    "safe_name",
]

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]

_BG = (255, 255, 255)
_INK = (30, 30, 30)
_MIN_TILE_PX = 40  # small maps are upscaled so a person can see them
_MAX_IMAGE_PX = 2400
#: Channels per exported mosaic PNG; wider layers are written as several pages.
EXPORT_PAGE_CHANNELS = 1024


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
    width = max(body.width + 2 * margin, 320)
    height = body.height + 3 * margin + 22 + bar_h + 18
    canvas = Image.new("RGB", (width, height), _BG)
    draw = ImageDraw.Draw(canvas)
    draw.text((margin, margin), title, fill=_INK, font=font)
    y = margin + 22
    canvas.paste(body, ((width - body.width) // 2, y))
    y += body.height + margin
    bar_w = width - 2 * margin
    ramp = views.colorize(np.tile(np.linspace(0, 1, bar_w, dtype=np.float32), (bar_h, 1)), cmap)
    canvas.paste(Image.fromarray(ramp), (margin, y))
    draw.rectangle([margin, y, margin + bar_w - 1, y + bar_h - 1], outline=_INK)
    lo_s = lo if isinstance(lo, str) else _fmt(lo)
    hi_s = hi if isinstance(hi, str) else _fmt(hi)
    draw.text((margin, y + bar_h + 2), lo_s, fill=_INK, font=small)
    draw.text(
        (margin + bar_w - _text_w(draw, hi_s, small), y + bar_h + 2), hi_s, fill=_INK, font=small
    )
    return canvas


def _mosaic_png(m: views.Mosaic, title: str, cmap: str, numbers: bool = True) -> Image.Image:
    rgb = views.colorize(m.image, cmap, background=(235, 235, 235))
    longest = max(rgb.shape[:2])
    scale = max(
        1, min(math.ceil(_MIN_TILE_PX / max(m.tile_h, m.tile_w)), _MAX_IMAGE_PX // max(longest, 1))
    )
    img = Image.fromarray(rgb).resize((rgb.shape[1] * scale, rgb.shape[0] * scale), Image.NEAREST)
    step_y, step_x = (m.tile_h + m.pad) * scale, (m.tile_w + m.pad) * scale
    if numbers and min(step_x, step_y) >= 16:
        draw = ImageDraw.Draw(img)
        font = _font(max(8, min(12, step_y // 4)))
        for c in range(m.channels):
            y0, x0 = (c // m.cols) * step_y, (c % m.cols) * step_x
            label = str(m.first_channel + c)  # the layer's channel, on any page
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
    canvas = Image.new("RGB", (max(body.width + 16, 320), body.height + 38), _BG)
    ImageDraw.Draw(canvas).text((8, 8), title, fill=_INK, font=font)
    canvas.paste(body, (8, 30))
    return canvas


def render_layer_png(
    tensor: torch.Tensor,
    title: str,
    *,
    cmap: str = "viridis",
    normalize: str = "channel",
    magnitude: bool = False,
    max_tile: int | None = 64,
    max_channels: int | None = EXPORT_PAGE_CHANNELS,
    first_channel: int = 0,
) -> Image.Image:
    """Render one layer output (or gradient, with ``magnitude=True``) as a readable image.

    Maps become a channel mosaic with channel numbers and a colour bar (``max_channels`` of
    them from ``first_channel``: see :func:`channel_pages`); 1-D outputs a bar chart;
    sequences a heat map; scalars a bar of one.
    """
    view = views.layer_view(tensor)
    data = np.abs(view.data) if magnitude else view.data
    if view.kind == "maps":
        m = views.mosaic(
            data,
            normalize=normalize,
            max_tile=max_tile,
            max_channels=max_channels,
            first_channel=first_channel,
        )
        shown = (
            f"channels {m.first_channel}-{m.last_channel} of {m.total_channels}"
            if m.channels < m.total_channels
            else view.description
        )
        body = _mosaic_png(m, title, cmap)
        lo, hi = m.value_range
        if normalize == "channel":
            # Each tile has its own scale, so the bar can only say low/high within a tile.
            head = f"{title}  ({shown}; each tile scaled to its own min..max; all data {_fmt(lo)}..{_fmt(hi)})"
            return _framed(body, head, "tile min", "tile max", cmap)
        return _framed(body, f"{title}  ({shown}; one shared scale)", lo, hi, cmap)
    if view.kind == "heatmap":
        m = views.mosaic(data[None], normalize="shared")
        body = _mosaic_png(m, title, cmap, numbers=False)
        return _framed(body, f"{title}  ({view.description})", *m.value_range, cmap)
    values = np.atleast_1d(data).astype(np.float32)
    color = (200, 80, 40) if magnitude else (40, 110, 180)
    return _bars_png(values, f"{title}  ({view.description})", color)


def channel_pages(tensor: torch.Tensor, page: int = EXPORT_PAGE_CHANNELS) -> list[tuple[int, str]]:
    """``(first channel, file-name suffix)`` of each mosaic page of a layer output.

    Maps with more than ``page`` channels are written as several PNGs: the first keeps the
    plain name, the others say their channels (``_ch1024-2047``). Other outputs: one page.
    """
    view = views.layer_view(tensor)
    total = int(view.data.shape[0]) if view.kind == "maps" else 0
    pages = [(0, "")]
    for first in range(page, total, page):
        pages.append((first, f"_ch{first}-{min(first + page, total) - 1}"))
    return pages


def pick_gradcam_layer(cap: Capture) -> str | None:
    """The last captured layer with a spatial ``(N, C, H, W)`` output and a gradient."""
    for name in reversed(cap.names):
        rec = cap[name]
        t = rec.tensor
        if t is not None and t.dim() == 4 and rec.grad is not None and t.shape[-1] > 1:
            return name
    return None


def _heat_png(heat: np.ndarray, image: np.ndarray | None, title: str) -> Image.Image:
    if image is not None:
        rgb = views.overlay(image, heat, alpha=0.5, cmap="jet")
    else:
        rgb = views.colorize(heat, "jet")
    img = Image.fromarray(rgb)
    if max(img.size) < 256:
        k = math.ceil(256 / max(img.size))
        img = img.resize((img.width * k, img.height * k), Image.BILINEAR)
    return _framed(img, title, 0.0, 1.0, "jet")


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
    cmap: str = "viridis",
    gradcam_layer: str | None = None,
    layers: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
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
        Recorded in summary.json.
    cmap
        Colormap of the feature-map PNGs.
    gradcam_layer
        Layer for Grad-CAM; default: the last captured layer with a spatial output.
    layers
        Subset of ``cap.names`` to write (default all).
    progress
        Called as ``progress(done, total, what)`` while writing.

    Returns
    -------
    list of Path
        Every file written, summary.json last.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = list(layers) if layers is not None else list(cap.names)
    written: list[Path] = []
    layer_summary: dict[str, Any] = {}
    total = len(names) + 1
    for i, name in enumerate(names):
        if progress is not None:
            progress(i, total, name)
        recs = cap.calls(name)
        rec = recs[0]
        base = safe_name(name)
        entry: dict[str, Any] = {"type": rec.module_type, "calls": len(recs), "files": []}
        t = rec.tensor
        if t is not None:
            stats = views.layer_stats(rec)
            entry.update({k: _jsonable(v) for k, v in stats.items() if k not in ("name", "type")})
            for first, suffix in channel_pages(t):
                feat = out / f"{base}_features{suffix}.png"
                title = f"{name or '(model)'} · {rec.module_type}"
                render_layer_png(t, title, cmap=cmap, first_channel=first).save(feat)
                written.append(feat)
                entry["files"].append(feat.name)
        if rec.grad is not None:
            for first, suffix in channel_pages(rec.grad):
                grad_png = out / f"{base}_grad{suffix}.png"
                render_layer_png(
                    rec.grad,
                    f"|d target / d {name or 'output'}|",
                    cmap="inferno",
                    normalize="shared",
                    magnitude=True,
                    first_channel=first,
                ).save(grad_png)
                written.append(grad_png)
                entry["files"].append(grad_png.name)
        arrays = _record_arrays(recs)
        if arrays:
            npz = out / f"{base}.npz"
            np.savez_compressed(npz, **arrays)
            written.append(npz)
            entry["files"].append(npz.name)
        layer_summary[name] = entry
    if progress is not None:
        progress(len(names), total, "saliency and Grad-CAM")
    attribution: dict[str, Any] = {}
    first_grad = first_tensor(cap.input_grads)
    if first_grad is not None and first_grad.dim() >= 2:
        sal = views.saliency(first_grad)
        path = out / "saliency.png"
        # A 1-D input gives a strip, not a picture: overlay only image-shaped saliency.
        backdrop = image if image is not None and sal.shape[0] > 1 else None
        _heat_png(sal, backdrop, "saliency |d target / d input|").save(path)
        np.save(out / "saliency.npy", sal)
        written += [path, out / "saliency.npy"]
        attribution["saliency"] = path.name
    cam_layer = gradcam_layer or pick_gradcam_layer(cap)
    if cam_layer is not None and cam_layer in cap and cap[cam_layer].grad is not None:
        rec = cap[cam_layer]
        size = image.shape[:2] if image is not None else None
        try:
            cam = views.grad_cam(rec.tensor, rec.grad, size=size)
        except ValueError as exc:
            attribution["gradcam_error"] = str(exc)
        else:
            path = out / "gradcam.png"
            _heat_png(cam, image, f"Grad-CAM at {cam_layer}").save(path)
            np.save(out / "gradcam.npy", cam)
            written += [path, out / "gradcam.npy"]
            attribution["gradcam"] = path.name
            attribution["gradcam_layer"] = cam_layer
    if image is not None:
        inp = out / "input.png"
        Image.fromarray(np.ascontiguousarray(image)).save(inp)
        written.append(inp)
    summary = {
        "model": model_name,
        "input": input_name,
        "input_shapes": _shapes(cap.inputs),
        "output_shapes": _shapes(cap.output),
        "target": {
            "description": cap.target_description,
            "value": _jsonable(cap.target_value) if cap.target_value is not None else None,
            "index": cap.target_index,
            "label": categories[cap.target_index]
            if categories and cap.target_index is not None and cap.target_index < len(categories)
            else None,
        },
        "prediction": [
            {"index": i, "label": label, "probability": p}
            for i, label, p in views.top_k(first_tensor(cap.output), 5, categories)
        ],
        "layers": layer_summary,
        "attribution": attribution,
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


def _shapes(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return list(obj.shape)
    if isinstance(obj, dict):
        return {k: _shapes(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_shapes(v) for v in obj]
    return None
