"""The result of a dataset scan: frozen, numpy only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from actviz.core.recorder import format_bytes
from actviz.core.records import CaptureTooLarge
from actviz.data.accumulate import EMPTY_INDEX, LayerState
from actviz.data.atlas_map import cosine_top, frozen, query_vector, row_norms

#: Values :func:`_rows_with_vectors` checks at a time (4 MB of flags).
_BLOCK_VALUES = 1 << 22


class ScanCancelled(Exception):
    """``should_stop()`` returned True: what was scanned is saved (``partial``) to resume later."""

    def __init__(self, message: str = "scan cancelled", partial: Scan | None = None) -> None:
        super().__init__(message)
        self.partial = partial


class ScanTooLarge(CaptureTooLarge):
    """A scan's embeddings would exceed the memory budget (raised before any image runs)."""


@dataclass(frozen=True)
class ScanMemory:
    """A scan's embeddings before it starts: ``images``, layer ``widths``, ``embedding_bytes``."""

    images: int
    widths: Mapping[str, int]
    embedding_bytes: int

    def describe(self) -> str:
        """One line for a status bar or a log: "embeddings: 2000 images x 832 values = 3.2 MB"."""
        where = f" in {len(self.widths)} layers" if len(self.widths) > 1 else ""
        return (
            f"embeddings: {self.images} images x {sum(self.widths.values())} values{where} = "
            f"{format_bytes(self.embedding_bytes)}"
        )


@dataclass(frozen=True)
class Neighbour:
    """One image near a query: its ``index`` in the data, ``source``, and cosine ``similarity``."""

    index: int
    source: str | int
    similarity: float


@dataclass(frozen=True)
class Embeddings:
    """Each scanned image's pooled vector in one layer, in data order: ``vectors`` ``(M, D)``
    float16 read-only, ``indices`` into the data, ``labels`` (-1 unknown; None without classes),
    and ``axis``, the channel dimension pooled along."""

    layer: str
    vectors: np.ndarray
    indices: np.ndarray
    sources: tuple[str | int, ...]
    labels: np.ndarray | None
    class_names: tuple[str, ...] | None
    axis: int

    def __len__(self) -> int:
        return int(self.vectors.shape[0])


@dataclass(frozen=True)
class TopEntry:
    """One of a channel's top images: ``source``, its ``index`` in the data, the channel's maximum
    ``value`` and its ``(y, x)`` ``location`` (None without a spatial map)."""

    source: str | int
    index: int
    value: float
    location: tuple[int, int] | None


@dataclass(frozen=True)
class ChannelStats:
    """Per-channel float64 figures over ``count`` scanned images: ``mean``/``std`` of the
    per-image spatial mean, ``frac_positive`` (per-image maximum > 0)."""

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


def _rows_with_vectors(full: np.ndarray) -> np.ndarray:
    """Indices of the rows of ``full`` that are not all NaN, a block of rows at a time."""
    if not full.size:
        return np.zeros(0, np.int64)
    step = max(1, _BLOCK_VALUES // max(1, full.shape[1]))
    return np.concatenate(
        [
            start + np.flatnonzero(~np.isnan(full[start : start + step]).all(axis=1))
            for start in range(0, len(full), step)
        ]
    )


@dataclass(frozen=True)
class Scan:
    """A dataset scan: per layer and channel, the images that excite it most, and statistics;
    ``skipped`` lists unreadable items with the reason, ``from_cache`` whether nothing ran."""

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
    #: Per layer recording embeddings: ``(N, D)`` float16 by data index (NaN rows: none).
    pooled: Mapping[str, np.ndarray] = field(repr=False, default_factory=dict)
    #: Per layer recording embeddings: the output dimension its channels were taken from.
    pooled_axis: Mapping[str, int] = field(repr=False, default_factory=dict)
    #: ``(N,)`` class index of each item (-1 unknown), or None when the data has no classes.
    labels: np.ndarray | None = field(repr=False, default=None)
    #: Lazily made per-layer figures (row norms for :meth:`neighbours`); not part of the result.
    _memo: dict = field(repr=False, default_factory=dict, compare=False)

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
        """The channel's top images, best first; ``KeyError``/``IndexError`` for a bad one."""
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

    @property
    def embedding_layers(self) -> tuple[str, ...]:
        """The layers that recorded each image's pooled vector."""
        return tuple(name for name in self.layers if name in self.pooled)

    def embeddings(self, layer: str) -> Embeddings:
        """Each scanned image's pooled vector in ``layer``; ``KeyError`` without embeddings."""
        if (memo := self._memo.get(("embeddings", layer))) is not None:
            return memo
        self._layer(layer)
        if layer not in self.pooled:
            raise KeyError(
                f"layer {layer!r} was scanned without embeddings; scan it with "
                f"embeddings=True (or embeddings=[{layer!r}])"
            )
        full = self.pooled[layer]
        rows = _rows_with_vectors(full)
        vectors = full if len(rows) == len(full) else frozen(full[rows])
        labels = None if self.labels is None else frozen(self.labels[rows])
        indices = frozen(rows.astype(np.int64))
        sources = tuple(self.sources[i] for i in rows.tolist())
        axis = int(self.pooled_axis.get(layer, 1))
        out = Embeddings(layer, vectors, indices, sources, labels, self.class_names, axis)
        self._memo[("embeddings", layer)] = out
        return out

    def neighbours(self, layer: str, query: Any, k: int = 9) -> tuple[Neighbour, ...]:
        """The ``k`` images whose pooled vectors in ``layer`` are most cosine-similar to ``query``
        (a vector, or a capture, record or output of one input), exact, best first; safe from a
        worker thread. ``KeyError`` without embeddings, ``ValueError`` for a wrong length."""
        emb = self.embeddings(layer)
        vector = query_vector(query, layer, emb.axis)
        if (norms := self._memo.get(("norms", layer))) is None:
            norms = row_norms(emb.vectors)
            self._memo[("norms", layer)] = norms
        rows, sims = cosine_top(emb.vectors, vector, k, norms=norms)
        return tuple(
            Neighbour(int(emb.indices[r]), emb.sources[r], float(s))
            for r, s in zip(rows.tolist(), sims.tolist(), strict=True)
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``scan.json`` holds)."""
        layers = {}
        for name in self.layers:
            res, figures = self._layer(name), ("mean", "std", "frac_positive")
            layers[name] = {
                "channels": self.channels(name),
                "spatial": list(res.spatial) if res.spatial else None,
                "dead": self.dead(name).tolist(),
                **{key: getattr(res.stats, key).tolist() for key in figures},
                "top": [
                    [
                        {**asdict(e), "location": list(e.location) if e.location else None}
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
    if state.channels is None:  # the layer never ran: no channel
        state = LayerState(state.k, channels=0)
    indices = np.where(state.indices == EMPTY_INDEX, -1, state.indices)
    count = state.count
    positive = state.positive.copy()
    frac = positive / count if count else np.zeros(len(positive))
    stats = ChannelStats(
        frozen(state.mean.copy()), frozen(state.std()), frozen(frac.astype(np.float64)), count
    )
    values, locations = frozen(state.values.copy()), frozen(state.locations.copy())
    return LayerResult(values, frozen(indices), locations, stats, state.spatial, frozen(positive))
