"""A concept scan: per concept, the dataset images where it fires most, through the channel scan's
:class:`~actviz.data.accumulate.LayerState`; cached per model, data, dictionary, layer and ``k``.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actviz.analysis.concepts.dictionary import Concepts
from actviz.analysis.concepts.vectors import stream_batches, to_vectors
from actviz.core.guards import eval_mode, forward_hooks
from actviz.data.accumulate import EMPTY_INDEX, LayerState, reduce_output
from actviz.data.scan_result import TopEntry

# Vectors encoded at once: bounds the (rows, d_sae) float32 temporary (about 64 MB at 2,048).
_ROWS = 8192


@dataclass(frozen=True, eq=False)
class ConceptScan:
    """Per concept: its top images and how often it fires (frozen numpy arrays).

    ``values``, ``indices`` and ``locations`` are ``(d_sae, k[, 2])`` per-image maxima, data
    indices (empty slots: a huge index) and ``(y, x)``; ``image_rate`` and ``position_rate`` are
    the shares of images and of vectors where it fires; ``mean`` the mean spatial mean.
    """

    layer: str
    k: int
    count: int
    sources: tuple
    values: np.ndarray
    indices: np.ndarray
    locations: np.ndarray
    image_rate: np.ndarray
    position_rate: np.ndarray
    mean: np.ndarray
    spatial: tuple[int, ...]
    from_cache: bool = False
    cache_path: Path | None = None

    @property
    def n_concepts(self) -> int:
        return int(self.values.shape[0])

    def top(self, concept: int) -> tuple[TopEntry, ...]:
        """Concept ``concept``'s top images, best first (fewer than ``k`` when fewer fired)."""
        out = []
        for value, index, loc in zip(
            self.values[concept], self.indices[concept], self.locations[concept], strict=True
        ):
            if index == EMPTY_INDEX or not np.isfinite(value) or value <= 0:
                continue
            location = (int(loc[0]), int(loc[1])) if loc[0] >= 0 else None
            out.append(TopEntry(self.sources[int(index)], int(index), float(value), location))
        return tuple(out)

    def order(self, by: str = "rate") -> np.ndarray:
        """Concept numbers sorted: by ``"rate"`` (images fired on, most first; the strongest
        first among equals) or ``"max"`` (the strongest top image first)."""
        best = self.values[:, 0] if self.values.shape[1] else np.zeros(self.n_concepts)
        best = np.where(np.isfinite(best), best, -np.inf)
        if by == "max":
            return np.lexsort((np.arange(self.n_concepts), -best))
        if by != "rate":
            raise ValueError(f"by must be 'rate' or 'max', not {by!r}")
        return np.lexsort((np.arange(self.n_concepts), -best, -self.image_rate))

    def dead(self) -> np.ndarray:
        """Concepts that fired on no image."""
        return np.flatnonzero(self.image_rate == 0)


def _key(concepts: Concepts, layer: str, k: int, signatures: Any) -> str:
    h = hashlib.sha1(f"concept-scan|1|{layer}|{k}|{concepts.architecture}|{concepts.k}".encode())
    for t in (concepts.W_enc, concepts.b_enc, concepts.b_dec, concepts.threshold):
        if t is not None:
            h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    h.update("|".join(map(str, signatures)).encode())
    return h.hexdigest()[:24]


def _cache_file(model: Any, data: Any, concepts: Concepts, layer: str, k: int) -> Path | None:
    """The cache file beside the channel scan of this model and data, None: not cacheable."""
    from actviz.data.cache import cache_dir, weights_fingerprint
    from actviz.data.sources import open_data, preprocessing_id, resolve_model

    spec = resolve_model(model)
    items = open_data(data, spec)
    if items.identity is None:
        return None
    folder = cache_dir(weights_fingerprint(spec.model), preprocessing_id(spec), items.identity)
    name = _key(concepts, layer, k, (*items.sources, *items.signatures))
    return folder / "concepts" / f"{name}.npz"


_ARRAYS = ("values", "indices", "locations", "image_rate", "position_rate", "mean")


def _read(path: Path, sources: tuple, layer: str, k: int) -> ConceptScan | None:
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {name: f[name] for name in (*_ARRAYS, "count", "spatial")}
    except (OSError, KeyError, ValueError):
        return None
    for a in arrays.values():
        a.flags.writeable = False
    return ConceptScan(
        layer,
        k,
        int(arrays["count"]),
        sources,
        *(arrays[name] for name in _ARRAYS),
        spatial=tuple(int(s) for s in arrays["spatial"]),
        from_cache=True,
        cache_path=path,
    )


def scan_concepts(
    model: Any,
    data: Any,
    concepts: Concepts,
    layer: str | None = None,
    *,
    k: int = 9,
    batch_size: int | None = None,
    num_workers: int | None = 0,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    cache: bool = True,
) -> ConceptScan:
    """Scan ``data`` (as :func:`actviz.scan` takes it) for each concept's top ``k`` images.

    ``layer`` defaults to the dictionary's ``hook_name``; ``cache`` keeps the result beside the
    channel scan's cache.
    """
    from actviz.data.sources import open_data, resolve_model

    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    layer = layer or concepts.hook_name
    if isinstance(model, (str, os.PathLike)):
        from actviz.io.models.loading import open_model

        model = open_model(model)
    spec = resolve_model(model)
    sources = tuple(open_data(data, spec).sources)
    path = _cache_file(model, data, concepts, layer, k) if cache else None
    if path is not None and path.is_file():
        found = _read(path, sources, layer, k)
        if found is not None:
            if progress is not None:
                progress(len(sources), len(sources))
            return found
    state = LayerState(k, concepts.d_sae)
    fired = np.zeros(concepts.d_sae, dtype=np.int64)
    positions = 0
    spatial: tuple[int, ...] = ()
    for indices, t, axis in stream_batches(
        model,
        data,
        layer,
        batch_size=batch_size,
        num_workers=num_workers,
        progress=progress,
        should_stop=should_stop,
    ):
        vectors, spatial = to_vectors(
            t, concepts.d_in, axis if t.shape[axis] == concepts.d_in else None
        )
        per = max(1, math.prod(spatial))
        zs = []
        with torch.no_grad():
            for lo in range(0, vectors.shape[0], _ROWS):
                z = concepts.encode(vectors[lo : lo + _ROWS])
                fired += (z > 0).sum(0).cpu().numpy()
                zs.append(z)
        z = torch.cat(zs).reshape(len(indices), per, concepts.d_sae).transpose(1, 2)
        z = z.reshape(len(indices), concepts.d_sae, *spatial)
        state.update(reduce_output(z), indices.astype(np.int64))
        positions += vectors.shape[0]
    count = int(state.count)
    arrays = state.arrays()
    image_rate = arrays["positive"] / max(1, count)
    position_rate = fired / max(1, positions)
    result = ConceptScan(
        layer,
        k,
        count,
        sources,
        arrays["values"],
        arrays["indices"],
        arrays["locations"],
        image_rate,
        position_rate,
        arrays["mean"],
        tuple(spatial),
        False,
        path,
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(
            tmp,
            **{name: getattr(result, name) for name in _ARRAYS},
            count=np.array(count),
            spatial=np.array(spatial, dtype=np.int64),
        )
        os.replace(tmp, path)
    for name in _ARRAYS:
        getattr(result, name).flags.writeable = False
    return result


def top_heatmaps(
    model: Any,
    concepts: Concepts,
    result: ConceptScan,
    concept: int,
    *,
    data: Any = None,
) -> list[tuple[TopEntry, np.ndarray, np.ndarray]]:
    """A concept's top images: per entry the ``(H, W, 3)`` uint8 picture and its map over it,
    float32 in ``[0, 1]`` (upsampled, divided by the concept's best scan value).
    """
    from torch.nn import functional as F

    from actviz.analysis.concepts.hooks import resolve_hook
    from actviz.data.receptive import _load
    from actviz.data.sources import resolve_model

    spec = resolve_model(model)
    net = spec.model
    point = resolve_hook(net, result.layer)
    module = dict(net.named_modules())[point.module]
    entries = result.top(concept)
    peak = float(result.values[concept, 0]) if entries else 1.0
    out = []
    got: list[torch.Tensor] = []

    def hook(_m: Any, args: tuple, output: Any) -> None:
        from actviz.core.structures import first_tensor

        if not got:
            got.append(first_tensor(args[0] if point.side == "input" else output).detach().clone())

    with forward_hooks([module], hook), eval_mode(net):
        for entry in entries:
            tensor, picture = _load(spec, entry, data)
            got.clear()
            with torch.no_grad():
                net(tensor[None].to(device=spec.expected.device, dtype=spec.expected.dtype))
            vectors, spatial = to_vectors(got[0], concepts.d_in)
            with torch.no_grad():
                z = concepts.encode(vectors)[:, concept]
            if len(spatial) == 2:
                heat = z.reshape(1, 1, *spatial).float()
                heat = F.interpolate(
                    heat, size=picture.shape[:2], mode="bilinear", align_corners=False
                )[0, 0]
            else:  # tokens or a vector: one value over the whole picture
                heat = torch.full(picture.shape[:2], float(z.max()))
            heat = (heat / peak if peak > 0 else heat).clamp(0, 1)
            out.append((entry, picture, heat.cpu().numpy().astype(np.float32)))
    return out
