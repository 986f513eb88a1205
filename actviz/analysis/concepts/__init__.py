"""Concepts: sparse dictionaries (sparse autoencoders) on a layer's activations (Qt-free).

``c = actviz.concepts.train(vectors_or_data, "layer3", model=model, n_concepts=2048, k=16)``
learns a TopK dictionary; ``c.encode(x)``, ``c.decode(z)``, ``c.fvu(x)``, ``c.maps(capture,
"layer3")``; ``c.save(folder)`` and ``actviz.concepts.load(folder)`` use the SAELens folder
format, so published SAELens dictionaries (standard, topk, jumprelu) load too.
``actviz.edits.concept(c, [i])`` removes a concept from a layer's output during a capture;
:func:`scan_concepts` finds each concept's top images in a dataset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actviz.analysis.concepts.hooks import HookPoint, resolve_hook
from actviz.analysis.concepts.model import ARCHITECTURES, Concepts, load
from actviz.analysis.concepts.train import DEFAULT_BUDGET, TrainCancelled, TrainProgress, train

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_BUDGET",
    "ConceptScan",
    "Concepts",
    "HookPoint",
    "TrainCancelled",
    "TrainProgress",
    "load",
    "resolve_hook",
    "scan_concepts",
    "train",
]

if TYPE_CHECKING:  # pragma: no cover
    from actviz.analysis.concepts.scan import ConceptScan, scan_concepts


def __getattr__(name: str) -> Any:
    if name in ("ConceptScan", "scan_concepts"):
        from actviz.analysis.concepts import scan

        return getattr(scan, name)
    raise AttributeError(f"module 'actviz.analysis.concepts' has no attribute {name!r}")
