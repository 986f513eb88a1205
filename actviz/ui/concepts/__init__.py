"""Concepts in the window: panels of concepts, the Concept dock, Data > Train / Open concepts."""

from actviz.ui.concepts.feature import ConceptsFeature

__all__ = ["ConceptsFeature"]
