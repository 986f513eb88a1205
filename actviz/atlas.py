"""The dataset atlas: where a layer puts every image of a dataset, and where a new input lands.

``scan = actviz.scan(model, folder, ["layer4"], embeddings=True)`` records each image's pooled
vector; ``emb = scan.embeddings("layer4")`` returns them (``.vectors``, ``.sources``,
``.labels``); ``p = actviz.atlas.project(emb.vectors, method="pca")`` lays them out
(``p.coords``) and places a new input with the same fit (``p.transform(vector)``);
``scan.neighbours("layer4", capture, k=9)`` gives the most similar images;
``actviz.atlas.build_atlas(scan, "layer4")`` bundles it all for one layer (a window's map).
See :mod:`actviz.data.atlas_map` for the details.
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
