"""Moved to :mod:`actviz.analysis.visualize.picture_files`."""

from actviz.core.moved import moved

_NEW = "actviz.analysis.visualize.picture_files"
__getattr__ = moved(__name__, {"reproduce": _NEW, "write_visualization": _NEW})
