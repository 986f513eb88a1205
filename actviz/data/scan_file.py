"""A finished scan in one folder, reopened without the model or the data: ``scan.json``,
``scan.npz`` and memory-mapped ``<layer>.f16`` rows. No pickle, so a shared folder runs no code.
And a scan written for people (:func:`write_scan`): ``scan.json`` and per layer a contact sheet
of the top-k crops."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from actviz.core.records import CaptureCancelled
from actviz.data.atlas_map import frozen
from actviz.data.receptive import _load, _square, receptive_field
from actviz.data.rows import _block_rows, _note, _safe, open_rows
from actviz.data.scan_result import ChannelStats, LayerResult, Scan
from actviz.data.sources import resolve_model
from actviz.io.errors import InputError
from actviz.io.export.typeset import _INK, _font, _framed, _text_w, safe_name, tile_sheet

SCAN_FILE = "scan.json"  #: The file that marks a folder as a saved scan.
_FORMAT = 1
#: The arrays saved per layer, of its result and of its statistics.
_RESULT_ARRAYS = ("values", "indices", "locations", "positive")
_STATS_ARRAYS = ("mean", "std", "frac_positive")
_LABEL_H = 14
_DEAD = (170, 40, 40)


def save_scan(scan: Scan, folder: str | os.PathLike[str]) -> Path:
    """Write ``scan`` to ``folder`` (made if missing) for :func:`open_scan`; returns the
    ``scan.json`` path. Embedding rows already in ``folder`` are not copied."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    layers = []
    for i, name in enumerate(scan.layers):
        res = scan.results[name]
        for owner, keys in ((res, _RESULT_ARRAYS), (res.stats, _STATS_ARRAYS)):
            arrays.update({f"{i}.{key}": np.asarray(getattr(owner, key)) for key in keys})
        entry: dict[str, Any] = {
            "name": name,
            "spatial": list(res.spatial) if res.spatial is not None else None,
            "stats_count": int(res.stats.count),
        }
        if name in scan.pooled:
            entry["axis"] = int(scan.pooled_axis.get(name, 1))
            _write_rows(folder, name, scan.pooled[name], entry["axis"])
        layers.append(entry)
    if scan.labels is not None:
        arrays["labels"] = np.asarray(scan.labels)
    sources = scan.sources
    if (n := len(sources)) and all(type(s) is int for s in sources):
        numbers = np.fromiter(sources, dtype=np.int64, count=n)
        if np.array_equal(numbers, np.arange(n)):
            kept: Any = {"range": n}  # a dataset's items, 0 to n - 1: nothing to store
        else:
            arrays["sources"] = numbers
            kept = {"array": n}
    else:
        kept = list(sources)
    meta = {
        "format": _FORMAT,
        "layers": layers,
        "k": scan.k,
        "count": scan.count,
        "skipped": [list(s) for s in scan.skipped],
        "sources": kept,
        "class_names": list(scan.class_names) if scan.class_names is not None else None,
        "warnings": list(scan.warnings),
        "threads": scan.threads,
    }
    with open(folder / "scan.npz", "wb") as fh:
        np.savez(fh, **arrays)
    path = folder / SCAN_FILE
    path.write_text(json.dumps(meta))
    return path


def _write_rows(folder: Path, layer: str, rows: np.ndarray, axis: int) -> None:
    """``rows`` as ``<folder>/<layer>.f16`` (kept when it is that file already)."""
    target = folder / f"{_safe(layer)}.f16"
    name = getattr(rows, "filename", None)
    if name is None or Path(name).resolve() != target.resolve():
        step = _block_rows(rows.shape[1])
        with open(target, "wb") as fh:
            for start in range(0, int(rows.shape[0]), step):
                fh.write(memoryview(np.ascontiguousarray(rows[start : start + step], dtype="<f2")))
    _note(folder, layer, int(rows.shape[0]), int(rows.shape[1]), axis)


def open_scan(folder: str | os.PathLike[str]) -> Scan:
    """The scan :func:`save_scan` wrote to ``folder`` (embeddings memory-mapped, read-only);
    ``FileNotFoundError`` without ``scan.json``, ``ValueError`` for another format."""
    folder = Path(folder)
    meta = json.loads((folder / SCAN_FILE).read_text())
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise ValueError(f"{folder}: not a saved actviz scan (format {_FORMAT})")
    with np.load(folder / "scan.npz", allow_pickle=False) as npz:
        arrays = {key: frozen(npz[key]) for key in npz.files}
    if isinstance(kept := meta["sources"], dict) and "range" in kept:
        sources: tuple = tuple(range(int(kept["range"])))
    elif isinstance(kept, dict):
        sources = tuple(arrays["sources"].tolist())
    else:
        sources = tuple(kept)
    embedded = [e["name"] for e in meta["layers"] if "axis" in e]
    rows = open_rows(folder) if embedded else {}
    results, pooled, axes = {}, {}, {}
    for i, entry in enumerate(meta["layers"]):
        name = entry["name"]
        values, indices, locations, positive, *figures = (
            arrays[f"{i}.{key}"] for key in (*_RESULT_ARRAYS, *_STATS_ARRAYS)
        )
        stats = ChannelStats(*figures, int(entry["stats_count"]))
        spatial = tuple(entry["spatial"]) if entry["spatial"] is not None else None
        results[name] = LayerResult(values, indices, locations, stats, spatial, positive)
        if name in embedded:
            pooled[name] = rows[name][0]
            axes[name] = int(entry["axis"])
    return Scan(
        layers=tuple(e["name"] for e in meta["layers"]),
        k=int(meta["k"]),
        count=int(meta["count"]),
        skipped=tuple((str(s), str(r)) for s, r in meta["skipped"]),
        sources=sources,
        class_names=tuple(meta["class_names"]) if meta["class_names"] is not None else None,
        from_cache=True,
        cache_path=None,
        results=results,
        warnings=tuple(meta["warnings"]),
        threads=meta["threads"],
        pooled=pooled,
        pooled_axis=axes,
        labels=arrays.get("labels"),
    )


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
    channels, dead = len(crops), set(scan.dead(layer).tolist())
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
    sheets = {layer: f.name for layer, f in zip(scan.layers, files, strict=True)}
    summary = {**scan.to_dict(), "sheets": sheets, **(extra or {})}
    path = folder / "scan.json"
    path.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    files.append(path)
    return files
