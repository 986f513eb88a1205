"""A model's module tree as a capture needs it, kept per model (weakly) and checked before use,
and the naming of its layers for captures, edits, scans and the CLI."""

from __future__ import annotations

import contextlib
import difflib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

_PLANS: weakref.WeakKeyDictionary[nn.Module, ModelPlan] = weakref.WeakKeyDictionary()


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
    if plan is not None:
        modules = plan.modules()
        if modules is not None:
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
