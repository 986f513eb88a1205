"""The dataset atlas: a layer's pooled vectors of every scanned image laid out as a 2-D map
(numpy only, no shared state: safe on a worker thread)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from actviz.data.atlas_projection import METHODS as METHODS
from actviz.data.atlas_projection import Projection, project
from actviz.data.atlas_projection import umap_available as umap_available
from actviz.data.atlas_vectors import ChannelSplit, frozen, query_vector, separating_channels
from actviz.data.atlas_vectors import cosine_top as cosine_top
from actviz.data.atlas_vectors import points_in_polygon as points_in_polygon

#: How a scan's warning begins when its embeddings were left out for the memory budget.
NO_ATLAS_NOTE = "No atlas for this scan"


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
