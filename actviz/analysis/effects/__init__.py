"""Channel effects: estimated from one capture, verified by batched ablations."""

from actviz.core.moved import moved

__getattr__ = moved(
    __name__,
    {n: "actviz.analysis.effects.channel_effects" for n in ("estimate_from_capture", "verify")},
)
