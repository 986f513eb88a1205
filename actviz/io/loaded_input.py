"""What an opened input is and what a model expects of one: :class:`LoadedInput` (the value
for the forward, with its picture and caption), :class:`ExpectedInput` and
:func:`expected_input` (read from the model's first convolution and its metadata).

The records every opener (images, tensor files, random, text; a dataset scan's sources)
makes or reads, kept apart so each opener's module can use them without the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from actviz.io.models.loaded_model import LoadedModel

__all__ = ["ExpectedInput", "LoadedInput", "expected_input"]


@dataclass
class LoadedInput:
    """An input ready for the model, plus what the UI needs to show it.

    Attributes
    ----------
    value
        Tensor, tuple of tensors (positional inputs), dict of tensors (keyword inputs), or a
        list of ``(C, H, W)`` tensors (one list argument, for models that take a list).
    source
        The source as given (file path, ``random:...`` spec, or a description).
    kind
        ``"image"``, ``"tensor"`` or ``"random"``.
    image
        ``(H, W, 3)`` uint8 RGB of the first sample as the model sees it (after resize and
        crop, before normalisation), for overlays; None when the input is not image-like.
    description
        One line for status bars, e.g. ``"cat.png: RGB 640x480 -> 1x3x224x224 (...)"``.
    tokens
        For ``"text"`` inputs: one readable string per position of ``input_ids[0]`` (axis
        labels of token views); None otherwise.
    """

    value: Any
    source: str
    kind: str
    image: np.ndarray | None
    description: str
    tokens: list[str] | None = None


@dataclass
class ExpectedInput:
    """What is known about the model's input.

    Attributes
    ----------
    channels
        Input channels, from the first convolution or the recorded input shape.
    spatial_dims
        1, 2 or 3 for Conv1d/2d/3d inputs; None when unknown.
    layer
        How the evidence is named in messages, e.g. ``"first layer conv1: Conv2d(3, 64, ...)"``.
    size
        ``(H, W)`` expected by the model, when known.
    dtype, device
        Of the model's first floating parameter (float inputs are cast to them).
    """

    channels: int | None = None
    spatial_dims: int | None = None
    layer: str = ""
    size: tuple[int, int] | None = None
    dtype: torch.dtype = torch.float32
    device: torch.device = torch.device("cpu")


def _first_conv(model: nn.Module) -> tuple[str, nn.Module] | None:
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.conv._ConvNd):
            return name, module
        # TorchScript keeps the original class name and the conv attributes.
        original = getattr(module, "original_name", "")
        if isinstance(original, str) and re.fullmatch(r"Conv(Transpose)?[123]d", original):
            if isinstance(getattr(module, "in_channels", None), int):
                return name, module
    return None


def expected_input(
    model: nn.Module | None = None, loaded_model: LoadedModel | None = None
) -> ExpectedInput:
    """Read what a model expects as input from its first convolution and its metadata.

    Parameters
    ----------
    model
        The module (taken from ``loaded_model`` when not given).
    loaded_model
        Result of :func:`actviz.io.models.loading.open_model`, for input size and recorded shape.

    Returns
    -------
    ExpectedInput
        Fields are None where nothing can be told.
    """
    if model is None and loaded_model is not None:
        model = loaded_model.model
    exp = ExpectedInput()
    if loaded_model is not None:
        exp.size = loaded_model.input_size
        shape = getattr(loaded_model, "input_shape", None)
        if shape is not None and len(shape) >= 3:
            exp.channels = int(shape[1])
            exp.spatial_dims = len(shape) - 2
            exp.layer = f"exported input shape {tuple(shape)}"
    if model is None:
        return exp
    for param in model.parameters():
        exp.device = param.device
        if param.is_floating_point():
            exp.dtype = param.dtype
            break
    if exp.channels is None:
        found = _first_conv(model)
        if found is not None:
            name, conv = found
            type_name = getattr(conv, "original_name", None) or type(conv).__name__
            exp.channels = int(conv.in_channels)
            exp.spatial_dims = int(type_name[-2]) if type_name[-2].isdigit() else None
            out = getattr(conv, "out_channels", "?")
            exp.layer = f"first layer {name or '(model)'}: {type_name}({exp.channels}, {out}, ...)"
    return exp
