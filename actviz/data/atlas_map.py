"""The dataset atlas: a layer's pooled vectors of every scanned image laid out as a 2-D map
(numpy only, no shared state: safe on a worker thread), fitted by :func:`project` (exact PCA or
UMAP), which places new vectors with the same fit (:class:`Projection`); and the exact maths on
those vectors, chunk by chunk: row norms, cosine search (:func:`cosine_top`), the lasso
(:func:`points_in_polygon`) and separating channels."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from actviz.data.accumulate import pool

#: Rows converted to float64 at a time, so the working copy stays a few MB.
_CHUNK = 4096
#: Projection methods :func:`project` knows.
METHODS = ("pca", "umap")
#: UMAP's own choice for large sets at every size (it takes 500 under 10,000 vectors).
UMAP_EPOCHS = 200
#: Vectors wider than this go through PCA to this many values before UMAP.
UMAP_PCA_DIMS = 50
#: Up to this many vectors UMAP's neighbours are found exactly (:class:`ExactNeighbours`).
UMAP_EXACT_MAX = 50_000
#: UMAP fits at most this many vectors, a seeded sample; ``transform`` places the others.
UMAP_FIT_MAX = UMAP_EXACT_MAX
#: Vectors placed by one ``transform`` call of a sampled UMAP fit.
_PLACE_CHUNK = 50_000
#: How a scan's warning begins when its embeddings were left out for the memory budget.
NO_ATLAS_NOTE = "No atlas for this scan"


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
    s_in, s_out, q_in, q_out = (np.zeros(c) for _ in range(4))
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


@dataclass(frozen=True)
class Atlas:
    """One layer's map of a scanned dataset (read-only arrays): rows are the images with a vector
    in the layer (``embeddings.indices``), placed by ``projection.coords``; ``predictions`` is
    each row's argmax of the ``logits`` layer, or None."""

    scan: Any
    layer: str
    embeddings: Any
    projection: Projection
    predictions: np.ndarray | None = None

    @property
    def coords(self) -> np.ndarray:
        return self.projection.coords

    @property
    def labels(self) -> np.ndarray | None:
        return self.embeddings.labels

    def correct(self) -> np.ndarray | None:
        """``(M,)`` bool: prediction == label, if both known and classes shared; else None."""
        if self.predictions is None or self.labels is None:
            return None
        return self.predictions == self.labels

    def channel(self, c: int) -> np.ndarray:
        """``(M,)`` float32: each row's mean activation of channel ``c`` (to colour by)."""
        return self.embeddings.vectors[:, int(c)].astype(np.float32)

    def place(self, query: Any) -> np.ndarray:
        """Where ``query`` lands on this map: a capture of one input (holding the layer), its
        record, the layer's output, or a pooled vector; ``(dims,)``."""
        return self.projection.transform(query_vector(query, self.layer, self.embeddings.axis))

    def nearest(self, query: Any, k: int = 9) -> tuple[Any, ...]:
        """The ``k`` images nearest ``query`` in the layer's space (exact cosine, see
        :meth:`Scan.neighbours <actviz.data.scan_result.Scan.neighbours>`)."""
        return self.scan.neighbours(self.layer, query, k)

    def separating(self, rows: Sequence[int] | np.ndarray, k: int = 10) -> tuple[ChannelSplit, ...]:
        """The channels that set rows ``rows`` (a selection on the map) apart from the rest."""
        return separating_channels(self.embeddings.vectors, rows, k)


def build_atlas(
    scan: Any,
    layer: str,
    method: str = "pca",
    dims: int = 2,
    seed: int = 0,
    logits: str | None = None,
) -> Atlas:
    """Fit a map of ``layer`` over a scan recorded with embeddings (``method``, ``dims``, ``seed``
    as for :func:`project`); ``logits`` names the layer of :attr:`Atlas.predictions`."""
    emb = scan.embeddings(layer)
    projection = project(emb.vectors, method=method, dims=dims, seed=seed)
    predictions = None
    if logits is not None:
        scores = scan.embeddings(logits)
        best = np.argmax(scores.vectors, axis=1) if len(scores) else np.zeros(0, np.int64)
        row_of = np.full(len(scan.sources), -1, dtype=np.int64)  # data index -> scores row
        row_of[scores.indices] = np.arange(len(scores))
        j = row_of[emb.indices]
        predictions = frozen(np.where(j >= 0, best[np.maximum(j, 0)], -1).astype(np.int64))
    return Atlas(scan, layer, emb, projection, predictions)


def umap_available() -> bool:
    """Whether ``umap-learn`` (the ``actviz[atlas]`` extra) is installed, without importing it."""
    return importlib.util.find_spec("umap") is not None


@dataclass(frozen=True)
class Projection:
    """A fitted projection of pooled vectors (``method`` ``"pca"`` or ``"umap"``): ``coords``
    ``(N, dims)``; for PCA also ``mean``, sign-fixed ``components`` and ``explained`` variance."""

    method: str
    coords: np.ndarray
    mean: np.ndarray | None = None
    components: np.ndarray | None = None
    explained: np.ndarray | None = None
    seed: int = 0
    #: How many vectors a sampled UMAP fit was fitted on; None: every vector.
    fitted_on: int | None = None
    _model: Any = field(default=None, repr=False, compare=False)
    #: UMAP of wide vectors: the PCA that narrowed them first (new vectors go through it too).
    _pre: Projection | None = field(default=None, repr=False, compare=False)

    @property
    def dims(self) -> int:
        return int(self.coords.shape[1])

    def transform(self, vectors: Any) -> np.ndarray:
        """Place new vectors (``(D,)`` or ``(M, D)``) with this fit, without moving fitted ones."""
        a = np.asarray(vectors.detach().cpu().numpy() if torch.is_tensor(vectors) else vectors)
        one = a.ndim == 1
        a = _rows(a[None] if one else a)
        fitted = self.mean if self.mean is not None else getattr(self._pre, "mean", None)
        if fitted is None:
            fitted = getattr(self._model, "_raw_data", None)  # a UMAP fit's vectors
        width = None if fitted is None else int(fitted.shape[-1])
        if width is not None and a.shape[1] != width:
            raise ValueError(
                f"vectors of {a.shape[1]} values; the projection was fitted on {width}"
            )
        if self.method == "pca":
            assert self.mean is not None and self.components is not None
            out = (a.astype(np.float64) - self.mean) @ self.components.T
        else:
            if self._pre is not None:
                a = self._pre.transform(a)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = np.asarray(self._model.transform(a.astype(np.float32)), dtype=np.float64)
        return out[0] if one else out


def project(
    vectors: Any, method: str = "pca", dims: int = 2, seed: int = 0, **options: Any
) -> Projection:
    """Fit a projection of ``vectors`` ``(N, D)`` to ``dims`` dimensions and place them.

    ``"pca"``: exact principal components in float64. ``"umap"`` (``actviz[atlas]``): vectors
    wider than 50 narrowed by PCA first (``options["pca_dims"]``), a seeded sample of
    :data:`UMAP_FIT_MAX` fitted when larger; other ``options`` go to ``umap.UMAP``.

    Raises
    ------
    ValueError
        An unknown method, ``dims`` out of range, NaN in the vectors.
    ImportError
        ``"umap"`` without ``umap-learn``."""
    if method not in METHODS:
        raise ValueError(f"unknown projection method {method!r} (known: {', '.join(METHODS)})")
    a = _rows(vectors)
    n, d = a.shape
    dims = int(dims)
    if dims < 1 or dims > d:
        raise ValueError(f"dims must be between 1 and the {d} values per vector, got {dims}")
    if n == 0:
        raise ValueError("no vectors to project")
    if a.dtype.kind == "f" and any(np.isnan(c).any() for _, c in _chunks(a)):
        raise ValueError("the vectors hold NaN; leave those rows out")
    return _pca(a, dims) if method == "pca" else _umap(a, dims, int(seed), options)


def _pca(a: np.ndarray, dims: int) -> Projection:
    n, d = a.shape
    mean = sum(c.sum(axis=0) for _, c in _chunks(a)) / n
    if n >= d:
        cov = np.zeros((d, d))
        for _, c in _chunks(a):
            c -= mean
            cov += c.T @ c
        top, vecs = _top_eigen(cov, dims)
        components, total = vecs.T, float(np.trace(cov))
    else:
        centred = a.astype(np.float64) - mean
        values, vecs = np.linalg.eigh(centred @ centred.T)
        order = np.argsort(values)[::-1][:dims]
        top = values[order]
        total = float(np.maximum(values, 0).sum())
        components = np.zeros((dims, d))
        for j, (v, u) in enumerate(zip(top, vecs[:, order].T, strict=True)):
            if v > 1e-12 * max(float(values[-1]), 1e-300):
                components[j] = (centred.T @ u) / np.sqrt(v)  # beyond the rank: zero
    # One sign per axis, whatever the solver gave: its largest loading positive.
    big = np.argmax(np.abs(components), axis=1)
    signs = np.sign(components[np.arange(len(components)), big])
    components *= np.where(signs == 0, 1.0, signs)[:, None]
    coords = np.empty((n, dims))
    for lo, c in _chunks(a):
        coords[lo : lo + len(c)] = (c - mean) @ components.T
    explained = np.maximum(top, 0) / total if total > 0 else np.zeros(dims)
    return Projection("pca", frozen(coords), frozen(mean), frozen(components), frozen(explained))


def _umap(a: np.ndarray, dims: int, seed: int, options: dict[str, Any]) -> Projection:
    try:
        import umap
    except ImportError as exc:
        raise ImportError(
            "method='umap' needs umap-learn: pip install 'actviz[atlas]' (or use method='pca')"
        ) from exc
    cache_umap_compiles()
    n = a.shape[0]
    if n < 3:
        raise ValueError(f"UMAP needs at least 3 vectors, got {n}")
    if n > UMAP_FIT_MAX:
        return _umap_sampled(a, dims, seed, options)
    opts: dict[str, Any] = {"n_neighbors": min(15, n - 1), "n_epochs": UMAP_EPOCHS}
    opts.update(options)
    opts["n_neighbors"] = min(int(opts["n_neighbors"]), n - 1)
    pre_dims = int(opts.pop("pca_dims", UMAP_PCA_DIMS) or 0)
    pre = None
    if 0 < pre_dims < a.shape[1] and pre_dims < n:
        # The search's cost grows with the width; 50 principal axes keep the neighbourhoods.
        pre = _pca(a, pre_dims)
        a = pre.coords
    x = np.ascontiguousarray(a, dtype=np.float32)
    if (
        n <= UMAP_EXACT_MAX
        and opts.get("metric", "euclidean") == "euclidean"
        and "precomputed_knn" not in opts
    ):
        # pynndescent compiles for minutes in every process; an exact torch search is fast here.
        index = ExactNeighbours(x)
        knn, dist = index.query(x, int(opts["n_neighbors"]))
        opts["precomputed_knn"] = (knn, dist, index)
    reducer = umap.UMAP(n_components=dims, random_state=seed, **opts)
    with warnings.catch_warnings():
        # Silenced: a fixed random_state's parallelism notice, a false "transform unavailable".
        warnings.simplefilter("ignore")
        coords = reducer.fit_transform(x)
    return Projection(
        "umap", frozen(np.asarray(coords, dtype=np.float64)), seed=seed, _model=reducer, _pre=pre
    )


def _umap_sampled(a: np.ndarray, dims: int, seed: int, options: dict[str, Any]) -> Projection:
    """UMAP fitted on a seeded sample of :data:`UMAP_FIT_MAX` rows, the rest placed after."""
    n = a.shape[0]
    sample = np.sort(np.random.default_rng(seed).choice(n, UMAP_FIT_MAX, replace=False))
    fit = _umap(np.asarray(a[sample]), dims, seed, options)
    coords = np.empty((n, dims))
    coords[sample] = fit.coords
    others = np.setdiff1d(np.arange(n), sample)
    for lo in range(0, len(others), _PLACE_CHUNK):
        rows = others[lo : lo + _PLACE_CHUNK]
        coords[rows] = fit.transform(np.asarray(a[rows]))
    return replace(fit, coords=frozen(coords), fitted_on=UMAP_FIT_MAX)


class ExactNeighbours:
    """Exact Euclidean nearest neighbours among fitted ``data``, with umap-learn's search-index
    interface (``query(x, k) -> (indices, distances)``) for up to :data:`UMAP_EXACT_MAX` vectors."""

    #: umap reads it to pick its search's epsilon (angular trees: cosine-like metrics).
    _angular_trees = False

    def __init__(self, data: np.ndarray) -> None:
        self._data = torch.from_numpy(np.ascontiguousarray(data, dtype=np.float64))
        self._norms = (self._data * self._data).sum(dim=1)

    def query(self, x: Any, k: int, epsilon: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest fitted vectors of each row of ``x``, nearest first: ``(M, k)`` int32
        indices and float32 distances (``epsilon``, umap's search slack, is unused)."""
        q = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64).reshape(len(x), -1))
        n = self._data.shape[0]
        k = min(int(k), n)
        rows = max(1, 8_000_000 // max(n, 1))  # at most 64 MB of distances at a time
        indices, dists = np.empty((len(q), k), np.int32), np.empty((len(q), k), np.float32)
        for lo in range(0, len(q), rows):
            c = q[lo : lo + rows]
            # |a - b|^2 = |a|^2 + |b|^2 - 2 a.b in float64: self-distance 0 to ~1e-6.
            d2 = (c * c).sum(dim=1, keepdim=True) + self._norms[None, :] - 2.0 * (c @ self._data.T)
            d2.clamp_(min=0.0)
            vals, idx = torch.topk(d2, k, dim=1, largest=False, sorted=True)
            indices[lo : lo + len(c)] = idx.numpy().astype(np.int32)
            dists[lo : lo + len(c)] = vals.sqrt().numpy().astype(np.float32)
        return indices, dists


def cache_umap_compiles() -> int:
    """Have numba cache umap-learn's compiled functions on disk; how many it turned on."""
    try:
        from numba.core.caching import NullCache
        from numba.core.dispatcher import Dispatcher
    except ImportError:  # umap-learn without numba cannot be; a stand-in module can
        return 0

    turned = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "umap" or name.startswith("umap.")):
            continue
        for value in list(vars(module).values()):
            if (
                isinstance(value, Dispatcher)
                and isinstance(getattr(value, "_cache", None), NullCache)
                and getattr(value.py_func, "__module__", "").startswith("umap")
            ):
                # Nowhere writable: compiled each time.
                with contextlib.suppress(RuntimeError, OSError):
                    value.enable_caching()
                    turned += 1
    return turned


def _top_eigen(c: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenpairs of PSD ``c`` (subspace iteration, else ``eigh``)."""
    if (d := c.shape[0]) > 64 and 4 * k <= d:
        width = min(d, k + 8)  # oversampled: convergence goes with l[k + 8] / l[k]
        q = np.linalg.qr(np.random.default_rng(0).standard_normal((d, width)))[0]
        tol = 1e-11 * max(float(np.trace(c)), 1e-300)
        for step in range(1, 301):
            q = np.linalg.qr(c @ q)[0]
            if step % 5 == 0:
                w, v = np.linalg.eigh(q.T @ c @ q)
                order = np.argsort(w)[::-1][:k]
                lam, vec = w[order], q @ v[:, order]
                if np.all(np.linalg.norm(c @ vec - vec * lam, axis=0) <= tol):
                    return lam, vec
    w, v = np.linalg.eigh(c)  # ascending
    order = np.argsort(w)[::-1][:k]
    return w[order], v[:, order]
