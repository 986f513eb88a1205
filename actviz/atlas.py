"""The dataset atlas: where a layer puts every image of a dataset, and where a new input lands.

``scan = actviz.scan(model, folder, ["layer4"], embeddings=True)``;
``emb = scan.embeddings("layer4")``; ``p = actviz.atlas.project(emb.vectors, method="pca")``
lays them out (``p.coords``, ``p.transform(vector)``); ``scan.neighbours("layer4", capture,
k=9)``; ``actviz.atlas.build_atlas(scan, "layer4")`` bundles it all. Details in
:mod:`actviz.data.atlas_map`.
"""

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
    "METHODS",
    "Atlas",
    "ChannelSplit",
    "Embeddings",
    "Neighbour",
    "Projection",
    "ScanMemory",
    "ScanTooLarge",
    "build_atlas",
    "cosine_top",
    "estimate_memory",
    "points_in_polygon",
    "project",
    "query_vector",
    "separating_channels",
    "umap_available",
]
