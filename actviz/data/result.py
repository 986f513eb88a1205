"""The result of a dataset scan: frozen, numpy only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ChannelStats", "LayerResult", "Scan", "ScanCancelled", "TopEntry"]


class ScanCancelled(Exception):
    """``should_stop()`` returned True: what was scanned is saved; a later scan resumes.

    Attributes
    ----------
    partial
        The result so far (a :class:`Scan` over the images scanned), or None.
    """

    def __init__(self, message: str = "scan cancelled", partial: Scan | None = None) -> None:
        super().__init__(message)
        self.partial = partial


@dataclass(frozen=True)
class TopEntry:
    """One of a channel's top images.

    Attributes
    ----------
    source
        The image path, or the sample index for tensors and datasets.
    index
        Position of the image in the data (files sorted by path).
    value
        The channel's maximum over the image.
    location
        ``(y, x)`` of that maximum in the layer's map (``(0, x)`` for 1-D maps); None for
        layers without a spatial map.
    """

    source: str | int
    index: int
    value: float
    location: tuple[int, int] | None


@dataclass(frozen=True)
class ChannelStats:
    """Per-channel figures over the scanned images, float64 arrays of shape ``(C,)``.

    Attributes
    ----------
    mean, std
        Mean and (population) standard deviation over images of the channel's per-image
        spatial mean.
    frac_positive
        Fraction of images where the channel is above zero somewhere (per-image maximum > 0).
    count
        Images these figures are over.
    """

    mean: np.ndarray
    std: np.ndarray
    frac_positive: np.ndarray
    count: int


@dataclass(frozen=True)
class LayerResult:
    """Top-k arrays of one layer (``(C, K)``; index -1 marks an empty slot) and its stats."""

    values: np.ndarray
    indices: np.ndarray
    locations: np.ndarray  # (C, K, 2); -1 where there is no location
    stats: ChannelStats
    spatial: tuple[int, ...] | None
    positive: np.ndarray  # (C,) images with the channel above zero


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class Scan:
    """A dataset scan: per layer and channel, the images that excite it most, and statistics.

    Attributes
    ----------
    layers
        The scanned layers, in the order asked.
    k
        Entries per channel (fewer when fewer images were scanned).
    count
        Images scanned (readable ones).
    skipped
        ``(source, reason)`` of the items that could not be read.
    sources
        Every item of the data, in data order (paths, or sample indices).
    class_names
        Class folder names of an ImageFolder layout (or ``dataset.classes``), else None.
    from_cache
        True when everything came from the cache (nothing had to be run).
    cache_path
        The folder the scan is saved in; None when not cached.
    warnings
        Things the user should know (a layer that never ran, ...).
    threads
        CPU threads the model's forward passes ran with by the end of the scan (tried and
        chosen, see :mod:`actviz.core.threads`); None when nothing was run.
    """

    layers: tuple[str, ...]
    k: int
    count: int
    skipped: tuple[tuple[str, str], ...]
    sources: tuple[str | int, ...]
    class_names: tuple[str, ...] | None
    from_cache: bool
    cache_path: Path | None
    results: Mapping[str, LayerResult] = field(repr=False, default_factory=dict)
    warnings: tuple[str, ...] = ()
    threads: int | None = None

    def _layer(self, layer: str) -> LayerResult:
        try:
            return self.results[layer]
        except KeyError:
            raise KeyError(
                f"layer {layer!r} was not scanned (scanned: {', '.join(self.layers)})"
            ) from None

    def channels(self, layer: str) -> int:
        """Number of channels of ``layer`` (0 when it never ran)."""
        return int(self._layer(layer).values.shape[0])

    def spatial(self, layer: str) -> tuple[int, ...] | None:
        """Spatial size of the layer's maps (``(H, W)`` for 2-D maps), None for ``(N, C)``."""
        return self._layer(layer).spatial

    def top(self, layer: str, channel: int) -> tuple[TopEntry, ...]:
        """The channel's top images, best first (ties: the earlier image first).

        Raises
        ------
        KeyError
            A layer that was not scanned.
        IndexError
            A channel out of range.
        """
        res = self._layer(layer)
        c = res.values.shape[0]
        if not -c <= channel < c:
            raise IndexError(f"channel {channel} out of range: {layer!r} has {c} channels")
        out = []
        for j in range(min(self.k, res.values.shape[1])):
            index = int(res.indices[channel, j])
            if index < 0:
                break
            y, x = (int(v) for v in res.locations[channel, j])
            location = (y, x) if y >= 0 else None
            value = float(res.values[channel, j])
            out.append(TopEntry(self.sources[index], index, value, location))
        return tuple(out)

    def stats(self, layer: str) -> ChannelStats:
        """Per-channel mean, std and fraction of images above zero (see :class:`ChannelStats`)."""
        return self._layer(layer).stats

    def dead(self, layer: str) -> np.ndarray:
        """Indices of the channels never above zero on the scanned images."""
        res = self._layer(layer)
        if res.stats.count == 0:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(res.positive == 0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``scan.json`` holds)."""
        layers = {}
        for name in self.layers:
            res = self._layer(name)
            st = res.stats
            layers[name] = {
                "channels": self.channels(name),
                "spatial": list(res.spatial) if res.spatial else None,
                "dead": [int(c) for c in self.dead(name)],
                "mean": [float(v) for v in st.mean],
                "std": [float(v) for v in st.std],
                "frac_positive": [float(v) for v in st.frac_positive],
                "top": [
                    [
                        {
                            "source": e.source,
                            "index": e.index,
                            "value": e.value,
                            "location": list(e.location) if e.location else None,
                        }
                        for e in self.top(name, c)
                    ]
                    for c in range(self.channels(name))
                ],
            }
        return {
            "count": self.count,
            "k": self.k,
            "items": len(self.sources),
            "skipped": [{"source": s, "reason": r} for s, r in self.skipped],
            "class_names": list(self.class_names) if self.class_names else None,
            "from_cache": self.from_cache,
            "cache_path": str(self.cache_path) if self.cache_path else None,
            "warnings": list(self.warnings),
            "threads": self.threads,
            "layers": layers,
        }


def layer_result(state: Any) -> LayerResult:
    """Freeze a :class:`~actviz.data.accumulate.LayerState` into a :class:`LayerResult`."""
    from actviz.data.accumulate import EMPTY_INDEX

    if state.channels is None:
        empty = np.zeros((0, state.k))
        stats = ChannelStats(*(_frozen(np.zeros(0)) for _ in range(3)), count=0)
        return LayerResult(
            _frozen(empty),
            _frozen(empty.astype(np.int64)),
            _frozen(np.zeros((0, state.k, 2), dtype=np.int64)),
            stats,
            None,
            _frozen(np.zeros(0, dtype=np.int64)),
        )
    indices = state.indices.copy()
    indices[indices == EMPTY_INDEX] = -1
    count = state.count
    positive = state.positive.copy()
    frac = positive / count if count else np.zeros(len(positive))
    stats = ChannelStats(
        _frozen(state.mean.copy()),
        _frozen(state.std()),
        _frozen(frac.astype(np.float64)),
        count,
    )
    return LayerResult(
        _frozen(state.values.copy()),
        _frozen(indices),
        _frozen(state.locations.copy()),
        stats,
        state.spatial,
        _frozen(positive),
    )
