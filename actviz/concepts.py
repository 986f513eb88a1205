"""Concepts: sparse dictionaries learned on a layer's activations, or loaded from SAELens.

``actviz.concepts.train(data, "layer3", model=model)``, ``load(folder)``, ``scan_concepts``;
details in :mod:`actviz.analysis.concepts`.
"""

from __future__ import annotations

from actviz.analysis import concepts as _package
from actviz.analysis.concepts import *  # noqa: F403 - the package's public names, one list

__all__ = list(_package.__all__)
