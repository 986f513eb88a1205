"""Exact maths on a scan's pooled vectors: row norms, cosine search (:func:`cosine_top`), the
lasso (:func:`points_in_polygon`) and separating channels. Numpy only, chunk by chunk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from actviz.data.accumulate import pool

#: Rows converted to float64 at a time, so the working copy stays a few MB.
_CHUNK = 4096


def _rows(vectors: Any) -> np.ndarray:
    """``vectors`` as a 2-D numpy array (any float dtype kept: converted chunk by chunk)."""
    if isinstance(vectors, torch.Tensor):
        vectors = vectors.detach().cpu().numpy()
    a = np.asarray(vectors)
    if a.ndim != 2:
        raise ValueError(f"vectors must be (N, D), got shape {a.shape}")
    if a.dtype.kind not in "fiu":
        raise ValueError(f"vectors must be numbers, got {a.dtype}")
    return a


def _chunks(a: np.ndarray) -> Any:
    for lo in range(0, a.shape[0], _CHUNK):
        yield lo, a[lo : lo + _CHUNK].astype(np.float64)


def frozen(a: np.ndarray) -> np.ndarray:
    """``a`` contiguous and read-only."""
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def row_norms(vectors: Any) -> np.ndarray:
    """``(N,)`` float64 Euclidean norm of each row (chunk by chunk)."""
    a = _rows(vectors)
    out = np.empty(a.shape[0])
    for lo, c in _chunks(a):
        out[lo : lo + len(c)] = np.sqrt(np.einsum("nd,nd->n", c, c))
    return out


def cosine_top(
    vectors: Any, query: Any, k: int, norms: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``vectors`` most cosine-similar to ``query``, exactly, best first (ties:
    the earlier row; a zero vector scores 0). Returns ``(rows, similarities)``."""
    a = _rows(vectors)
    q = np.asarray(query.detach().cpu().numpy() if isinstance(query, torch.Tensor) else query)
    q = q.astype(np.float64).reshape(-1)
    if q.shape[0] != a.shape[1]:
        raise ValueError(f"a query of {q.shape[0]} values; the vectors have {a.shape[1]}")
    if int(k) < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    norms = row_norms(a) if norms is None else np.asarray(norms, dtype=np.float64)
    qn = float(np.linalg.norm(q))
    sims = np.empty(a.shape[0])
    for lo, c in _chunks(a):
        sims[lo : lo + len(c)] = c @ q
    with np.errstate(divide="ignore", invalid="ignore"):
        sims = sims / (norms * qn)
    sims[~np.isfinite(sims)] = 0.0
    k = min(int(k), len(sims))
    if k < len(sims):
        # The k-th largest value, then every row at least that large (ties kept, then cut).
        kth = np.partition(sims, len(sims) - k)[len(sims) - k]
        cand = np.flatnonzero(sims >= kth)
    else:
        cand = np.arange(len(sims))
    order = cand[np.lexsort((cand, -sims[cand]))][:k]
    return order.astype(np.int64), sims[order]


def query_vector(query: Any, layer: str, axis: int = 1) -> np.ndarray:
    """A query for :func:`cosine_top` in ``layer``'s space: a vector ``(D,)`` as it is; a
    capture (holding ``layer``), a run result with a ``capture``, a layer record or the
    layer's output for one input pooled along ``axis`` as the scan pooled its images."""
    capture = getattr(query, "capture", None)
    if capture is not None and not isinstance(query, (torch.Tensor, np.ndarray)):
        query = capture
    if hasattr(query, "records") and hasattr(query, "__getitem__"):  # an actviz Capture
        query = query[layer]
    if hasattr(query, "tensor") and hasattr(query, "output"):  # a LayerRecord
        if (t := query.tensor) is None:
            raise ValueError(f"the capture of {layer!r} holds no tensor")
        query = t
    if isinstance(query, np.ndarray):
        if query.ndim == 1:
            return query.astype(np.float64)
        query = torch.from_numpy(np.array(query))  # a copy: the array may be read-only
    if not isinstance(query, torch.Tensor):
        raise TypeError(
            f"query must be a vector, a capture or a layer output, not {type(query).__name__}"
        )
    if query.ndim == 1:
        return query.detach().cpu().double().numpy()
    if query.shape[0] != 1:
        raise ValueError(f"a layer output for one input is (1, ...), got {tuple(query.shape)}")
    return pool(query, axis)[0]


def points_in_polygon(points: Any, polygon: Any) -> np.ndarray:
    """``(N,)`` bool: which ``points`` lie inside ``polygon`` (even-odd rule; none below 3 vertices)."""
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"points must be (N, 2), got shape {p.shape}")
    p = p[:, :2]
    poly = np.asarray(polygon, dtype=np.float64).reshape(-1, 2)
    poly = poly[np.isfinite(poly).all(axis=1)]
    inside = np.zeros(len(p), dtype=bool)
    if len(poly) < 3 or not len(p):
        return inside
    lo, hi = poly.min(axis=0), poly.max(axis=0)
    # Only the points in the polygon's bounding box are tested against its edges.
    cand = np.flatnonzero(
        (p[:, 0] >= lo[0]) & (p[:, 0] <= hi[0]) & (p[:, 1] >= lo[1]) & (p[:, 1] <= hi[1])
    )
    x, y = p[cand, 0], p[cand, 1]
    odd = np.zeros(len(cand), dtype=bool)
    xj, yj = poly[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        for xi, yi in poly:
            # The edge crosses the point's horizontal line to the right of the point.
            if (crosses := (yi > y) != (yj > y)).any():
                at = xi + (y - yi) * (xj - xi) / (yj - yi)
                odd ^= crosses & (x < at)
            xj, yj = xi, yi
    inside[cand] = odd
    return inside


@dataclass(frozen=True)
class ChannelSplit:
    """A channel's difference between a selection and the rest (``score``: mean gap / pooled sd)."""

    channel: int
    score: float
    mean_in: float
    mean_out: float


def separating_channels(
    vectors: Any, selected: Sequence[int] | np.ndarray, k: int = 10
) -> tuple[ChannelSplit, ...]:
    """The ``k`` channels of ``vectors`` ``(N, C)`` that set ``selected`` most apart, best first."""
    a = _rows(vectors)
    n, c = a.shape
    sel = np.asarray(selected)
    mask = sel.astype(bool) if sel.dtype == bool else np.isin(np.arange(n), sel)
    if mask.shape != (n,):
        raise ValueError(f"a mask of {mask.shape} for {n} vectors")
    n_in, n_out = int(mask.sum()), int(n - mask.sum())
    if n_in == 0 or n_out == 0:
        raise ValueError("select some of the images, not none or all")
    s_in, s_out = np.zeros(c), np.zeros(c)
    q_in, q_out = np.zeros(c), np.zeros(c)
    for lo, chunk in _chunks(a):
        m = mask[lo : lo + len(chunk)]
        s_in += chunk[m].sum(axis=0)
        s_out += chunk[~m].sum(axis=0)
        q_in += (chunk[m] ** 2).sum(axis=0)
        q_out += (chunk[~m] ** 2).sum(axis=0)
    mean_in, mean_out = s_in / n_in, s_out / n_out
    var_in = np.maximum(q_in / n_in - mean_in**2, 0)
    var_out = np.maximum(q_out / n_out - mean_out**2, 0)
    pooled = np.sqrt((n_in * var_in + n_out * var_out) / n)
    diff = mean_in - mean_out
    score = np.zeros(c)
    spread = pooled > 0
    score[spread] = diff[spread] / pooled[spread]
    # No spread at all but different means: as far apart as it gets.
    score[~spread & (diff > 0)] = np.inf
    score[~spread & (diff < 0)] = -np.inf
    # Ties (infinite scores without spread) go to the larger mean difference, then lower channel.
    order = np.lexsort((np.arange(c), -np.abs(diff), -np.abs(score)))[: int(k)]
    return tuple(
        ChannelSplit(int(i), float(score[i]), float(mean_in[i]), float(mean_out[i])) for i in order
    )
