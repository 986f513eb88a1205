"""Feature visualisation: the image a channel wants to see, by activation maximisation."""

from actviz.core.moved import moved

_NEW = "actviz.analysis.visualize.feature_vis"
__getattr__ = moved(__name__, {"visualize": _NEW, "layer_channels": _NEW})
