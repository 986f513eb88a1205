"""Naming a model's layers, the one rule for captures, edits, scans and the CLI: :func:`leaf_names`
and :func:`resolve_layers` (with close matches for an unknown name).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import nn

from actviz.core.plan import is_leaf, model_plan

__all__ = ["leaf_names", "resolve_layers"]


def leaf_names(model: nn.Module, modules: dict[str, nn.Module] | None = None) -> list[str]:
    """Qualified names of the modules without children (the root if it has none).

    ``modules``: ``dict(model.named_modules())`` when the caller has it already.
    """
    if modules is not None:
        return [name for name, mod in modules.items() if is_leaf(mod)]
    plan, _modules = model_plan(model)
    return plan.leaf_names()


def resolve_layers(
    model: nn.Module,
    layers: Sequence[str] | str | None,
    modules: dict[str, nn.Module] | None = None,
) -> list[str]:
    """Check ``layers`` (None: every leaf) against ``model.named_modules()``; deduplicated.

    Raises ``ValueError`` for an unknown name, suggesting close matches.
    """
    if modules is None:
        plan, _modules = model_plan(model)
        return _resolve(plan.index, plan.leaf_names, layers, type(model).__name__)
    return _resolve(modules, lambda: leaf_names(model, modules), layers, type(model).__name__)


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
