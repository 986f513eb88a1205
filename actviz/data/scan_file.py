"""A finished scan in one folder, reopened without the model or the data: ``scan.json``,
``scan.npz`` and memory-mapped ``<layer>.f16`` rows. No pickle, so a shared folder runs no code."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from actviz.data.atlas_vectors import frozen
from actviz.data.rows import _block_rows, _note, _safe, open_rows
from actviz.data.scan_result import ChannelStats, LayerResult, Scan

#: The file that marks a folder as a saved scan.
SCAN_FILE = "scan.json"
_FORMAT = 1
#: The arrays saved per layer, of its result and of its statistics.
_RESULT_ARRAYS = ("values", "indices", "locations", "positive")
_STATS_ARRAYS = ("mean", "std", "frac_positive")


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
    names = meta["class_names"]
    return Scan(
        layers=tuple(e["name"] for e in meta["layers"]),
        k=int(meta["k"]),
        count=int(meta["count"]),
        skipped=tuple((str(s), str(r)) for s, r in meta["skipped"]),
        sources=sources,
        class_names=tuple(names) if names is not None else None,
        from_cache=True,
        cache_path=None,
        results=results,
        warnings=tuple(meta["warnings"]),
        threads=meta["threads"],
        pooled=pooled,
        pooled_axis=axes,
        labels=arrays.get("labels"),
    )
