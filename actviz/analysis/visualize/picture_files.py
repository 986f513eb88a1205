"""Writing feature visualisations to disk: one PNG per channel, a numbered contact sheet and
``visualize.json`` (the CLI's output and the window's export, one path). No Qt."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from actviz.analysis.visualize.objectives import key_ranges
from actviz.analysis.visualize.visualization import Visualization, VisualizeSettings
from actviz.io.export.typeset import _INK, _font, safe_name, tile_sheet

_LABEL_H = 16
_BG = (250, 250, 250)


def contact_sheet(
    vis: Visualization, columns: int | None = None, tile: int | None = None
) -> np.ndarray:
    """All images of ``vis`` in a numbered grid, ``(H, W, 3)`` uint8: ``columns`` tiles per row
    (None: about square) of side ``tile`` (None: the images' own, at least 64)."""
    k = len(vis.channels)
    cols = columns or max(1, math.ceil(math.sqrt(k)))
    h, w = vis.images.shape[2:]
    side = tile or max(64, max(h, w))
    size = (round(side * w / h), side) if h >= w else (side, round(side * h / w))
    tiles = [Image.fromarray(vis.image_uint8(i)).resize(size, Image.BILINEAR) for i in range(k)]
    labels = [(str(c), _INK) for c in vis.channels]
    return np.asarray(tile_sheet(tiles, size, cols, labels, _LABEL_H, _font(12), bg=_BG))


def reproduce(vis: Visualization, source: str | None = None) -> dict[str, Any]:
    """How to make ``vis`` again (same weights, same images): the :func:`~actviz.visualize`
    keyword arguments (``kwargs``), that call as Python, and the ``actviz visualize`` command
    line when ``source`` is known; a callable or direction objective is named, not included."""
    s = dict(vis.settings)
    name = str(s["objective"] or "")
    base = name.lstrip("-")
    logit = base == "logit"
    # Every setting but the objective, in the dataclass's order (older files lack redirect_relu).
    kwargs = {f.name: s.get(f.name, f.default) for f in fields(VisualizeSettings)[1:]}
    if logit:
        kwargs["target"] = list(vis.channels)
    elif base in ("channel", "neuron", "layer"):
        kwargs = {"objective": base, **kwargs}
    shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    where = "None" if logit else repr(vis.layer)
    out: dict[str, Any] = {
        "kwargs": kwargs,
        "python": f"actviz.visualize(model, {where}, {list(vis.channels)!r}, {shown})",
    }
    if base not in ("channel", "neuron", "layer", "logit"):
        out["objective"] = name or "a callable"
        return out
    square = s["size"][0] == s["size"][1]
    if source and square and kwargs["redirect_relu"]:
        cli = ["actviz", "visualize", "--model", source]
        cli += ["--target"] if logit else ["--layer", vis.layer, "--objective", base]
        cli += ["--channels", key_ranges(vis.channels)]
        cli += ["--negative"] if kwargs["negative"] else []
        cli += ["--steps", str(s["steps"]), "--size", str(s["size"][0])]
        cli += ["--lr", repr(s["lr"]), "--seed", str(s["seed"]), "--param", s["param"]]
        cli += ["--transforms", s["transforms"]]
        cli += [] if s["decorrelate"] else ["--no-decorrelate"]
        out["cli"] = " ".join([*cli, "--out", "OUT"])
    return out


def write_visualization(
    vis: Visualization, out: str | Path, extra: Mapping[str, Any] | None = None
) -> list[Path]:
    """Write ``vis`` into folder ``out`` (a PNG per image, a numbered contact sheet and
    ``visualize.json`` with settings, curves and ``extra``); returns the files written."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    stem = safe_name(vis.layer) if vis.layer else "logit"
    files = [folder / f"{stem}_{channel}.png" for channel in vis.channels]
    for i, path in enumerate(files):
        Image.fromarray(vis.image_uint8(i)).save(path)
    names = [p.name for p in files]
    sheet = folder / f"{stem}_sheet.png"
    Image.fromarray(contact_sheet(vis)).save(sheet)
    files.append(sheet)
    meta = {
        **(dict(extra) if extra else {}),
        "layer": vis.layer,
        "channels": list(vis.channels),
        "settings": dict(vis.settings),
        "activations": [float(a) for a in vis.activations],
        "objective": {str(c): vis.objective[:, i].tolist() for i, c in enumerate(vis.channels)},
        "from_cache": list(vis.from_cache),
        "elapsed_s": vis.elapsed_s,
        "images": names,
        "contact_sheet": sheet.name,
    }
    path = folder / "visualize.json"
    path.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    files.append(path)
    return files
