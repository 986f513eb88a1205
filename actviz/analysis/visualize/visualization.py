"""What :func:`~actviz.analysis.visualize.feature_vis.visualize` takes and returns: settings,
results, errors, and the merging of pages computed chunk by chunk."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from actviz.data.atlas_vectors import frozen
from actviz.io.errors import ActvizError

#: Objectives by name: a channel's mean, its centre neuron, the layer's mean square (DeepDream).
OBJECTIVES = ("channel", "neuron", "layer")


class VisualizeError(ActvizError, ValueError):
    """The model, layer, channels or settings cannot be visualised (the message says why); an
    ``ActvizError`` so a window shows the message as it is, a ``ValueError`` for scripts."""


@dataclass(frozen=True)
class VisualizeSettings:
    """What shapes the images of :func:`visualize`; shared by scripts, the CLI, the window and
    the cache key.

    Attributes
    ----------
    objective
        ``"channel"`` (mean activation), ``"neuron"`` (centre position), ``"layer"`` (mean
        square, DeepDream), a direction ``(C,)`` or ``(K, C)`` dotted with each position's
        channel vector, or ``f(layer_output) -> (N,)``. Token layers have channels last.
    steps, lr
        Optimisation steps and Adam's learning rate.
    size
        Side (or ``(h, w)``) of the images; kept as ``(h, w)``.
    param, decorrelate
        ``"fourier"`` (1/f-scaled spectrum) or ``"pixel"``; decorrelated (ImageNet) colour.
    transforms
        ``"standard"`` (pad 12, jitter 8, scale 0.9-1.1, rotate +-10 deg, jitter 4) or ``"none"``.
    seed
        With the sample's key, each sample's seed: a channel gives the same image alone or batched.
    negative
        Minimise the objective instead (what the channel responds to least).
    mean, std, input_size
        The normalisation and the ``(H, W)`` fed; by default the opened model's (none for a
        bare module).
    redirect_relu
        Lucid's redirected ReLU gradient, so channels silent on the start image get a picture.

    Raises
    ------
    VisualizeError
        A value out of range.
    """

    objective: Any = "channel"
    steps: int = 256
    size: int | tuple[int, int] = 128
    param: str = "fourier"
    decorrelate: bool = True
    transforms: str = "standard"
    lr: float = 0.05
    seed: int = 0
    negative: bool = False
    mean: Sequence[float] | None = None
    std: Sequence[float] | None = None
    input_size: tuple[int, int] | None = None
    redirect_relu: bool = True

    def __post_init__(self) -> None:
        # Coerced (numpy ints, one side, lists): equal settings compare equal and key alike.
        size = self.size
        hw = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
        given = {"steps": int, "lr": float, "seed": int, "param": str, "transforms": str}
        given |= dict.fromkeys(("decorrelate", "negative", "redirect_relu"), bool)
        values: dict[str, Any] = {k: kind(getattr(self, k)) for k, kind in given.items()}
        values["size"] = tuple(int(v) for v in hw)
        for k in ("mean", "std", "input_size"):
            value, kind = getattr(self, k), int if k == "input_size" else float
            values[k] = None if value is None else tuple(kind(v) for v in value)
        for k, value in values.items():
            object.__setattr__(self, k, value)
        if self.steps < 1:
            raise VisualizeError(f"steps must be at least 1, not {self.steps}")
        if len(self.size) != 2 or min(self.size) < 8:
            raise VisualizeError(f"size must be at least 8 pixels, not {size}")
        if not self.lr > 0:
            raise VisualizeError(f"lr must be positive, not {self.lr}")
        for k, (a, b) in (("transforms", ("standard", "none")), ("param", ("fourier", "pixel"))):
            if getattr(self, k) not in (a, b):
                raise VisualizeError(f"{k} must be {a!r} or {b!r}, not {getattr(self, k)!r}")

    def record(self, objective: str | None, norm: Any = None) -> dict[str, Any]:
        """The settings as JSON-able :attr:`Visualization.settings` (and cache key), with the
        objective's name (None: not nameable) and the ``(mean, std)`` applied."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        mean, std = norm if norm else (None, None)
        out.update(objective=objective, mean=mean, std=std)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


@dataclass(frozen=True)
class Visualization:
    """The result of :func:`visualize`: one image per sample (a channel, usually).

    Attributes
    ----------
    layer
        The layer optimised ("" for a class logit of the model's output).
    channels
        The sample keys: channel (or ``target=`` class) indices, or ``0..K-1`` without channels.
    images
        ``(K, 3, H, W)`` float32 in [0, 1], read-only.
    objective
        ``(steps, K)`` float64: each image's objective at each step (transformed), read-only.
    activations
        ``(K,)`` float64: the objective of each final image fed as it is (no transforms).
    settings
        Everything that made the images (JSON-able: :meth:`VisualizeSettings.record`).
    elapsed_s
        Wall time of the call.
    from_cache
        Per sample, whether it was read from the cache rather than computed.
    """

    layer: str
    channels: tuple[int, ...]
    images: np.ndarray
    objective: np.ndarray
    activations: np.ndarray
    settings: Mapping[str, Any]
    elapsed_s: float = 0.0
    from_cache: tuple[bool, ...] = ()

    def image_uint8(self, k: int) -> np.ndarray:
        """Image ``k`` as ``(H, W, 3)`` uint8 RGB (for PNGs and widgets)."""
        rgb = np.clip(self.images[k].transpose(1, 2, 0), 0.0, 1.0)
        return np.ascontiguousarray(np.round(rgb * 255.0).astype(np.uint8))

    def index(self, channel: int) -> int:
        """The position of ``channel`` in :attr:`channels`."""
        return self.channels.index(int(channel))

    def select(self, channels: Iterable[int]) -> Visualization:
        """The same visualisation with only ``channels`` (each in :attr:`channels`), in order."""
        rows = [self.index(c) for c in channels]
        if rows == list(range(len(self.channels))):
            return self
        return replace(
            self,
            channels=tuple(self.channels[r] for r in rows),
            images=frozen(self.images[rows]),
            objective=frozen(self.objective[:, rows]),
            activations=frozen(self.activations[rows]),
            from_cache=tuple(self.from_cache[r] for r in rows) if self.from_cache else (),
        )


def merge_visualizations(parts: Sequence[Visualization]) -> Visualization:
    """One :class:`Visualization` of parts of the same layer and settings, in order (a page
    computed in chunks); ``VisualizeError`` for none, a mismatch or a channel given twice."""
    if not parts:
        raise VisualizeError("nothing to merge")
    first = parts[0]
    for part in parts[1:]:
        if part.layer != first.layer or dict(part.settings) != dict(first.settings):
            raise VisualizeError("visualisations of another layer or other settings")
    if len(parts) == 1:
        return first
    channels = tuple(c for part in parts for c in part.channels)
    if len(set(channels)) != len(channels):
        raise VisualizeError("a channel is in two of the visualisations")
    return replace(
        first,
        channels=channels,
        images=frozen(np.concatenate([p.images for p in parts])),
        objective=frozen(np.concatenate([p.objective for p in parts], axis=1)),
        activations=frozen(np.concatenate([p.activations for p in parts])),
        elapsed_s=sum(p.elapsed_s for p in parts),
        from_cache=tuple(f for p in parts for f in p.from_cache),
    )
