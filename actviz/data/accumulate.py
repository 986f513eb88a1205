"""Per-layer running figures of a dataset scan: per channel the ``k`` largest per-image maxima
with their ``(y, x)`` (ties to the earlier image), mean, spread and positive count, merged with
one ``lexsort`` per batch (no Python loop over channels)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

# The one walker over nested outputs; the scan modules import it from here.
from actviz.core.structures import first_tensor as first_tensor

#: Index of an empty top-k slot: larger than any data index, so empty slots sort last.
EMPTY_INDEX = 2**62
#: The arrays of a :class:`LayerState`, one row per channel.
_ARRAYS = ("values", "indices", "locations", "mean", "m2", "positive")


@dataclass
class Reduced:
    """One batch of one or more layers, reduced per image and channel (numpy, on the CPU)."""

    maxima: np.ndarray  # (B, C) float64
    means: np.ndarray  # (B, C) float64
    #: (B, C) flat position of each maximum in its map; None when no channel keeps one.
    argmax: np.ndarray | None
    #: (C,) width of each channel's maps (the last spatial size); 0 where no location is kept.
    widths: np.ndarray | None
    #: The layer's map size; None for ``(B, C)`` layers and for several layers together.
    spatial: tuple[int, ...] | None
    #: (B, D) pooled vector of each image (:func:`pool`) when the scan records embeddings.
    embedding: np.ndarray | None = None

    def select(self, rows: np.ndarray) -> Reduced:
        """The same figures for the images ``rows`` only (indices into the batch)."""
        argmax = None if self.argmax is None else self.argmax[rows]
        embedding = None if self.embedding is None else self.embedding[rows]
        return Reduced(
            self.maxima[rows], self.means[rows], argmax, self.widths, self.spatial, embedding
        )

    def locations(self, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``(n, 2)`` ``(y, x)`` of the maxima of images ``b``, channels ``c`` (``(0, x)`` for
        1-D maps, ``(-1, -1)`` where no location is kept)."""
        out = np.full((len(b), 2), -1, dtype=np.int64)
        if self.argmax is None or self.widths is None:
            return out
        arg, width = self.argmax[b, c], self.widths[c]
        ok = width > 0
        out[ok] = np.stack(np.divmod(arg[ok], width[ok]), axis=-1)
        return out

    @staticmethod
    def joined(parts: Sequence[Reduced]) -> Reduced:
        """Several layers' figures for the same images, side by side along the channels."""
        if len(parts) == 1:
            return parts[0]
        maxima = np.concatenate([p.maxima for p in parts], axis=1)
        means = np.concatenate([p.means for p in parts], axis=1)
        argmax = widths = None
        if any(p.argmax is not None for p in parts):
            argmax = np.concatenate(
                [
                    np.full(p.maxima.shape, -1, np.int64) if p.argmax is None else p.argmax
                    for p in parts
                ],
                axis=1,
            )
            widths = np.concatenate(
                [
                    np.zeros(p.maxima.shape[1], np.int64) if p.widths is None else p.widths
                    for p in parts
                ]
            )
        return Reduced(maxima, means, argmax, widths, None)


def _max_and_argmax(flat: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Each map's maximum in ``flat`` ``(B, C, L)`` and its first position (NaN hides none)."""
    if flat.device.type == "cpu":
        if flat.dtype not in (torch.float32, torch.float64):
            flat = flat.float()  # half types: numpy has no bfloat16
        a = flat.numpy()
        arg = a.argmax(axis=-1)  # the first maximum wins; NaN counts as the largest
        rows = a.reshape(-1, a.shape[-1])
        maxima = rows[np.arange(rows.shape[0]), arg.ravel()].reshape(arg.shape)
        if (nan := np.isnan(maxima)).any():
            bb, cc = np.nonzero(nan)
            picked = a[bb, cc]
            picked = np.where(np.isnan(picked), -np.inf, picked)
            arg[bb, cc] = picked.argmax(axis=-1)
            maxima[bb, cc] = picked[np.arange(len(bb)), arg[bb, cc]]
        return maxima.astype(np.float64), arg
    values, where = flat.max(dim=-1)  # one kernel on a GPU
    if bool((nan := values.isnan()).any()):
        bb, cc = nan.nonzero(as_tuple=True)
        picked = flat[bb, cc]  # NaN as -inf (nan_to_num would also make +inf finite)
        picked = torch.where(picked.isnan(), torch.full_like(picked, -torch.inf), picked)
        values[bb, cc], where[bb, cc] = picked.max(dim=-1)
    return values.to(torch.float64).cpu().numpy(), where.cpu().numpy()


def _numpy64(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def pool(t: torch.Tensor, axis: int = 1) -> np.ndarray:
    """Each sample's pooled vector: the mean of ``t`` over every dimension but the batch and
    ``axis``, float64 ``(B, D)``; the one definition of a scan's embeddings."""
    t = t.detach()
    if t.ndim < 2:
        raise ValueError(f"an output of shape {tuple(t.shape)} has no channel dimension")
    axis = axis % t.ndim
    if axis == 0:
        raise ValueError("the channel axis cannot be the batch dimension")
    if not t.is_floating_point():
        t = t.float()
    if axis != 1:
        t = t.movedim(axis, 1)
    return _numpy64(t if t.ndim == 2 else t.reshape(*t.shape[:2], -1).mean(-1))


def reduce_output(t: torch.Tensor, embed_axis: int | None = None) -> Reduced:
    """Reduce a layer's batch output ``(B, C, ...)`` to per-image, per-channel maxima (with their
    position) and spatial means; ``embed_axis`` also pools each image's vector along that axis."""
    reduced = _reduce(t.detach())
    if embed_axis is not None:
        axis = embed_axis % t.ndim
        reduced.embedding = reduced.means if axis == 1 else pool(t, axis)
    return reduced


def _reduce(t: torch.Tensor) -> Reduced:
    if t.ndim < 2:
        raise ValueError(f"layer output of shape {tuple(t.shape)} has no channel dimension")
    if not t.is_floating_point():
        t = t.float()
    b, c = t.shape[0], t.shape[1]
    spatial = tuple(int(s) for s in t.shape[2:])
    if t.ndim == 2 or math.prod(spatial) == 0:
        values = _numpy64(t.reshape(b, c, -1).mean(-1) if t.ndim > 2 else t)
        return Reduced(np.where(np.isnan(values), -np.inf, values), values, None, None, None)
    flat = t.reshape(b, c, -1)
    # The mean in the map's own precision: a float64 reduction would copy the whole map.
    means = _numpy64(flat.mean(dim=-1))
    maxima, argmax = _max_and_argmax(flat)
    if t.ndim > 4:  # no location is kept for maps of more than 2 dimensions
        return Reduced(maxima, means, None, None, spatial)
    return Reduced(maxima, means, argmax, np.full(c, spatial[-1], dtype=np.int64), spatial)


class LayerState:
    """The running figures of one layer: top-``k`` per channel and per-channel statistics."""

    def __init__(self, k: int, channels: int | None = None) -> None:
        self.k = int(k)
        self.channels: int | None = None
        self.spatial: tuple[int, ...] | None = None
        self.count = 0
        if channels is not None:
            self._allocate(channels)

    def _allocate(self, channels: int) -> None:
        c, k = int(channels), self.k
        self.channels = c
        self.values = np.full((c, k), -np.inf, dtype=np.float64)
        self.indices = np.full((c, k), EMPTY_INDEX, dtype=np.int64)
        self.locations = np.full((c, k, 2), -1, dtype=np.int64)
        self.mean = np.zeros(c, dtype=np.float64)
        self.m2 = np.zeros(c, dtype=np.float64)
        self.positive = np.zeros(c, dtype=np.int64)

    def update(self, reduced: Reduced, indices: np.ndarray) -> None:
        """Merge one reduced batch of images ``indices`` in place (copy to keep: :meth:`arrays`)."""
        maxima, means = reduced.maxima, reduced.means
        b, c = maxima.shape
        if b == 0:
            return
        if self.channels is None:
            self._allocate(c)
        elif c != self.channels:
            raise ValueError(f"layer gave {c} channels, earlier batches {self.channels}")
        if reduced.spatial is not None:
            self.spatial = reduced.spatial
        self._merge(reduced, np.asarray(indices, dtype=np.int64))
        # Statistics: Chan et al.'s parallel merge of (count, mean, M2), in float64.
        batch_mean = means.mean(axis=0)
        dev = means - batch_mean
        batch_m2 = np.einsum("bc,bc->c", dev, dev)
        total = self.count + b
        delta = batch_mean - self.mean
        self.mean += delta * (b / total)
        self.m2 += batch_m2 + delta * delta * (self.count * b / total)
        self.positive += np.count_nonzero(maxima > 0, axis=0)
        self.count = total

    def _merge(self, reduced: Reduced, indices: np.ndarray) -> None:
        maxima = reduced.maxima.T  # (C, B)
        k = self.k
        # Once the top-k have filled, only channels whose batch beats the k-th are merged.
        last_v, last_i = self.values[:, -1:], self.indices[:, -1:]
        enters = (maxima > last_v) | ((maxima == last_v) & (indices[None] < last_i))
        rows = np.flatnonzero(enters.any(axis=1))
        if rows.size == 0:
            return
        b = maxima.shape[1]
        # Kept entries + this batch by value (descending), then data index: one lexsort.
        cand_values = np.concatenate((self.values[rows], maxima[rows]), axis=1)
        cand_indices = np.concatenate(
            (self.indices[rows], np.broadcast_to(indices, (rows.size, b))), axis=1
        )
        order = np.lexsort((cand_indices, -cand_values), axis=1)[:, :k]  # (R, k)
        self.values[rows] = np.take_along_axis(cand_values, order, axis=1)
        self.indices[rows] = np.take_along_axis(cand_indices, order, axis=1)
        kept = np.minimum(order, k - 1)[..., None].repeat(2, axis=-1)
        locations = np.take_along_axis(self.locations[rows], kept, axis=1)
        rr, jj = np.nonzero(order >= k)
        if rr.size:
            locations[rr, jj] = reduced.locations(order[rr, jj] - k, rows[rr])
        self.locations[rows] = locations

    @classmethod
    def _of(cls, k: int, channels: Any, count: int, spatial: Any, arrays: dict) -> LayerState:
        state = cls(k)
        state.channels, state.count, state.spatial = channels, count, spatial
        for name, value in arrays.items():
            setattr(state, name, value)
        return state

    @classmethod
    def joined(cls, states: Sequence[LayerState]) -> LayerState:
        """One state over the channels of ``states`` side by side (same images each), so a batch
        merges in a few array operations instead of a few per layer."""
        arrays = {n: np.concatenate([getattr(st, n) for st in states], axis=0) for n in _ARRAYS}
        channels = sum(int(st.channels or 0) for st in states)
        return cls._of(states[0].k, channels, states[0].count, None, arrays)

    def part(self, lo: int, hi: int, spatial: tuple[int, ...] | None) -> LayerState:
        """Channels ``lo:hi`` as a state of their own (views of this state's arrays)."""
        arrays = {name: getattr(self, name)[lo:hi] for name in _ARRAYS}
        return self._of(self.k, hi - lo, self.count, spatial, arrays)

    def copy(self) -> LayerState:
        """A state of its own with the same figures (copies of the arrays)."""
        return self._of(self.k, self.channels, self.count, self.spatial, self.arrays())

    def arrays(self) -> dict[str, np.ndarray]:
        """Copies of the top-k and statistics arrays (the state changes them in place)."""
        return {} if self.channels is None else {n: getattr(self, n).copy() for n in _ARRAYS}

    def std(self) -> np.ndarray:
        if self.count == 0 or self.channels is None:
            return np.zeros(self.channels or 0)
        return np.sqrt(np.maximum(self.m2 / self.count, 0.0))

    def remap(self, mapping: np.ndarray) -> None:
        """Renumber the kept data indices (``new = mapping[old]``) and re-sort ties."""
        if self.channels is None:
            return
        valid = self.indices != EMPTY_INDEX
        idx = self.indices.copy()
        idx[valid] = np.asarray(mapping, dtype=np.int64)[self.indices[valid]]
        order = np.lexsort((idx, -self.values), axis=1)
        self.values = np.take_along_axis(self.values, order, axis=1)
        self.indices = np.take_along_axis(idx, order, axis=1)
        self.locations = np.take_along_axis(self.locations, order[..., None], axis=1)
