"""Walking the nested outputs models return: tensors, tuples, lists, dicts and dataclasses."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Yield every tensor inside ``obj``, depth first, in declaration order.

    Parameters
    ----------
    obj
        A tensor, or a tuple/list/dict/dataclass (nested freely) that may hold tensors.
    """
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from iter_tensors(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from iter_tensors(value)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from iter_tensors(getattr(obj, field.name))


def first_tensor(obj: Any) -> torch.Tensor | None:
    """Return the first tensor inside ``obj`` (see :func:`iter_tensors`), or None."""
    return next(iter_tensors(obj), None)


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """Rebuild ``obj`` with ``fn`` applied to every tensor; other leaves are kept if simple.

    Non-tensor leaves that are plain scalars (int, float, bool, str, None) are kept; anything
    else becomes None so records never pin arbitrary user objects.
    """
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {key: map_tensors(value, fn) for key, value in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(map_tensors(value, fn) for value in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(value, fn) for value in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: map_tensors(getattr(obj, f.name), fn) for f in dataclasses.fields(obj)}
    if obj is None or isinstance(obj, (int, float, bool, str)):
        return obj
    return None


def named_tensors(obj: Any, prefix: str = "output") -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(path, tensor)`` for every tensor inside ``obj``, in :func:`iter_tensors` order.

    Paths read like Python: ``output[0]``, ``output['out']``, ``output.logits``.
    """
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from named_tensors(value, f"{prefix}[{key!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from named_tensors(value, f"{prefix}[{i}]")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from named_tensors(getattr(obj, field.name), f"{prefix}.{field.name}")


def clone_keep_layout(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with the same sizes and strides (memory format), autograd included.

    ``clone()`` keeps the strides of a dense tensor (channels-last, permuted) but makes a
    gapped view (a slice of channels, every other column) dense, and kernels can round
    differently on another layout. Such a view gets a copy with its very strides (the gaps
    are allocated, never read). Overlapping views (``expand``) are copied densely.
    """
    copy = t.clone()
    if copy.stride() == t.stride() or not _non_overlapping(t):
        return copy
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(t)


def _non_overlapping(t: torch.Tensor) -> bool:
    reach = 0  # highest offset the smaller strides can reach
    for stride, size in sorted((s, n) for s, n in zip(t.stride(), t.size(), strict=True) if n > 1):
        if stride <= reach:
            return False
        reach += stride * (size - 1)
    return True
