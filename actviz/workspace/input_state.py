"""A session's input, without widgets: :class:`InputState`, :func:`describe_value` and
:func:`input_problem` (whether an input fits the session's model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["InputState", "describe_value", "input_problem"]


@dataclass
class InputState:
    """The current input: what goes into the model and how to show it."""

    value: Any
    source: str
    kind: str
    image: np.ndarray | None
    description: str
    #: The token strings of a text input (token views' labels).
    tokens: tuple[str, ...] | None = None


def input_problem(session: Any, value: Any = None, source: str | None = None) -> str:
    """Why an input cannot run on ``session``'s model ("" when it can): the one gate for runs, live
    frames, exports, reports, effects and scans. A model given in memory is not checked.
    """
    from actviz.io.input_fit import input_misfit, reads_text

    if session.model is None:
        return "Open a model first."
    loaded = session.loaded_model
    if source in ("frames", "images"):  # pictures made with the model's own transforms
        if loaded is None or not reads_text(loaded):
            return ""
        if source == "frames":
            return f"The frames are pictures; {session.model_name} reads text."
        return (
            f"{session.model_name} reads text, not images: a dataset scan runs a folder of "
            "images through the model. Open an image model to scan one."
        )
    if value is None:
        if session.input is None:
            return "Open an input first (an image, a tensor file or a sample)."
        value, source = session.input.value, session.input.source or ""
    if loaded is None:
        return ""
    why = input_misfit(loaded, value, source or "", model=session.model)
    if why is None:
        return ""
    return f"The input does not fit {loaded.name} ({why}): open another input (Ctrl+I)."


def describe_value(value: Any, tokens: tuple[str, ...] | None) -> str:
    """What an input made in memory is, for the Model dock's caption: ``tensor (1, 3, 16, 16)
    float32``, ``5 tokens: [CLS] the cat …``, ``dict: input_ids (1, 5) int64, …`` ("": none
    of these). Without it a text input set from a script was captioned "no input"."""

    def one(t: Any) -> str:
        return f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"

    if isinstance(value, torch.Tensor):
        return f"tensor {one(value)}"
    if tokens:
        shown = " ".join(tokens[:8]) + (" …" if len(tokens) > 8 else "")
        return f"{len(tokens)} tokens: {shown}"
    if isinstance(value, dict):
        parts = [f"{k} {one(v)}" for k, v in value.items() if isinstance(v, torch.Tensor)]
        return f"dict: {', '.join(parts)}" if parts else ""
    if isinstance(value, (tuple, list)):
        parts = [one(v) for v in value if isinstance(v, torch.Tensor)]
        return f"{type(value).__name__}: {', '.join(parts)}" if parts else ""
    return ""
