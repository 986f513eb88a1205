"""Which channels matter: every channel ranked by its effect on the target,
``target(c replaced by a baseline) - target(clean)``, estimated to first order from one capture
with gradients or measured exactly by batched ablations (both with the clean run's target)."""

from __future__ import annotations

import dataclasses
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from actviz.analysis.effects import effect_results
from actviz.analysis.effects.effect_results import Baseline, Effects, LayerEffects, RunContext
from actviz.analysis.effects.exact import TargetReader, run_exact
from actviz.core.capture import capture, resolve_layers
from actviz.core.edit_kinds import channel_dim
from actviz.core.records import Capture
from actviz.core.structures import first_tensor

METHODS = ("estimate", "exact")


def _layer_estimate(
    layer: str, module: nn.Module, cap: Capture, baseline: Baseline, warnings: list[str]
) -> LayerEffects:
    recs = cap.calls(layer)
    total: torch.Tensor | None = None
    dim, no_grad = 1, 0
    for call, rec in enumerate(recs):
        a = first_tensor(rec.output)
        if a is None or a.ndim < 2 or not a.is_floating_point():
            got = None if a is None else f"{tuple(a.shape)} {a.dtype}"
            raise ValueError(
                f"layer {layer!r}: its output ({got}) has no float channels to measure"
            )
        dim = channel_dim(module, a)
        g = first_tensor(rec.grad_output)
        b = baseline.single(layer, call, a, dim)
        if g is None:
            no_grad += 1
            contribution = torch.zeros(a.shape[dim], dtype=torch.float64, device=a.device)
        else:
            a64 = a.detach().to(torch.float64)
            diff = -a64 if b is None else b - a64
            dims = [d for d in range(a.ndim) if d != dim]
            contribution = (diff * g.detach().to(torch.float64)).sum(dim=dims)
        if total is None:
            total = contribution
        elif total.shape != contribution.shape:
            raise ValueError(
                f"layer {layer!r}: its calls have {total.shape[0]} and {contribution.shape[0]} "
                "channels; effects need the same channels on every call"
            )
        else:
            total = total + contribution
    if no_grad:
        warnings.append(
            f"the target does not depend on layer {layer!r}"
            + (f" in {no_grad} of its {len(recs)} calls" if no_grad < len(recs) else "")
            + ": its estimates there are 0"
        )
    assert total is not None
    shape = tuple(first_tensor(recs[0].output).shape)
    return LayerEffects.estimated(layer, total.cpu().numpy(), dim, shape, len(recs))


def estimate_from_capture(
    model: nn.Module,
    cap: Capture,
    layers: Sequence[str] | str | None = None,
    baseline: Any = "zero",
    *,
    target: Any = None,
) -> Effects:
    """Estimated effects of every channel of ``layers`` from a capture with gradients (runs
    nothing; ``target``: the capture's, so :func:`verify` measures the same). ``ValueError``
    without gradients, for a layer not recorded or without float channels, or a misfit baseline."""
    start = time.perf_counter()
    if not cap.gradients:
        # The capture's own warning says why it has none, when it was not asked to.
        why = "; ".join(w for w in cap.warnings if w.startswith("no gradients"))
        raise ValueError(
            "estimates need a capture with gradients (gradients=True)" + (f": {why}" if why else "")
        )
    names = list(cap.names) if layers is None else resolve_layers(model, layers)
    base = effect_results.resolve_baseline(baseline)
    modules = dict(model.named_modules())
    warnings: list[str] = []
    results: dict[str, LayerEffects] = {}
    for name in names:
        if name not in cap.records:
            raise ValueError(
                f"layer {name!r} was not recorded by the capture (it never ran, or was not "
                "among the capture's layers)"
            )
        results[name] = _layer_estimate(name, modules[name], cap, base, warnings)
    context = RunContext(cap.inputs, cap.output, target, base, dict(cap.edits), tuple(cap.names))
    return Effects.estimated(
        cap, names, results, base.description, warnings, start, context=context
    )


def _jobs(eff: Effects, channels: Any) -> list[tuple[str, int]]:
    """``(layer, channel)`` pairs to verify: see :func:`effects`'s ``channels``."""
    out: list[tuple[str, int]] = []
    for layer in eff.layers:
        res = eff.results[layer]
        chosen: Any = channels.get(layer, ()) if isinstance(channels, Mapping) else channels
        kinds = "channels: 'all', an int, channels or a dict"
        unit = f"channel {{}} of layer {layer!r}"
        picked = effect_results.pick_units(res.order(), chosen, res.channels, kinds, unit)
        out.extend((layer, c) for c in picked)
    return out


def verify(
    model: nn.Module,
    eff: Effects,
    channels: Any = None,
    *,
    inputs: Any = None,
    batch: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Effects:
    """``eff`` with the exact effects of ``channels`` added (earlier exact values kept; ``inputs``
    default to the capture's). ``ValueError`` for ``eff`` without its run, a channel out of
    range, or an output without the batch first (use ``batch=1``)."""
    start = time.perf_counter()
    if (ctx := eff.context) is None:
        raise ValueError("these effects carry no run to verify (make them with actviz.effects)")
    position = {name: i for i, name in enumerate(ctx.run_order)}
    jobs = sorted(_jobs(eff, channels), key=lambda job: position.get(job[0], len(position)))
    reader = TargetReader(ctx.output, ctx.target)
    clean = reader.clean_value(eff.target_value)
    inputs = ctx.inputs if inputs is None else inputs
    batch = effect_results.DEFAULT_BATCH if batch is None else batch
    values, forwards, seconds = run_exact(
        model, inputs, jobs, ctx.baseline, reader, batch, ctx.edits, progress, should_stop
    )
    changes: dict[str, dict[int, float]] = {layer: {} for layer in eff.layers}
    for (layer, channel), value in zip(jobs, values, strict=True):
        changes[layer][channel] = value - clean
    results = {layer: eff.results[layer].with_exact(changes[layer]) for layer in eff.layers}
    return dataclasses.replace(
        eff,
        results=types.MappingProxyType(results),
        method="exact",
        elapsed_s=eff.elapsed_s + time.perf_counter() - start,
        exact_s=eff.exact_s + seconds,
        forwards=eff.forwards + forwards,
    )


def effects(
    model: nn.Module,
    inputs: Any,
    layers: Sequence[str] | str,
    *,
    target: Any = None,
    baseline: Any = "zero",
    method: str = "estimate",
    channels: Any = None,
    batch: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Effects:
    """Rank every channel of ``layers`` by its effect on the target.

    Parameters
    ----------
    baseline
        What a channel is replaced by: ``"zero"``, a Scan (channel means), a ``{layer: (C,)
        array}`` dict, or another run's Capture (patching).
    method
        ``"estimate"`` (every channel, one capture) or ``"exact"`` (plus true changes).
    channels
        To verify: None, the top 16 per layer; ``k``; a list; ``{layer: channels}``; ``"all"``.
    batch
        Channels per forward pass (default 16; 1 for outputs without the batch first).
    progress, should_stop
        ``progress(done, total)`` after each exact pass; ``should_stop()`` raises
        ``CaptureCancelled``.

    Raises
    ------
    ValueError
        Unknown layers or method, a bad target, a baseline that does not fit a layer."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    start = time.perf_counter()
    if not (names := resolve_layers(model, layers)):
        raise ValueError("no layers given")
    base = effect_results.resolve_baseline(baseline)
    # Only the layers' output gradients are needed: no input saliency, no layer inputs.
    cap = capture(
        model,
        inputs,
        names,
        target=target,
        input_grads=False,
        keep_inputs=False,
        should_stop=should_stop,
    )
    est = estimate_from_capture(model, cap, names, base, target=target)
    est = dataclasses.replace(
        est, warnings=tuple(cap.warnings) + est.warnings, elapsed_s=time.perf_counter() - start
    )
    if method == "estimate":
        return est
    return verify(model, est, channels, batch=batch, progress=progress, should_stop=should_stop)
