"""The dataset atlas: where a layer puts every image of a dataset, and where a new input lands:
``actviz.atlas.build_atlas(scan, "layer4")`` on a scan with ``embeddings=True``
(:mod:`actviz.data.atlas_map`)."""

from __future__ import annotations

from actviz.data.atlas_map import (
    METHODS,
    Atlas,
    ChannelSplit,
    Projection,
    build_atlas,
    cosine_top,
    points_in_polygon,
    project,
    query_vector,
    separating_channels,
    umap_available,
)
from actviz.data.scan import estimate_memory
from actviz.data.scan_result import Embeddings, Neighbour, ScanMemory, ScanTooLarge

__all__ = [
    "METHODS", "Atlas", "ChannelSplit", "Embeddings", "Neighbour", "Projection", "ScanMemory",
    "ScanTooLarge", "build_atlas", "cosine_top", "estimate_memory", "points_in_polygon", "project",
    "query_vector", "separating_channels", "umap_available",
]  # fmt: skip
