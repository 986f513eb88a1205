"""Writing feature visualisations to disk: one PNG per channel, a numbered contact sheet and
``visualize.json`` (the CLI's output and the window's export, one path). No Qt. And where they
are kept between runs (:class:`VisualizationCache`), so a channel opened again shows at once: one
``.npz`` per (weights, layer, channel, settings) in the user's cache, written atomically."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import threading
import weakref
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from torch import nn

from actviz.analysis.visualize.visualization import Visualization, VisualizeSettings, key_ranges
from actviz.core.model_copy import weights_signature
from actviz.data.cache import cache_root, weights_fingerprint
from actviz.io.export.typeset import _INK, _font, safe_name, tile_sheet

log = logging.getLogger(__name__)
_LABEL_H, _BG = 16, (250, 250, 250)  # a contact sheet's label height and background
_FORMAT = 1
_FINGERPRINTS: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[Any, ...], str]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


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


def visualize_cache_root() -> Path:
    """``actviz/visualize`` under the user's cache directory (``XDG_CACHE_HOME`` first)."""
    return cache_root().parent / "visualize"


def model_fingerprint(model: nn.Module) -> str:
    """:func:`~actviz.data.cache.weights_fingerprint`, remembered while the tensors are unchanged
    (:func:`~actviz.core.model_copy.weights_signature`)."""
    state = weights_signature(model)
    with _LOCK:
        known = _FINGERPRINTS.get(model)
    if known is not None and known[0] == state:
        return known[1]
    digest = weights_fingerprint(model)
    with contextlib.suppress(TypeError), _LOCK:  # not weakly referenceable: hash every time
        _FINGERPRINTS[model] = (state, digest)
    return digest


class VisualizationCache:
    """The cached samples of one (weights' fingerprint, layer: "" for a class logit, JSON-able
    settings) under ``folder``: ``get``/``put`` per channel."""

    def __init__(self, folder: Path, weights: str, layer: str, settings: dict[str, Any]) -> None:
        self.folder = folder
        blob = json.dumps([_FORMAT, weights, layer, settings], sort_keys=True, default=str)
        self.prefix = hashlib.sha1(blob.encode()).hexdigest()[:32]
        self.input_size: list[int] | None = None

    @classmethod
    def for_model(
        cls, model: nn.Module, layer: str, settings: dict[str, Any]
    ) -> VisualizationCache:
        """The cache of ``model``'s weights in :func:`visualize_cache_root`."""
        return cls(visualize_cache_root(), model_fingerprint(model), layer, dict(settings))

    def path(self, key: int) -> Path:
        return self.folder / self.prefix[:2] / f"{self.prefix}-{int(key)}.npz"

    def get(self, key: int) -> tuple[np.ndarray, np.ndarray, float] | None:
        """``(image (3, H, W), objective per step, final activation)`` or None."""
        path = self.path(key)
        try:
            with np.load(path) as data:
                image = np.array(data["image"], dtype=np.float32)
                curve = np.array(data["objective"], dtype=np.float64)
                act = float(data["activation"])
                size = data["input_size"]
        except (OSError, KeyError, ValueError) as exc:
            if path.exists():
                log.debug("unreadable visualisation cache file %s: %s", path, exc)
            return None
        self.input_size = [int(v) for v in size] if size.size else None
        return image, curve, act

    def put(
        self,
        key: int,
        image: np.ndarray,
        objective: np.ndarray,
        activation: float,
        input_size: tuple[int, int] | None = None,
    ) -> None:
        """Save one sample; a failure to write is logged, not raised (the result stands)."""
        path = self.path(key)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp.npz")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(
                tmp,
                image=np.asarray(image, dtype=np.float32),
                objective=np.asarray(objective, dtype=np.float64),
                activation=np.float64(activation),
                input_size=np.asarray(input_size if input_size else [], dtype=np.int64),
            )
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not cache a visualisation in %s: %s", path.parent, exc)
            tmp.unlink(missing_ok=True)
