"""Opening models: by name, from files and code, the zoos, the demo, big-model placement."""

from actviz.core.moved import moved

__getattr__ = moved(__name__, {"open_model": "actviz.io.models.loading"})
