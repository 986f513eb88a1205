"""Which concepts matter: a dictionary's concepts ranked by their effect on the target.

As channel effects do for channels: removing concept ``i`` turns ``x`` into
``x - (1 - s) z_i d_i``; estimates are first-order from one capture, exact runs ``batch``
concepts per forward. Results are :class:`~actviz.analysis.effects.effect_results.Effects`.
"""

from __future__ import annotations

import dataclasses
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.analysis.concepts.dictionary import Concepts
from actviz.analysis.effects.effect_results import (
    DEFAULT_BATCH,
    Effects,
    LayerEffects,
    pick_units,
)
from actviz.analysis.effects.exact import TargetReader, one_sample, repeat_inputs, run_batches
from actviz.core.capture import capture
from actviz.core.edit_kinds import EditHooks, channel_dim, normalize_edits
from actviz.core.guards import ModelState
from actviz.core.records import Capture
from actviz.core.structures import first_tensor, replace_first


def _description(scale: float) -> str:
    if scale == 0:
        return "concept removed (x - z_i d_i)"
    return f"concept scaled x{scale:g} (x - {1 - scale:g} z_i d_i)"


def _vectors(t: torch.Tensor, dim: int, d_in: int, layer: str) -> torch.Tensor:
    if t.shape[dim] != d_in:
        raise ValueError(
            f"layer {layer!r}: its output {tuple(t.shape)} has {t.shape[dim]} channels along "
            f"dim {dim}; the dictionary reads vectors of {d_in}"
        )
    return t.movedim(dim, -1).reshape(-1, d_in)


def concept_estimate_from_capture(
    model: nn.Module,
    cap: Capture,
    concepts: Concepts,
    layer: str,
    *,
    scale: float = 0.0,
) -> Effects:
    """Estimated effects of every concept on ``layer`` from a capture with gradients (runs nothing).

    ``scale`` 0 removes a concept. Returns one-layer :class:`Effects` with ``d_sae`` "channels";
    ``ValueError`` without gradients, the layer, or matching width.
    """
    start = time.perf_counter()
    if not cap.gradients:
        raise ValueError("estimates need a capture with gradients (gradients=True)")
    if layer not in cap.records:
        raise ValueError(f"layer {layer!r} was not recorded by the capture")
    module = dict(model.named_modules())[layer]
    _, w_dec, _, _, _ = concepts._on(torch.device("cpu"), torch.float64)
    total = torch.zeros(concepts.d_sae, dtype=torch.float64)
    warnings: list[str] = []
    recs = cap.calls(layer)
    shape: tuple[int, ...] = ()
    dim = 1
    for call, rec in enumerate(recs):
        a = first_tensor(rec.output)
        if a is None or a.ndim < 2 or not a.is_floating_point():
            raise ValueError(f"layer {layer!r}: its output has no float channels")
        dim = channel_dim(module, a)
        if call == 0:
            shape = tuple(a.shape)
        g = first_tensor(rec.grad_output)
        if g is None:
            warnings.append(f"the target does not depend on layer {layer!r} (call {call})")
            continue
        with torch.no_grad():
            z = concepts.encode(_vectors(a.detach(), dim, concepts.d_in, layer))
            gv = _vectors(g.detach(), dim, concepts.d_in, layer).cpu().double()
            along = gv @ w_dec.T  # d_i . dT/dx at every position, then weighted by z_i there.
            total += (z.cpu().double() * along).sum(0)
    est = (-(1.0 - float(scale)) * total).numpy()
    result = LayerEffects.estimated(layer, est, dim, shape, len(recs))
    return Effects.estimated(
        cap, [layer], {layer: result}, _description(float(scale)), warnings, start
    )


class _RemoveOne:
    """The forward hook of the layer: sample ``j`` of a batch loses its own concept."""

    def __init__(self, layer: str, concepts: Concepts, scale: float) -> None:
        self.layer, self.concepts, self.keep = layer, concepts, scale
        self.chosen = torch.zeros(0, dtype=torch.int64)
        self.expand = False

    def arm(self, chosen: Sequence[int], expand: bool) -> None:
        self.chosen = torch.as_tensor(list(chosen), dtype=torch.int64)
        self.expand = expand

    def hook(self, module: nn.Module, args: tuple, output: Any) -> Any:
        t = first_tensor(output)
        if t is None or t.ndim < 2:
            raise ValueError(f"layer {self.layer!r}: its output has no channel axis")
        b = int(self.chosen.numel())
        if self.expand and t.shape[0] == 1 and b > 1:
            # The first edited module of a shared-prefix batch: the one sample becomes b.
            t = t.repeat(b, *([1] * (t.ndim - 1)))
        if t.shape[0] % b:
            raise ValueError(
                f"layer {self.layer!r}: its output {tuple(t.shape)} does not hold the batch of "
                f"{b} repeated samples in dimension 0 (pass batch=1)"
            )
        dim = channel_dim(module, t)
        c = self.concepts
        x = t.movedim(dim, -1)
        if x.shape[-1] != c.d_in:
            raise ValueError(
                f"layer {self.layer!r}: {x.shape[-1]} channels; the dictionary reads {c.d_in}"
            )
        z = c.encode(x)
        # Each row of dimension 0 belongs to sample row // n; that sample's concept only.
        per_row = self.chosen.to(t.device).repeat_interleave(t.shape[0] // b)
        lead = [1] * (x.ndim - 2)
        pick = per_row.view(-1, *lead, 1).expand(*z.shape[:-1], 1)
        zi = z.gather(-1, pick)
        _, w_dec, _, _, _ = c._on(zi.device, zi.dtype)
        part = zi * w_dec.index_select(0, per_row).view(x.shape[0], *lead, c.d_in)
        new = (x - (1.0 - self.keep) * part.to(x.dtype)).movedim(-1, dim)
        return replace_first(output, new)


def run_concepts_exact(
    model: nn.Module,
    inputs: Any,
    concepts: Concepts,
    layer: str,
    chosen: Sequence[int],
    reader: TargetReader,
    *,
    scale: float = 0.0,
    batch: int = DEFAULT_BATCH,
    edits: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[list[float], int, float]:
    """The target with each concept of ``chosen`` removed (or scaled), ``batch`` per pass:
    ``(values, forwards, seconds)``. The model is left as found.
    """
    modules = dict(model.named_modules())
    module = modules[layer]
    hook = _RemoveOne(layer, concepts, float(scale))
    extra = normalize_edits(edits) if edits else {}
    state = ModelState(model, out_of_place=False, modules=list(modules.values()))
    share = one_sample(inputs)
    start = time.perf_counter()

    def run(chunk: Sequence[int], expand: bool) -> list[float]:
        handles: list[Any] = []
        try:
            if extra:
                # Fresh per pass: an edit's call counter starts at 0 for each forward.
                handles.extend(EditHooks(modules, extra).register())
            hook.arm(chunk, expand)
            handles.append(module.register_forward_hook(hook.hook))
            args, kwargs = repeat_inputs(inputs, 1 if expand else len(chunk), model)
            with torch.no_grad():
                output = model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        return reader.values(output, len(chunk))

    try:
        state.apply(train=False)
        values, forwards = run_batches(
            chosen, batch, run, share, progress, should_stop, "exact concept"
        )
    finally:
        state.restore()
    return values, forwards, time.perf_counter() - start


def _chosen(est: np.ndarray, which: Any, d_sae: int) -> list[int]:
    order = np.argsort(-np.abs(np.nan_to_num(est)), kind="stable")
    return pick_units(
        order, which, d_sae, "concepts to verify: 'all', an int or indices", "concept {}"
    )


def concept_effects(
    model: nn.Module,
    inputs: Any,
    concepts: Concepts,
    layer: str,
    *,
    target: Any = None,
    method: str = "estimate",
    which: Any = None,
    scale: float = 0.0,
    batch: int | None = None,
    edits: Any = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Effects:
    """Rank the concepts of ``concepts`` on ``layer`` by their effect on the target.

    Parameters
    ----------
    method
        ``"estimate"`` (one capture with gradients) or ``"exact"`` (plus true ``which``).
    which
        None: the 16 largest ``|estimate|``; ``k``: the top ``k``; indices; ``"all"``.
    scale
        0 removes each concept; ``s`` keeps ``s`` times it.
    batch
        Concepts per exact pass (1 for outputs without the batch in dimension 0).
    edits
        What-if edits applied to every run.
    progress, should_stop
        ``progress(done, total)`` per exact pass; ``should_stop()`` cancels.
    """
    if method not in ("estimate", "exact"):
        raise ValueError(f"method must be 'estimate' or 'exact', not {method!r}")
    start = time.perf_counter()
    cap = capture(
        model, inputs, [layer], target=target, input_grads=False, edits=edits,
        should_stop=should_stop,
    )  # fmt: skip
    if layer not in cap.records:
        raise ValueError(f"layer {layer!r} never ran during the forward pass")
    est = concept_estimate_from_capture(model, cap, concepts, layer, scale=scale)
    warnings = tuple(cap.warnings) + est.warnings
    if method == "estimate":
        return dataclasses.replace(est, warnings=warnings, elapsed_s=time.perf_counter() - start)
    res = est.results[layer]
    chosen = _chosen(res.estimate, which, concepts.d_sae)
    reader = TargetReader(cap.output, target)
    clean = reader.clean_value(est.target_value)
    values, forwards, seconds = run_concepts_exact(
        model, inputs, concepts, layer, chosen, reader, scale=scale,
        batch=DEFAULT_BATCH if batch is None else batch, edits=cap.edits, progress=progress,
        should_stop=should_stop,
    )  # fmt: skip
    result = res.with_exact({i: value - clean for i, value in zip(chosen, values, strict=True)})
    return dataclasses.replace(
        est,
        results=types.MappingProxyType({layer: result}),
        method="exact",
        warnings=warnings,
        elapsed_s=time.perf_counter() - start,
        exact_s=seconds,
        forwards=forwards,
    )
