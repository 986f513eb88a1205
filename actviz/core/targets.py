"""Turning a ``target`` argument into the scalar whose gradients a capture takes."""

from __future__ import annotations

from typing import Any

import torch

from actviz.core.structures import first_tensor

__all__ = ["resolve_target"]


def resolve_target(output: Any, target: Any) -> tuple[torch.Tensor, int | None, str]:
    """Turn ``target`` into a scalar tensor to differentiate, its class index and a description.

    See :func:`actviz.core.capture.capture` for the meaning of ``target``.
    """
    if callable(target) and not isinstance(target, (int, torch.Tensor)):
        value = target(output)
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise ValueError(
                "a callable target must return a tensor with one element, got "
                f"{type(value).__name__}{tuple(value.shape) if isinstance(value, torch.Tensor) else ''}"
            )
        name = getattr(target, "__name__", type(target).__name__)
        return value.reshape(()), None, f"custom target {name}(output)"
    out = first_tensor(output)
    if out is None:
        raise ValueError(
            "the model output holds no tensor, so there is nothing to take gradients of"
        )
    if not out.is_floating_point() and not out.is_complex():
        raise ValueError(f"the model output has dtype {out.dtype}; gradients need a float output")
    if target is None:
        if out.numel() == 1:
            return out.reshape(()), None, "the model's single output value"
        if out.dim() == 2:
            top = out.detach().argmax(dim=1)
            value = out.gather(1, top[:, None]).sum()
            rows = out.shape[0]
            desc = f"top-1 logit (class {int(top[0])})"
            if rows > 1:
                desc = f"top-1 logit of each of {rows} rows, summed (row 0: class {int(top[0])})"
            return value, int(top[0]), desc
        return out.sum(), None, f"sum of all {out.numel()} output elements"
    if isinstance(target, bool) or not isinstance(target, int):
        raise TypeError(f"target must be None, an int or a callable, not {type(target).__name__}")
    k = int(target)
    if out.dim() == 0:
        raise ValueError(f"target class {k} given, but the model output is a scalar")
    n_classes = out.shape[0] if out.dim() == 1 else out.shape[1]
    if not -n_classes <= k < n_classes:
        raise ValueError(f"target class {k} is out of range: the output has {n_classes} classes")
    k = k % n_classes
    value = out[k] if out.dim() == 1 else out[:, k].sum()
    return value.reshape(()), k, f"class {k}"
