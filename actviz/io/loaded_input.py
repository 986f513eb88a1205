"""What an opened input is (:class:`LoadedInput`) and what a model expects (:class:`ExpectedInput`,
:func:`expected_input`, :func:`reads_text`): the records every opener shares."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from actviz.io.models.loaded_model import LoadedModel


@dataclass(frozen=True)
class LoadedInput:
    """An input ready for the model, and what the UI needs to show it: ``value`` is a tensor,
    tuple, dict or list of images; ``kind`` ``"image"``, ``"tensor"``, ``"random"`` or ``"text"``;
    ``image`` the first sample as the model sees it before normalisation (None if not
    image-like); ``description`` one status line; ``tokens`` a text input's token strings.
    A session keeps its input as one (embedded in its file: ``source`` is only shown)."""

    value: Any = field(repr=False)
    source: str = ""
    kind: str = "tensor"
    image: np.ndarray | None = field(default=None, repr=False)
    description: str = ""
    tokens: Sequence[str] | None = None

    @property
    def text(self) -> str | None:
        """The text of a ``text:`` input, else None."""
        return self.source[5:] if self.source.startswith("text:") else None


@dataclass
class ExpectedInput:
    """What is known about the model's input: ``channels``, ``spatial_dims`` (1-3), ``layer`` (the
    evidence, for messages), ``size`` ``(H, W)``, and the first parameter's ``dtype``/``device``."""

    channels: int | None = None
    spatial_dims: int | None = None
    layer: str = ""
    size: tuple[int, int] | None = None
    dtype: torch.dtype = torch.float32
    device: torch.device = torch.device("cpu")


def reads_text(loaded_model: Any) -> bool:
    """True for a model with a tokenizer and no image processor (a language model)."""
    return (
        getattr(loaded_model, "tokenizer", None) is not None
        and getattr(loaded_model, "processor", None) is None
    )


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
    """What a model expects as input, from its first convolution and ``loaded_model``'s metadata."""
    if model is None and loaded_model is not None:
        model = loaded_model.model
    exp = ExpectedInput()
    if loaded_model is not None:
        exp.size = loaded_model.input_size
        if (shape := getattr(loaded_model, "input_shape", None)) is not None and len(shape) >= 3:
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
    if exp.channels is None and (found := _first_conv(model)) is not None:
        name, conv = found
        type_name = getattr(conv, "original_name", None) or type(conv).__name__
        exp.channels = int(conv.in_channels)
        exp.spatial_dims = int(type_name[-2]) if type_name[-2].isdigit() else None
        out = getattr(conv, "out_channels", "?")
        exp.layer = f"first layer {name or '(model)'}: {type_name}({exp.channels}, {out}, ...)"
    return exp
