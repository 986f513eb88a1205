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
