"""Channel effects: estimated from one capture, verified by batched ablations."""

from actviz.core.moved import moved

_NEW = "actviz.analysis.effects.channel_effects"
__getattr__ = moved(__name__, {"estimate_from_capture": _NEW, "verify": _NEW})
