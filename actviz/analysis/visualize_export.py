"""Moved to :mod:`actviz.analysis.visualize.picture_files`."""

from actviz.core.moved import moved

__getattr__ = moved(
    __name__,
    {n: "actviz.analysis.visualize.picture_files" for n in ("reproduce", "write_visualization")},
)
