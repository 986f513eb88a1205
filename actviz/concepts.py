"""Concepts: sparse dictionaries learned on a layer's activations, or loaded from SAELens.

``c = actviz.concepts.train(data, "layer3", model=model, n_concepts=2048, k=16)`` learns a
TopK sparse autoencoder on every spatial position (or token) of the layer, streaming the data
within a memory budget; ``c.encode(x)``, ``c.decode(z)``, ``c.fvu(x)``, ``c.heldout_fvu``,
``c.l0``, ``c.dead_fraction``; ``c.maps(capture, "layer3")`` gives each concept's map for one
input; ``c.save(folder)`` / ``actviz.concepts.load(folder)`` use the SAELens folder format;
``actviz.edits.concept(c, [i])`` removes concept ``i`` during a capture;
``actviz.concepts.scan_concepts(model, data, c)`` finds each concept's top images and
``top_heatmaps`` where it fires on them. See :mod:`actviz.analysis.concepts` for the details.
"""

from __future__ import annotations

from actviz.analysis import concepts as _package
from actviz.analysis.concepts import *  # noqa: F403 - the package's public names, one list

__all__ = list(_package.__all__)
