"""What :func:`~actviz.analysis.visualize.feature_vis.visualize` returns: :class:`Visualization`,
its errors, and the merging of pages computed chunk by chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from actviz.data.atlas_vectors import frozen
from actviz.io.errors import ActvizError

#: Objectives by name: a channel's mean activation, its centre neuron, the layer's mean square
#: (DeepDream). A class logit is ``target=``, a direction a tensor, anything else a callable.
OBJECTIVES = ("channel", "neuron", "layer")


class VisualizeError(ActvizError, ValueError):
    """The model, layer, channels or settings cannot be visualised (the message says why).

    An :class:`~actviz.io.errors.ActvizError`, so a window shows the message as it is (not
    prefixed with the class name), and a ``ValueError`` for scripts."""


@dataclass(frozen=True)
class Visualization:
    """The result of :func:`visualize`: one image per sample (a channel, usually).

    Attributes
    ----------
    layer
        The layer optimised ("" for a class logit of the model's output).
    channels
        The sample keys: channel indices (class indices for ``target=``), or ``0..K-1`` for
        objectives without channels.
    images
        ``(K, 3, H, W)`` float32 in [0, 1], read-only.
    objective
        ``(steps, K)`` float64: each image's objective at each step (on the transformed image
        that step fed the model), read-only.
    activations
        ``(K,)`` float64: the objective of each final image fed as it is (no transforms).
    settings
        Everything that made the images (JSON-able): objective, steps, size, param,
        decorrelate, transforms, lr, seed, normalisation, input size...
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
        """The same visualisation with only ``channels``, in that order (each must be in
        :attr:`channels`)."""
        rows = [self.index(c) for c in channels]
        if rows == list(range(len(self.channels))):
            return self
        return Visualization(
            layer=self.layer,
            channels=tuple(self.channels[r] for r in rows),
            images=frozen(self.images[rows]),
            objective=frozen(self.objective[:, rows]),
            activations=frozen(self.activations[rows]),
            settings=self.settings,
            elapsed_s=self.elapsed_s,
            from_cache=tuple(self.from_cache[r] for r in rows) if self.from_cache else (),
        )


def merge_visualizations(parts: Sequence[Visualization]) -> Visualization:
    """One :class:`Visualization` of several of the same layer and settings (a page of
    channels computed chunk by chunk, some read from the cache), in the order given.

    Raises
    ------
    VisualizeError
        No parts, another layer or other settings, or a channel given twice.
    """
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
    return Visualization(
        layer=first.layer,
        channels=channels,
        images=frozen(np.concatenate([p.images for p in parts])),
        objective=frozen(np.concatenate([p.objective for p in parts], axis=1)),
        activations=frozen(np.concatenate([p.activations for p in parts])),
        settings=first.settings,
        elapsed_s=sum(p.elapsed_s for p in parts),
        from_cache=tuple(f for p in parts for f in p.from_cache),
    )
