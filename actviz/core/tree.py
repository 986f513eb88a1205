"""The module tree of a model, from ``named_modules()``: as the views show it (:class:`ModuleTree`,
parameter counts and shapes) and as a capture needs it (:class:`ModelPlan`, kept per model,
weakly, and checked before use), the naming of its layers for captures, edits and the CLI, and
which layers a fresh model gets ticked (:func:`default_layers`)."""

from __future__ import annotations

import contextlib
import difflib
import math
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from actviz.core.records import Capture

_PLANS: weakref.WeakKeyDictionary[nn.Module, ModelPlan] = weakref.WeakKeyDictionary()
#: Default ticks are capped at this many layers so the first run stays quick to look at.
DEFAULT_TICK_LIMIT = 8
#: Generic containers: their outputs are their last child's output, so they are walked through.
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
#: A text model's default ticks are every block (spread over this many when there are more).
DEFAULT_BLOCK_LIMIT = 48


class ModelPlan:
    """The module tree of one model as a capture uses it: ``names`` in order, ``index`` (name ->
    position), ``leaves``, and ``inplace`` (positions of torch.nn modules with that attribute)."""

    __slots__ = ("_children", "_refs", "index", "inplace", "leaves", "names")

    def __init__(self, named: list[tuple[str, nn.Module]], keep: bool = True) -> None:
        self.names = [name for name, _ in named]
        self.index = {name: i for i, name in enumerate(self.names)}
        modules = [mod for _, mod in named]
        # Without children (``None`` entries do not count); no ``children()`` generator each.
        self.leaves = [
            i for i, m in enumerate(modules) if all(c is None for c in m._modules.values())
        ]
        self.inplace = [
            i
            for i, mod in enumerate(modules)
            if "inplace" in mod.__dict__ and type(mod).__module__.startswith("torch.nn.")
        ]
        # What :meth:`modules` checks against; a plan made with ``keep=False`` never matches.
        self._refs: list[weakref.ref] = []
        self._children: list[dict] | None = None
        if keep:
            self._refs = [weakref.ref(mod) for mod in modules]
            self._children = [
                {k: None if v is None else weakref.proxy(v) for k, v in mod._modules.items()}
                for mod in modules
            ]

    @property
    def kept(self) -> bool:
        """Whether this plan is kept for the model's next capture (standing for the tree)."""
        return self._children is not None

    def leaf_names(self) -> list[str]:
        """Names of the modules without children (the root if it has none); a new list."""
        return [self.names[i] for i in self.leaves]

    def modules(self) -> list[nn.Module] | None:
        """The modules, in :attr:`names` order; None once the tree has changed (or died)."""
        if self._children is None:
            return None
        modules = [ref() for ref in self._refs]
        # Equal to its proxy only if the very same module; a dead one raises ReferenceError (as
        # does a child mapping that cannot be compared).
        with contextlib.suppress(Exception):
            if [mod._modules for mod in modules] == self._children:  # type: ignore[union-attr]
                return modules  # type: ignore[return-value]
        return None


def model_plan(model: nn.Module) -> tuple[ModelPlan, list[nn.Module]]:
    """The :class:`ModelPlan` of ``model`` and ``list(model.modules())``: the kept plan while
    the tree is unchanged (TorchScript's child mappings do not compare: always a new one)."""
    plan = None
    with contextlib.suppress(TypeError):  # not weakly referenceable
        plan = _PLANS.get(model)
    if plan is not None and (modules := plan.modules()) is not None:
        return plan, modules
    named = list(model.named_modules())
    try:
        plan = ModelPlan(named)
    except TypeError:  # a module that cannot be weakly referenced: no plan is kept
        return ModelPlan(named, keep=False), [mod for _, mod in named]
    if not isinstance(model, torch.jit.ScriptModule):
        with contextlib.suppress(TypeError):
            _PLANS[model] = plan
    return plan, [mod for _, mod in named]


def leaf_names(model: nn.Module) -> list[str]:
    """Qualified names of the modules without children (the root if it has none)."""
    return model_plan(model)[0].leaf_names()


def resolve_layers(model: nn.Module, layers: Sequence[str] | str | None) -> list[str]:
    """Check ``layers`` (None: every leaf) against ``model.named_modules()``; deduplicated.
    ``ValueError`` for an unknown name, suggesting close matches."""
    plan = model_plan(model)[0]
    return _resolve(plan.index, plan.leaf_names, layers, type(model).__name__)


def _resolve(
    known: Mapping[str, Any],
    leaves: Callable[[], list[str]],
    layers: Sequence[str] | str | None,
    model_type: str,
) -> list[str]:
    if layers is None:
        return leaves()
    if isinstance(layers, str):
        layers = [layers]
    out: dict[str, None] = {}  # ordered and deduplicated
    for name in layers:
        if name not in known:
            close = difflib.get_close_matches(name, [n for n in known if n], n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"unknown layer {name!r}{hint} (names come from model.named_modules(); "
                f"{model_type} has {len(known)} modules)"
            )
        out[name] = None
    return list(out)


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
        self.nodes, self._by_name = nodes, {n.name: n for n in nodes}

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


def default_layers(tree: ModuleTree, limit: int = DEFAULT_TICK_LIMIT) -> list[str]:
    """A few layers to tick on a fresh model: at most ``limit`` block outputs, spread evenly, and
    the last leaf; a text model gets every transformer block (up to :data:`DEFAULT_BLOCK_LIMIT`)."""
    leaves = tree.leaves()
    if not leaves or leaves == [""]:
        return [""] if "" in tree else []
    head = leaves[-1]
    # A text model (an embedding first): its blocks, the children of its outermost block lists.
    text_blocks = _listed_blocks(tree) if "Embedding" in tree[leaves[0]].type_name else []
    if text_blocks:
        picks = [b for b in text_blocks if b != head]
        return _in_tree_order(tree, _spread(picks, DEFAULT_BLOCK_LIMIT) + [head])
    # Containers are walked through; any other module with children is a block.
    blocks = _walk_blocks(tree, lambda node: None if node.type_name in _CONTAINERS else [node.name])
    if len(blocks) < 2:
        # One wrapper with all inside (a Hugging Face ``vit``): its blocks, not its first conv.
        listed = _listed_blocks(tree)
        blocks = listed if len(listed) >= 2 else blocks
    if len(blocks) > limit - 1:
        # Too many blocks (ResNet's 8 BasicBlocks): show the stages that group them instead.
        parents = list(dict.fromkeys(tree[b].parent or "" for b in blocks))
        if len(parents) >= 2 and "" not in parents:
            blocks = parents
    if len(blocks) < 2:  # no blocks: the convolutions of a long model, else every leaf
        convs = [n for n in leaves if "Conv" in tree[n].type_name] if len(leaves) > limit else []
        blocks = convs or leaves
    picks = [p for p in blocks if p != head]
    return _in_tree_order(tree, _spread(picks, limit - 1) + [head])


def _in_tree_order(tree: ModuleTree, names: list[str]) -> list[str]:
    """``names`` without repeats, in tree order."""
    order = {node.name: i for i, node in enumerate(tree.nodes)}
    return sorted(dict.fromkeys(names), key=order.__getitem__)


def _walk_blocks(tree: ModuleTree, pick: Callable[[Any], list[str] | None]) -> list[str]:
    """Names ``pick(node)`` gives for modules with children, top down (None: walk into them)."""
    blocks: list[str] = []

    def walk(name: str) -> None:
        for child in tree[name].children:
            node = tree[child]
            if node.is_leaf:
                continue
            if (found := pick(node)) is None:
                walk(child)
            else:
                blocks.extend(found)

    walk("")
    return blocks


def _listed_blocks(tree: ModuleTree) -> list[str]:
    """The children with children of the outermost ``ModuleList``s."""

    def pick(node: Any) -> list[str] | None:
        inner = [c for c in node.children if not tree[c].is_leaf]
        return inner if node.type_name == "ModuleList" and inner else None

    return _walk_blocks(tree, pick)


def _spread(items: list[str], n: int) -> list[str]:
    if len(items) <= n:
        return list(items)
    return [items[round(i * (len(items) - 1) / max(n - 1, 1))] for i in range(n)]
