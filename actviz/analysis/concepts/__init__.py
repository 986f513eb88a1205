"""Concepts: sparse dictionaries (sparse autoencoders) on a layer's activations (Qt-free).

:func:`train` learns one; ``save``/:func:`load` use the SAELens folder format;
``actviz.edits.concept`` removes a concept during a capture. Names are imported on first use,
so the CLI's parser is built without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_BUDGET",
    "ConceptScan",
    "Concepts",
    "HookPoint",
    "TrainCancelled",
    "TrainProgress",
    "concept_atlas",
    "concept_effects",
    "concept_estimate_from_capture",
    "load",
    "resolve_hook",
    "scan_concepts",
    "similar_concepts",
    "top_heatmaps",
    "train",
]

_WHERE = {
    "ARCHITECTURES": "dictionary",
    "Concepts": "dictionary",
    "load": "dictionary",
    "DEFAULT_BUDGET": "training",
    "TrainCancelled": "training",
    "TrainProgress": "training",
    "train": "training",
    "HookPoint": "hooks",
    "resolve_hook": "hooks",
    "ConceptScan": "concept_scan",
    "scan_concepts": "concept_scan",
    "top_heatmaps": "concept_scan",
    "concept_effects": "ranking",
    "concept_estimate_from_capture": "ranking",
    "concept_atlas": "directions",
    "similar_concepts": "directions",
}

if TYPE_CHECKING:  # pragma: no cover
    from actviz.analysis.concepts.concept_scan import ConceptScan, scan_concepts, top_heatmaps
    from actviz.analysis.concepts.dictionary import ARCHITECTURES, Concepts, load
    from actviz.analysis.concepts.directions import concept_atlas, similar_concepts
    from actviz.analysis.concepts.hooks import HookPoint, resolve_hook
    from actviz.analysis.concepts.ranking import concept_effects, concept_estimate_from_capture
    from actviz.analysis.concepts.training import (
        DEFAULT_BUDGET,
        TrainCancelled,
        TrainProgress,
        train,
    )


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'actviz.analysis.concepts' has no attribute {name!r}")
    return getattr(importlib.import_module(f"actviz.analysis.concepts.{where}"), name)
