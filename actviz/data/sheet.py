"""Writing a scan to disk: ``scan.json``, and per layer a contact sheet of the top-k crops."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from actviz.core.records import CaptureCancelled
from actviz.data.receptive import _load, _square, receptive_field
from actviz.data.scan_result import Scan
from actviz.data.sources import resolve_model
from actviz.io.errors import InputError
from actviz.io.export.typeset import _INK, _font, _framed, _text_w, safe_name, tile_sheet

_LABEL_H = 14
_DEAD = (170, 40, 40)


def _crops(
    model: Any, scan: Scan, layer: str, tile: int, data: Any, should_stop: Callable[[], bool]
) -> list[list[Any]]:
    """Per channel, its top entries as ``tile``-square crops, None if gone (sources opened once)."""
    spec = resolve_model(model)
    shown: dict[Any, np.ndarray | None] = {}
    field = None
    out: list[list[Any]] = []
    for c in range(scan.channels(layer)):
        if should_stop():  # Esc during a report: a wide layer's crops take seconds
            raise CaptureCancelled(f"the contact sheet of {layer} was cancelled")
        row = []
        for entry in scan.top(layer, c):
            if entry.source not in shown:
                try:
                    tensor, picture = _load(spec, entry, data)
                except (InputError, ValueError, OSError):  # gone since the scan; no data=
                    tensor, picture = None, None
                shown[entry.source] = picture
                if field is None and tensor is not None:
                    field = receptive_field(spec.model, layer, tuple(tensor.shape))
            picture = shown[entry.source]
            if picture is None or field is None:
                row.append(None)
                continue
            y0, y1, x0, x1 = _square(field.box(entry.location), picture.shape[:2])
            crop = Image.fromarray(np.ascontiguousarray(picture[y0:y1, x0:x1]))
            row.append(crop.resize((tile, tile), Image.BILINEAR))
        out.append(row)
    return out


def contact_sheet(
    model: Any,
    scan: Scan,
    layer: str,
    *,
    tile: int = 48,
    data: Any = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Image.Image:
    """One picture of a layer's scan: per channel (numbered) its top-k crops of side ``tile``;
    ``data`` is the scanned tensor or dataset when sources are indices (else blank tiles);
    ``should_stop`` is asked before each channel (true: raises ``CaptureCancelled``)."""
    crops = _crops(model, scan, layer, tile, data, should_stop)
    channels = len(crops)
    dead = set(scan.dead(layer).tolist())
    k = max(1, scan.k)
    kc = math.ceil(math.sqrt(k))
    kr = math.ceil(k / kc)
    bw, bh = kc * tile + (kc - 1), kr * tile + (kr - 1)
    blank = [None] * (kc * kr)
    blocks = [tile_sheet((r + blank)[: kc * kr], (tile, tile), kc, gap=1, margin=0) for r in crops]
    # Blocks in a roughly square sheet.
    cols = min(math.ceil(math.sqrt(max(channels, 1) * (_LABEL_H + bh) / bw)), max(channels, 1))
    labels = [(f"{c} dead", _DEAD) if c in dead else (str(c), _INK) for c in range(channels)]
    font = _font(11)
    sheet = tile_sheet(blocks, (bw, bh), cols, labels, _LABEL_H, font)
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
