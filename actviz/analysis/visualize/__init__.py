"""Feature visualisation: the image a channel wants to see, by activation maximisation."""

from actviz.core.moved import moved

__getattr__ = moved(
    __name__, {n: "actviz.analysis.visualize.feature_vis" for n in ("visualize", "layer_channels")}
)
