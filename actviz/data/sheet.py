"""Writing a scan to disk: ``scan.json``, and per layer a contact sheet of the top-k crops."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from actviz.data.receptive import _load, _square, receptive_field
from actviz.data.scan_result import Scan
from actviz.data.sources import resolve_model
from actviz.io.errors import InputError
from actviz.io.export.typeset import _font, _framed, _text_w, safe_name

_GAP = 6
_LABEL_H = 14
_EMPTY = (235, 235, 235)
_DEAD = (170, 40, 40)
_INK = (30, 30, 30)


def _crops(model: Any, scan: Scan, layer: str, tile: int, data: Any) -> list[list[np.ndarray]]:
    """Per channel, its top entries as ``(tile, tile, 3)`` crops (each source opened once)."""
    spec = resolve_model(model)
    shown: dict[Any, np.ndarray | None] = {}
    field = None
    out: list[list[np.ndarray]] = []
    for c in range(scan.channels(layer)):
        row = []
        for entry in scan.top(layer, c):
            if entry.source not in shown:
                try:
                    tensor, picture = _load(spec, entry, data)
                except (InputError, ValueError, OSError):  # gone since the scan; no data=
                    shown[entry.source] = None
                    continue
                shown[entry.source] = picture
                if field is None:
                    field = receptive_field(spec.model, layer, tuple(tensor.shape))
            picture = shown[entry.source]
            if picture is None or field is None:
                row.append(np.full((tile, tile, 3), _EMPTY, dtype=np.uint8))
                continue
            y0, y1, x0, x1 = _square(field.box(entry.location), picture.shape[:2])
            crop = Image.fromarray(np.ascontiguousarray(picture[y0:y1, x0:x1]))
            row.append(np.asarray(crop.resize((tile, tile), Image.BILINEAR), dtype=np.uint8))
        out.append(row)
    return out


def contact_sheet(
    model: Any, scan: Scan, layer: str, *, tile: int = 48, data: Any = None
) -> Image.Image:
    """One picture of a layer's scan: per channel (numbered) its top-k crops of side ``tile``;
    ``data`` is the scanned tensor or dataset when sources are indices (else blank tiles)."""
    crops = _crops(model, scan, layer, tile, data)
    channels = len(crops)
    dead = set(scan.dead(layer).tolist())
    k = max(1, scan.k)
    kc = math.ceil(math.sqrt(k))
    kr = math.ceil(k / kc)
    block_w = kc * tile + (kc - 1)
    block_h = _LABEL_H + kr * tile + (kr - 1)
    # Blocks in a roughly square sheet.
    cols = min(math.ceil(math.sqrt(max(channels, 1) * block_h / block_w)), max(channels, 1))
    rows = max(1, math.ceil(channels / cols))
    width = cols * block_w + (cols + 1) * _GAP
    height = rows * block_h + (rows + 1) * _GAP
    sheet = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    font = _font(11)
    for c, row in enumerate(crops):
        bx = _GAP + (c % cols) * (block_w + _GAP)
        by = _GAP + (c // cols) * (block_h + _GAP)
        label = f"{c} dead" if c in dead else str(c)
        draw.text((bx, by), label, fill=_DEAD if c in dead else _INK, font=font)
        for j in range(kc * kr):
            x = bx + (j % kc) * (tile + 1)
            y = by + _LABEL_H + (j // kc) * (tile + 1)
            if j < len(row):
                sheet.paste(Image.fromarray(row[j]), (x, y))
            else:
                draw.rectangle([x, y, x + tile - 1, y + tile - 1], fill=_EMPTY)
    body = _framed(sheet, f"{layer or '(model)'}: top {scan.k} of {scan.count} images per channel")
    draw, count = ImageDraw.Draw(body), f"{channels} channels"
    x = max(8, body.width - 8 - _text_w(draw, count, font))
    draw.text((x, 10), count, fill=_INK, font=font)
    return body


def write_scan(
    model: Any,
    scan: Scan,
    out: str | Path,
    *,
    tile: int = 48,
    data: Any = None,
    extra: dict[str, Any] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[Path]:
    """Write ``<layer>.png`` contact sheets and ``scan.json`` into ``out``; return the files."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i, layer in enumerate(scan.layers):
        if progress is not None:
            progress(i, len(scan.layers), layer)
        path = folder / f"{safe_name(layer)}.png"
        contact_sheet(model, scan, layer, tile=tile, data=data).save(path)
        files.append(path)
    summary = scan.to_dict()
    summary["sheets"] = {layer: f.name for layer, f in zip(scan.layers, files, strict=True)}
    if extra:
        summary.update(extra)
    path = folder / "scan.json"
    path.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    files.append(path)
    return files
