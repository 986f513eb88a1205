"""What a capture hands the model: its own copies of the caller's inputs, at any depth.

Tensors are copied with strides kept, so the caller's are never written nor given
``requires_grad``; input gradients come back in the caller's structure."""

from __future__ import annotations

import collections.abc
import inspect
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from actviz.core.structures import clone_keep_layout, map_tensors

_LIST_TYPES = (list, collections.abc.Sequence, collections.abc.Iterable)


def forward_takes_list(model: nn.Module) -> bool:
    """Whether ``model.forward``'s first argument is annotated as a list: the model takes a
    list of images (torchvision's detectors), not a batch."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):  # TorchScript and builtins may have no signature
        return False
    positional = [p for p in params if p.kind not in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
    if not positional or positional[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return False
    annotation = positional[0].annotation
    if isinstance(annotation, str):  # ``from __future__ import annotations`` modules
        head = annotation.strip("'\" ").replace("typing.", "").split("[", 1)[0].strip()
        return head in ("list", "List", "Sequence", "Iterable")
    origin = typing.get_origin(annotation)
    return origin is not None and origin in _LIST_TYPES


@dataclass(frozen=True)
class PreparedInputs:
    """The model's arguments (fresh copies) and what the capture keeps: ``leaves``, per input
    tensor the one whose gradient is its saliency; ``copies``, the inputs untouched; ``pairs``,
    ``(tensor handed to the model, its kept copy)``."""

    args: tuple
    kwargs: dict
    leaves: list[torch.Tensor | None]
    copies: Any
    pairs: list[tuple[torch.Tensor, torch.Tensor]]


def prepare_inputs(
    inputs: Any,
    *,
    model: nn.Module | None = None,
    gradients: bool = True,
    device: torch.device | None = None,
) -> PreparedInputs:
    """Copy ``inputs`` (forms as for :func:`~actviz.core.capture.capture`, else ``TypeError``);
    ``gradients`` gives every floating tensor a saliency leaf, ``device`` moves tensors there."""
    leaves: list[torch.Tensor | None] = []
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []

    def convert(t: torch.Tensor) -> torch.Tensor:
        if device is not None and t.device != device:
            t = t.to(device)
        # Our own copy with the caller's strides (``detach`` only where needed: ops cost).
        copy = clone_keep_layout(t.detach() if t.requires_grad else t)
        if gradients and copy.is_floating_point():
            leaf = copy.requires_grad_(True)
            leaves.append(leaf)
            # A non-leaf copy (in-place ops stay legal), made with grad on to lead to the leaf.
            with torch.enable_grad():
                given = clone_keep_layout(leaf)
            kept = leaf.detach()
        else:
            leaves.append(None)
            given, kept = clone_keep_layout(copy), copy
        pairs.append((given, kept))
        return given

    args, kwargs = map_tensors(call_arguments(inputs, model), convert)
    kept = iter([copy for _given, copy in pairs])  # converted once: every pair is the inputs'
    return PreparedInputs(args, kwargs, leaves, map_tensors(inputs, lambda _t: next(kept)), pairs)


def call_arguments(inputs: Any, model: nn.Module | None) -> tuple[tuple, dict]:
    """``inputs`` as ``model``'s ``(args, kwargs)``: a tensor (or a list of images the model
    takes) is its one argument, a tuple / list its arguments, a mapping its keyword arguments;
    anything else ``TypeError``."""
    if isinstance(inputs, torch.Tensor) or (
        isinstance(inputs, list) and one_list_argument(inputs, model)
    ):
        return (inputs,), {}
    if isinstance(inputs, (list, tuple)):
        return tuple(inputs), {}
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    raise TypeError(
        "inputs must be a tensor, a tuple/list of arguments or a dict of keyword arguments "
        f"(nested lists, tuples and dicts of tensors allowed), not {type(inputs).__name__}"
    )


def one_list_argument(inputs: list, model: nn.Module | None) -> bool:
    """Whether ``inputs`` (a list) is one argument of images for ``model``, not arguments."""
    return (
        model is not None
        and bool(inputs)
        and all(isinstance(v, torch.Tensor) for v in inputs)
        and forward_takes_list(model)
    )


def list_layout(value: Any, as_list: bool) -> Any:
    """``value`` as one list of images (``as_list``: a batch's samples, own storage each) or as
    one batch tensor (same-shaped tensors stacked); anything else as it is."""
    if as_list:
        if isinstance(value, torch.Tensor) and value.ndim >= 2:
            return [v.clone() for v in value]
        if isinstance(value, tuple) and all(isinstance(v, torch.Tensor) for v in value):
            return list(value)
        return value
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, torch.Tensor) for v in value)
        and len({tuple(v.shape) for v in value}) == 1
    ):
        return torch.stack(list(value))
    return value
