"""Moved to :mod:`actviz.io.models.demo_model`."""

from actviz.core.moved import moved

__getattr__ = moved(__name__, {"demo_samples": "actviz.io.models.demo_model"})
