"""Attention probabilities per head, and attention rollout.

Fused kernels never form the probabilities, so :func:`capture_attention` runs the model once
more, forward only, on its unfused path (Hugging Face ``eager``, timm ``fused_attn = False``)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.display.attribution import _pick, _resize, _unit
from actviz.display.layer_views import as_numpy
from actviz.display.token_maps import SequenceLayout

log = logging.getLogger(__name__)
_MISSING = object()


@dataclass(frozen=True)
class AttentionSite:
    """Where one attention module's probabilities are recorded."""

    name: str  # the attention module (what the window lists)
    record: str  # the module whose output holds them
    index: int | None  # position in that output's tuple; None: the output itself


def _hf_specs(model: nn.Module) -> list[tuple[type | None, str | None, int, str | None]]:
    """``(class, name suffix, index, layer)`` of every ``attentions`` recorder HF models declare."""
    specs = []
    for module in model.modules():
        table = getattr(type(module), "_can_record_outputs", None)
        if not isinstance(table, dict) or "attentions" not in table:
            continue
        entries = table["attentions"]
        for spec in entries if isinstance(entries, list) else [entries]:
            if isinstance(spec, type):
                specs.append((spec, None, 1, None))
            elif isinstance(spec, str):
                specs.append((None, spec, 1, None))
            else:  # an OutputRecorder
                cls, suffix = getattr(spec, "target_class", None), getattr(spec, "class_name", None)
                index, layer = int(getattr(spec, "index", 1)), getattr(spec, "layer_name", None)
                specs.append((cls, suffix, index, layer))
    return specs


def attention_modules(model: nn.Module) -> list[AttentionSite]:
    """The attention modules of ``model`` whose probabilities :func:`capture_attention` can
    record, in ``named_modules()`` order (Hugging Face and timm; empty for other models)."""
    sites: list[AttentionSite] = []
    specs = _hf_specs(model)
    for name, module in model.named_modules():
        dotted = f".{name}."
        for cls, suffix, index, layer in specs:
            hit = (cls is not None and isinstance(module, cls)) or (
                suffix is not None and f".{name}".endswith(suffix)
            )
            if hit and (layer is None or f".{layer.strip('.')}." in dotted):
                sites.append(AttentionSite(name, name, index))
                break
        else:
            drop = getattr(module, "attn_drop", None)
            if hasattr(module, "fused_attn") and isinstance(drop, nn.Module):
                sites.append(AttentionSite(name, f"{name}.attn_drop".lstrip("."), None))
    return sites


def _hf_configs(model: nn.Module) -> list[Any]:
    seen: dict[int, Any] = {}
    for module in model.modules():
        config = getattr(module, "config", None)
        if hasattr(config, "_attn_implementation"):  # with its sub-models' configs
            subs = [getattr(config, sub, None) for sub in getattr(config, "sub_configs", {}) or {}]
            for c in (config, *subs):
                if hasattr(c, "_attn_implementation"):
                    seen.setdefault(id(c), c)
    return list(seen.values())


@contextlib.contextmanager
def eager_attention(model: nn.Module) -> Iterator[None]:
    """Run ``model``'s attention unfused inside the block (Hugging Face ``eager``, timm
    ``fused_attn = False``); everything is put back as found on exit, also after an error."""
    configs = _hf_configs(model)
    fused = [m for m in model.modules() if isinstance(getattr(m, "fused_attn", None), bool)]
    slots = [(c, "_attn_implementation_internal") for c in configs]
    slots += [(m, "fused_attn") for m in fused]
    saved = [(obj, key, obj.__dict__.get(key, _MISSING)) for obj, key in slots]
    try:
        for config in configs:
            config._attn_implementation = "eager"
        for module in fused:
            module.fused_attn = False
        yield
    finally:
        for obj, key, value in saved:
            if value is _MISSING:
                obj.__dict__.pop(key, None)
            else:
                obj.__dict__[key] = value


@dataclass(frozen=True)
class AttentionMaps:
    """Attention probabilities of one run (arrays read-only): ``probs`` is
    ``{module: (N, heads, queries, keys)}`` float32 for ``layers`` in run order."""

    layers: tuple[str, ...]
    probs: Mapping[str, np.ndarray] = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "probs", MappingProxyType(dict(self.probs)))
        for arr in self.probs.values():
            arr.setflags(write=False)

    def heads(self, name: str, sample: int = 0) -> np.ndarray:
        """``(heads, T, T)`` maps of one sample."""
        return _pick(self.probs[name], sample)

    def mean(self, name: str, sample: int = 0) -> np.ndarray:
        """The mean over heads, ``(T, T)``."""
        return self.heads(name, sample).mean(axis=0)

    def stacked(self, sample: int = 0) -> list[np.ndarray]:
        """Every layer's ``(heads, T, T)`` of one sample, in order (for rollout)."""
        return [self.heads(n, sample) for n in self.layers]


def capture_attention(
    model: nn.Module,
    inputs: Any,
    *,
    should_stop: Callable[[], bool] | None = None,
    max_bytes: int | None = None,
) -> AttentionMaps | None:
    """Attention probabilities of every attention module of ``model`` on ``inputs`` (one
    extra forward pass under :func:`eager_attention`); None for a model it does not know.
    ``should_stop`` is polled per module call; ``max_bytes`` refuses (``CaptureTooLarge``) more."""
    from actviz.core.capture import capture

    if not (sites := attention_modules(model)):
        return None
    records, limits = [s.record for s in sites], dict(should_stop=should_stop, max_bytes=max_bytes)
    with eager_attention(model):
        cap = capture(model, inputs, records, gradients=False, keep_inputs=False, **limits)
    probs: dict[str, np.ndarray] = {}
    for site in sites:
        if site.record not in cap:
            continue
        out = cap[site.record].output
        if site.index is not None:
            fits = isinstance(out, (tuple, list)) and len(out) > site.index
            out = out[site.index] if fits else None
        if not isinstance(out, torch.Tensor) or out.dim() != 4:
            log.debug("no attention probabilities at %s", site.name)
            continue
        probs[site.name] = np.ascontiguousarray(as_numpy(out))
    if not probs:
        return None
    # The order the modules ran in (an encoder-decoder runs its modules out of tree order).
    ran = {name: i for i, name in enumerate(cap.names)}
    by_record = {s.name: s.record for s in sites}
    order = sorted(probs, key=lambda n: ran.get(by_record[n], len(ran)))
    return AttentionMaps(tuple(order), probs)


def attention_rollout(attentions: Sequence[Any]) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020) ``R = A_L' ... A_1'``, ``A'`` the head mean plus
    identity, rows renormalised: ``(T, T)`` float64 from ``(heads, T, T)``s in forward order."""
    if len(attentions) == 0:
        raise ValueError("attention rollout needs at least one layer")
    result: np.ndarray | None = None
    for a in attentions:
        if (arr := as_numpy(a).astype(np.float64)).ndim == 3:
            arr = arr.mean(axis=0)
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"attention maps must be (heads, T, T) or (T, T), got {arr.shape}")
        arr = arr + np.eye(arr.shape[0])
        arr = arr / arr.sum(axis=-1, keepdims=True)
        if result is not None and result.shape != arr.shape:
            raise ValueError(f"layers of different lengths: {result.shape} and {arr.shape}")
        result = arr if result is None else arr @ result
    assert result is not None
    return result


def rollout_map(
    rollout: np.ndarray, layout: SequenceLayout, size: tuple[int, int] | None = None
) -> np.ndarray:
    """The class token's (else the mean) rollout row over the patches, at ``size``, in [0, 1]."""
    rows, cols = layout.grid
    if rollout.shape[0] != layout.tokens:
        raise ValueError(f"a rollout over {rollout.shape[0]} tokens does not fit {layout}")
    row = rollout[0] if layout.prefix > 0 else rollout.mean(axis=0)
    grid = torch.as_tensor(np.asarray(row[layout.prefix :], dtype=np.float32)).reshape(rows, cols)
    grid = _resize(grid, size)
    return np.ascontiguousarray(_unit(grid - grid.min()).numpy(), dtype=np.float32)
