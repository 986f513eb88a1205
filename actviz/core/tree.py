"""The module tree of a model, from ``named_modules()``, with parameter counts and shapes."""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from actviz.core.capture import Capture


@dataclass(eq=False, repr=False, slots=True)
class ParamInfo:
    """A parameter or buffer of one module (its own); ``norm`` is computed on first read, as walking
    every weight at each model switch would stall the GUI thread."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    requires_grad: bool
    _norm: float | None = None
    #: A weak reference: the tree must not keep a switched-away model's weights alive.
    _tensor: weakref.ref | None = None

    @property
    def norm(self) -> float:
        """The tensor's L2 norm (NaN when empty, uninitialised, or freed before it was read)."""
        if self._norm is None:
            tensor = self._tensor() if self._tensor is not None else None
            self._norm = _norm(tensor) if tensor is not None else float("nan")
            self._tensor = None
        return self._norm

    def __repr__(self) -> str:
        return f"ParamInfo({self.name!r}, {self.shape}, {self.dtype!r})"

    @property
    def numel(self) -> int:
        return 0 if self.dtype == "uninitialized" else math.prod(self.shape)


@dataclass
class ModuleNode:
    """One entry of ``named_modules()``."""

    name: str
    type_name: str
    depth: int
    parent: str | None
    children: list[str] = field(default_factory=list)
    is_leaf: bool = True
    own_params: int = 0
    total_params: int = 0
    parameters: list[ParamInfo] = field(default_factory=list)
    buffers: list[ParamInfo] = field(default_factory=list)
    training: bool = False
    output_shape: tuple[int, ...] | None = None
    calls: int = 0
    extra_repr: str = ""

    @property
    def short_name(self) -> str:
        """The last component of the qualified name ("(model)" for the root)."""
        return self.name.rsplit(".", 1)[-1] if self.name else "(model)"


class ModuleTree:
    """Every module of a model in ``named_modules()`` order (root first)."""

    def __init__(self, nodes: list[ModuleNode]):
        self.nodes = nodes
        self._by_name = {n.name: n for n in nodes}

    def __getitem__(self, name: str) -> ModuleNode:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[ModuleNode]:
        return iter(self.nodes)

    @property
    def root(self) -> ModuleNode:
        return self.nodes[0]

    def leaves(self) -> list[str]:
        """Names of the modules without children."""
        return [n.name for n in self.nodes if n.is_leaf]

    def descendants(self, name: str, leaves_only: bool = False) -> list[str]:
        """Names below ``name`` (not including it), in tree order."""
        prefix = f"{name}." if name else ""
        return [
            n.name
            for n in self.nodes
            if n.name != name and n.name.startswith(prefix) and (n.is_leaf or not leaves_only)
        ]

    def names_of_type(self, type_name: str) -> list[str]:
        """Names of every module whose class name is ``type_name``."""
        return [n.name for n in self.nodes if n.type_name == type_name]


def _info(name: str, t: torch.Tensor) -> ParamInfo:
    if isinstance(t, nn.parameter.UninitializedTensorMixin):
        # Lazy modules (nn.LazyLinear...) have no shape until their first forward.
        return ParamInfo(name, (), "uninitialized", t.requires_grad, float("nan"))
    dtype = str(t.dtype).replace("torch.", "")
    return ParamInfo(name, tuple(t.shape), dtype, t.requires_grad, None, weakref.ref(t))


def _norm(t: torch.Tensor) -> float:
    with torch.no_grad():
        if t.numel() and (t.is_floating_point() or t.is_complex()):
            return float(torch.linalg.vector_norm(t.detach().float()))
        return float("nan") if t.numel() == 0 else float(t.detach().double().norm())


def module_tree(model: nn.Module, capture: Capture | None = None) -> ModuleTree:
    """The module tree of ``model`` (TorchScript too): one node per ``named_modules()`` entry, root
    first; a ``capture`` of this model fills ``output_shape`` and ``calls``."""
    named = list(model.named_modules())
    ids = {id(m): name for name, m in named}
    nodes: list[ModuleNode] = []
    for name, mod in named:
        parent = name.rsplit(".", 1)[0] if "." in name else ("" if name else None)
        own = [_info(p_name, p) for p_name, p in mod.named_parameters(recurse=False)]
        bufs = [_info(b_name, b) for b_name, b in mod.named_buffers(recurse=False) if b is not None]
        children = [ids[id(c)] for c in mod.children() if id(c) in ids]
        # The class name the user wrote (a TorchScript module's ``original_name``).
        scripted = isinstance(mod, torch.jit.ScriptModule)
        original = getattr(mod, "original_name", None) if scripted else None
        try:
            extra = mod.extra_repr()
        except Exception:  # noqa: BLE001 - a user's extra_repr must not break the tree
            extra = ""
        node = ModuleNode(
            name=name,
            type_name=original if isinstance(original, str) and original else type(mod).__name__,
            depth=0 if not name else name.count(".") + 1,
            parent=parent,
            children=children,
            is_leaf=next(mod.children(), None) is None,
            own_params=sum(p.numel for p in own),
            total_params=sum(
                p.numel()
                for p in mod.parameters()
                if not isinstance(p, nn.parameter.UninitializedTensorMixin)
            ),
            parameters=own,
            buffers=bufs,
            training=mod.training,
            extra_repr=extra,
        )
        if capture is not None and name in capture:
            calls = capture.calls(name)
            t = calls[0].tensor
            node.output_shape = tuple(t.shape) if t is not None else None
            node.calls = len(calls)
        nodes.append(node)
    # A child whose parent path is no module name (shared modules) still needs a parent.
    names = set(ids.values())
    for node in nodes:
        if node.parent is not None and node.parent not in names:
            node.parent = ""
    return ModuleTree(nodes)
