"""Export of the sequence views (token heat maps, attention, rollout, logit lens) from the
window's own prepared result, so files show the window's arrays, maps and levels.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from actviz.display import colormaps
from actviz.display.prepared import DisplaySpec, RunResult
from actviz.display.token_maps import heat_levels, token_labels
from actviz.io.export.typeset import _font, elide, safe_name

__all__ = ["heat_png", "sequence_inputs", "write_sequence_views"]

_BG = (255, 255, 255)
_INK = (32, 33, 36)
_CELL = 14  # pixels per heat-map cell (at least)
_MAX_SIDE = 1400  # the longest side of a heat map body
_LABEL_CHARS = 16
#: A picture widens to show its whole title and range line up to this width; longer ones
#: are cut with "…" (export's rule for its own pictures).
_MAX_TITLE_PX = 1800


def _short(label: str) -> str:
    text = str(label).replace("\n", "\\n")
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


def _cell(count: int, least: int) -> int:
    """Pixels per cell: short sides grow to about 240 px, long ones shrink to :data:`_MAX_SIDE`."""
    count = max(count, 1)
    return max(least, min(max(_CELL, 240 // count), 40, _MAX_SIDE // count))


def sequence_inputs(
    cap: Any,
    spec: DisplaySpec,
    *,
    tokens: Sequence[str] | None = None,
    model: Any = None,
    tokenizer: Any = None,
    layout: Any = None,
) -> tuple[Any, DisplaySpec]:
    """``cap`` and ``spec`` ready for the sequence views: the spec gets tokens, patch layout and
    tokenizer; with a model and no attention yet, a copy of ``cap`` gets it recorded.
    """
    from actviz.display.attention import capture_attention
    from actviz.display.token_maps import sequence_layout

    spec = replace(
        spec,
        tokens=tuple(str(t) for t in tokens) if tokens else spec.tokens,
        layout=layout or (sequence_layout(model) if model is not None else spec.layout),
        tokenizer=tokenizer if tokenizer is not None else spec.tokenizer,
    )
    if model is not None and cap.extra.get("attention") is None:
        attention = capture_attention(model, cap.inputs)
        if attention is not None:
            cap = replace(cap, extra={**cap.extra, "attention": attention})
    return cap, spec


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
    """A labelled heat map: ``rows`` beside it, ``cols`` under it (rotated), one bar per row
    on the right (``bars``, headed ``bars_label`` and their largest value), the title and the
    value range above."""
    heat = np.asarray(heat, dtype=np.float32)
    if symmetric is None:
        symmetric = bool((heat < 0).any())
    lo, hi = levels or heat_levels(heat, symmetric=symmetric)
    cmap = colormaps.resolve(colormaps.AUTO, signed=symmetric, gradient=gradient)
    scaled = (heat - lo) / (hi - lo) if hi > lo else np.zeros_like(heat)
    rgb = colormaps.colorize(np.clip(scaled, 0, 1), cmap)
    n_rows, n_cols = heat.shape
    cell_h = _cell(n_rows, 3)
    cell_w = _cell(n_cols, 2)
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
        draw.text((8, y), elide(draw, text, f, width - 16), fill=_INK, font=f)
    x0 = left + 4
    canvas.paste(body, (x0, top))
    for i, text in row_labels:
        y = top + i * cell_h + (cell_h - 11) // 2
        draw.text((x0 - 4 - int(draw.textlength(text, font=small)), y), text, fill=_INK, font=small)
    for j, text in col_labels:
        w = int(draw.textlength(text, font=small)) + 2
        label = Image.new("RGB", (w, 13), _BG)
        ImageDraw.Draw(label).text((0, 0), text, fill=_INK, font=small)
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
        draw.text((bx, top - 14), f"{bars_label} (max {peak:.3g})", fill=_INK, font=small)
    return canvas


def write_sequence_views(
    result: RunResult, out: Path, names: Sequence[str]
) -> tuple[list[Path], dict]:
    """The sequence views of ``result`` written into ``out``: ``(files, summary.json entry)``."""
    written: list[Path] = []
    summary: dict[str, Any] = {}
    tokens = result.spec.tokens
    if tokens:
        summary["tokens"] = list(tokens)
    token_files: dict[str, list[str]] = {}
    for name in names:
        layer = result.layers.get(name)
        view = layer.tokens if layer is not None else None
        if view is None:
            continue
        base = safe_name(name)
        parts = [
            heat_png(view.heat, view.tokens, title=f"{name} · tokens x features", bars=view.norms)
        ]
        arrays = {"heat": view.heat, "norms": view.norms, "tokens": np.asarray(view.tokens)}
        if view.grad_heat is not None:
            parts.append(
                heat_png(
                    view.grad_heat,
                    view.tokens,
                    title=f"|d target / d {name}|",
                    bars=view.grad_norms,
                    gradient=True,
                    symmetric=False,
                )
            )
            arrays.update(grad_heat=view.grad_heat, grad_norms=view.grad_norms)
        png = out / f"{base}_tokens.png"
        _stack(parts).save(png)
        npz = out / f"{base}_tokens.npz"
        np.savez_compressed(npz, **arrays)
        written += [png, npz]
        token_files[name] = [png.name, npz.name]
    if token_files:
        summary["token_layers"] = token_files
    attention = result.attention
    if attention is not None and attention.layers:
        files = []
        sample = result.spec.sample
        for name in attention.layers:
            heads = attention.heads(name, sample)
            labels = token_labels(heads.shape[-1], tokens, result.spec.layout)
            rows = token_labels(heads.shape[-2], tokens, result.spec.layout)
            maps = [(attention.mean(name, sample), f"mean of {heads.shape[0]} heads")]
            maps += [(h, f"head {i}") for i, h in enumerate(heads)]
            parts = [
                heat_png(
                    heat,
                    rows,
                    cols=labels,
                    title=f"{name} · {what}",
                    symmetric=False,
                    levels=(0.0, float(heat.max()) or 1.0),
                )
                for heat, what in maps
            ]
            png = out / f"attention_{safe_name(name)}.png"
            _grid(parts).save(png)
            written.append(png)
            files.append(png.name)
        npz = out / "attention.npz"
        np.savez_compressed(npz, **{safe_name(n): attention.probs[n] for n in attention.layers})
        written.append(npz)
        summary["attention"] = {"layers": list(attention.layers), "files": [*files, npz.name]}
    if result.logit_lens is not None:
        lens = result.logit_lens
        path = out / "logit_lens.json"
        table = {
            "layers": list(lens.layers),
            "tokens": list(lens.tokens) if lens.tokens else None,
            "positions": [
                [
                    {"layer": layer, "top": [{"id": i, "text": t, "p": p} for i, t, p in top]}
                    for layer, top in lens.rows(pos)
                ]
                for pos in range(lens.positions)
            ],
        }
        path.write_text(json.dumps(table, indent=1))
        written.append(path)
        summary["logit_lens"] = path.name
    return written, summary


def _stack(parts: list[Image.Image]) -> Image.Image:
    width = max(p.width for p in parts)
    canvas = Image.new("RGB", (width, sum(p.height for p in parts)), _BG)
    y = 0
    for p in parts:
        canvas.paste(p, (0, y))
        y += p.height
    return canvas


def _grid(parts: list[Image.Image], columns: int = 4) -> Image.Image:
    w, h = max(p.width for p in parts), max(p.height for p in parts)
    rows = -(-len(parts) // columns)
    canvas = Image.new("RGB", (w * min(columns, len(parts)), h * rows), _BG)
    for i, p in enumerate(parts):
        canvas.paste(p, ((i % columns) * w, (i // columns) * h))
    return canvas
