"""Where feature visualisations are kept between runs, so a channel opened again shows at once:
one ``.npz`` per (weights, layer, channel, settings) in the user's cache, written atomically."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from actviz.core.model_copy import weights_signature
from actviz.data.cache import cache_root, weights_fingerprint

log = logging.getLogger(__name__)

_FORMAT = 1

_FINGERPRINTS: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[Any, ...], str]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


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
