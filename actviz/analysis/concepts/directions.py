"""Concepts placed by their decoder directions: :func:`concept_atlas` (the atlas's projection of
the unit directions) and :func:`similar_concepts` (closest by cosine).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from actviz.analysis.concepts.dictionary import Concepts
from actviz.data.atlas_map import Projection, cosine_top, project


def unit_directions(concepts: Concepts) -> np.ndarray:
    """``(d_sae, d_in)`` float64: each concept's decoder direction scaled to length 1 (a
    zero direction stays zero)."""
    w = concepts.W_dec.double().numpy()
    norms = np.linalg.norm(w, axis=1, keepdims=True)
    return w / np.where(norms > 0, norms, 1.0)


def concept_atlas(
    concepts: Concepts, method: str = "pca", dims: int = 2, seed: int = 0, **options: Any
) -> Projection:
    """Lay out the concepts by their unit decoder directions (arguments as
    :func:`actviz.data.atlas_map.project`); ``coords`` row ``i`` is concept ``i``'s place.
    """
    return project(unit_directions(concepts), method=method, dims=dims, seed=seed, **options)


def similar_concepts(concepts: Concepts, concept: int, k: int = 8) -> list[tuple[int, float]]:
    """The ``k`` concepts whose decoder directions are closest to ``concept``'s (itself left
    out): ``[(index, cosine), ...]``, most similar first."""
    d = concepts.d_sae
    if not 0 <= int(concept) < d:
        raise ValueError(f"concept {concept} is out of range (0..{d - 1})")
    unit = unit_directions(concepts)
    idx, sims = cosine_top(unit, unit[int(concept)], min(d, int(k) + 1))
    out = [(int(i), float(s)) for i, s in zip(idx, sims, strict=True) if int(i) != int(concept)]
    return out[: int(k)]
