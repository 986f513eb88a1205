"""Concepts: sparse dictionaries learned on a layer's activations, or loaded from SAELens.

``c = actviz.concepts.train(data, "layer3", model=model, n_concepts=2048, k=16)`` learns a
TopK sparse autoencoder; ``c.encode``, ``c.decode``, ``c.maps(capture, "layer3")``,
``c.save(folder)`` / ``actviz.concepts.load(folder)`` (SAELens format);
``actviz.edits.concept(c, [i])`` removes concept ``i`` during a capture; ``scan_concepts`` and
``top_heatmaps`` find where concepts fire. Details in :mod:`actviz.analysis.concepts`.
"""

from __future__ import annotations

from actviz.analysis import concepts as _package
from actviz.analysis.concepts import *  # noqa: F403 - the package's public names, one list

__all__ = list(_package.__all__)
