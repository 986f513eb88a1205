"""The one walker over nested model inputs and outputs, types kept (PyTorch's pytree plus
dataclasses and unregistered mappings), so every walk agrees on which tensors a structure holds."""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

_Tensor = torch.Tensor
# Never containers of tensors (torch.Size is a registered pytree node, rebuilt as a tuple).
_ATOMS = (str, bytes, int, float, complex, type(None), torch.Size, torch.dtype, torch.device)


def _children(obj: Any) -> tuple[list[Any], Callable[[list[Any]], Any], list[str]] | None:
    """``(children, rebuild, labels)`` of a container, None for a leaf; ``labels`` are path steps."""
    if isinstance(obj, _ATOMS):
        return None
    if (node := pytree.SUPPORTED_NODES.get(pytree._get_node_type(obj))) is not None:
        children, context = node.flatten_fn(obj)
        labels = [f"[{i}]" for i in range(len(children))]
        # Keys label a mapping's children unless its registered type flattens otherwise.
        if isinstance(obj, collections.abc.Mapping) and len(obj) == len(children):
            labels = [f"[{k!r}]" for k in obj.keys()]
        return children, lambda new: node.unflatten_fn(new, context), labels
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = [f.name for f in dataclasses.fields(obj)]
        return (
            [getattr(obj, n) for n in names],
            lambda new: _replace_fields(obj, names, new),
            [f".{n}" for n in names],
        )
    if isinstance(obj, collections.abc.Mapping):
        keys = list(obj.keys())
        return (
            [obj[k] for k in keys],
            lambda new: _remake_mapping(obj, dict(zip(keys, new, strict=True))),
            [f"[{k!r}]" for k in keys],
        )
    return None


def _replace_fields(obj: Any, names: list[str], values: list[Any]) -> Any:
    # No __init__ / __post_init__ runs (they may check or compute); frozen dataclasses work too.
    new = copy.copy(obj)
    for name, value in zip(names, values, strict=True):
        object.__setattr__(new, name, value)
    return new


def _remake_mapping(obj: Any, items: dict) -> Any:
    try:
        return type(obj)(items)
    except Exception:  # a mapping type that cannot be built from a dict
        return items


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Yield every tensor inside ``obj`` (pytree containers, dataclasses, mappings), depth first."""
    if isinstance(obj, _Tensor):
        yield obj
        return
    if (node := _children(obj)) is not None:
        for child in node[0]:
            yield from iter_tensors(child)


def first_tensor(obj: Any) -> torch.Tensor | None:
    """Return the first tensor inside ``obj`` (see :func:`iter_tensors`), or None."""
    if isinstance(obj, _Tensor):  # the common case, without a generator
        return obj
    return next(iter_tensors(obj), None)


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """Rebuild ``obj`` with ``fn`` applied to every tensor, in :func:`iter_tensors` order;
    containers keep their type (namedtuple, ``ModelOutput``, dataclass)."""
    if isinstance(obj, _Tensor):
        return fn(obj)
    return map_leaves(obj, lambda leaf: fn(leaf) if isinstance(leaf, _Tensor) else leaf)


def map_leaves(obj: Any, fn: Callable[[Any], Any]) -> Any:
    """Like :func:`map_tensors`, with ``fn`` applied to every leaf, tensor or not."""
    if isinstance(obj, _Tensor) or (node := _children(obj)) is None:
        return fn(obj)
    children, rebuild, _labels = node
    return rebuild([map_leaves(child, fn) for child in children])


def replace_first(obj: Any, new: torch.Tensor) -> Any:
    """``obj`` rebuilt with its first tensor (see :func:`first_tensor`) replaced by ``new``."""
    if isinstance(obj, _Tensor):
        return new
    first = iter([new])  # the first tensor gets ``new``, the others themselves
    return map_tensors(obj, lambda t: next(first, t))


def named_tensors(obj: Any, prefix: str = "output") -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(path, tensor)`` for every tensor inside ``obj`` (``output[0]``,
    ``output['out']``, ``output.logits``), in :func:`iter_tensors` order."""
    if isinstance(obj, _Tensor):
        yield prefix, obj
        return
    if (node := _children(obj)) is not None:
        for child, label in zip(node[0], node[2], strict=True):
            yield from named_tensors(child, prefix + label)


def describe(obj: Any, most: int = 6) -> str:
    """One line on what ``obj`` holds (``1x3x64x64 float32``, ``{input_ids: 1x8 int64, ...}``,
    ``(a, b)``, a type name); past ``most`` items, the first four and a count."""
    if isinstance(obj, _Tensor):
        shape = "x".join(str(s) for s in obj.shape) or "scalar"
        return f"{shape} {str(obj.dtype).replace('torch.', '')}"
    node = _children(obj)
    if node is None or (not isinstance(obj, dict) and first_tensor(obj) is None):
        return type(obj).__name__
    parts = [describe(child, most) for child in node[0]]
    mapping = isinstance(obj, collections.abc.Mapping)
    if mapping:
        parts = [f"{k}: {p}" for k, p in zip(obj.keys(), parts, strict=False)]
    if len(parts) > most:
        parts = parts[:4] + [f"... ({len(parts) - 4} more)"]
    return ("{%s}" if mapping else "(%s)") % ", ".join(parts)


def shapes(obj: Any) -> Any:
    """The tensor shapes of ``obj`` as JSON: a tensor's shape as a list, a mapping or a dataclass
    as a dict of its items' shapes, another container as a list of them, anything else None."""
    if isinstance(obj, _Tensor):
        return list(obj.shape)
    if (node := _children(obj)) is None:
        return None
    values = [shapes(child) for child in node[0]]
    if isinstance(obj, collections.abc.Mapping):
        return dict(zip(obj.keys(), values, strict=False))
    if dataclasses.is_dataclass(obj):
        return {label[1:]: v for label, v in zip(node[2], values, strict=True)}
    return values


def clone_keep_layout(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with the same sizes and strides, autograd included (overlaps are copied
    densely): ``clone()`` makes a gapped view dense, and kernels may round differently."""
    if (copy := t.clone()).stride() == t.stride() or not non_overlapping(t):
        return copy
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def non_overlapping(t: torch.Tensor, dense: bool = False) -> bool:
    """Whether no two of ``t``'s elements share memory (``dense``: and they tile it, any order)."""
    reach = 0  # highest offset the smaller strides can reach
    for stride, size in sorted((s, n) for s, n in zip(t.stride(), t.size(), strict=True) if n > 1):
        if stride <= reach or dense and stride != reach + 1:
            return False
        reach += stride * (size - 1)
    return True
