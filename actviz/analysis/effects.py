"""Which channels matter: every channel ranked by its effect on the target, estimated from one
capture with gradients and verified exactly by batched ablations.

The effect of channel ``c`` of a layer is the change of the target when that channel alone is
replaced by a baseline, ``target(replaced) - target(clean)``: negative when the channel
supports the target (setting it to the baseline lowers the target), positive when it works
against it.

* ``estimate`` (attribution patching): the first-order change, ``sum((b - a) * dT/da)`` over
  the channel's positions (every batch row, every call of a module that runs several times),
  from the activations ``a`` and gradients ``dT/da`` of one capture: nothing beyond what the
  capture computes, for every channel of every layer at once.
* ``exact``: the true change, for chosen channels (default: the top 16 of each layer by
  ``|estimate|``), ``batch`` of them per forward pass (:mod:`actviz.analysis.effects_exact`).

Baselines (:mod:`actviz.analysis.effects_baseline`): zero, a dataset scan's channel means, or
another run's activations (patching). Channels are the edits' channels
(:func:`actviz.core.edit_kinds.channel_dim`): dimension 1 of ``(N, C, ...)``, the last of
``(N, T, D)``. The target's choices (the top-1 class, a segmenter's pixels, the next token)
are made on the clean run and kept for every replaced run, so estimate and exact measure the
same quantity. The model is left exactly as found.

For a window: :func:`effects` and :func:`verify` take ``progress`` and ``should_stop`` and
return frozen results, so a worker thread can run them; :func:`estimate_from_capture` turns a
capture the window already has (live mode) into estimates without running the model, and
:func:`verify` adds exact values to any :class:`Effects` later.
"""

from __future__ import annotations

import dataclasses
import math
import time
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from actviz.analysis.effects_baseline import Baseline, resolve_baseline
from actviz.analysis.effects_exact import TargetReader, run_exact
from actviz.core.capture import capture, resolve_layers
from actviz.core.edit_kinds import channel_dim
from actviz.core.records import Capture
from actviz.core.structures import first_tensor

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_VERIFY",
    "EffectRow",
    "Effects",
    "LayerEffects",
    "effects",
    "estimate_from_capture",
    "spearman",
    "verify",
]

#: Channels verified per layer when ``channels`` is not given.
DEFAULT_VERIFY = 16
#: Samples per forward pass of the exact method.
DEFAULT_BATCH = 16
METHODS = ("estimate", "exact")


class EffectRow(NamedTuple):
    """One channel's figures: ``exact`` is None where it was not verified."""

    layer: str
    channel: int
    estimate: float
    exact: float | None

    @property
    def has_effect(self) -> bool:
        """Whether the channel has a bar to draw: its estimate or its exact effect is not
        zero (a classifier's scores other than the target's have neither; an estimate that
        the exact value contradicts is worth seeing)."""
        return self.estimate != 0.0 or (self.exact is not None and self.exact != 0.0)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64) if a.dtype != bool else np.array(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class LayerEffects:
    """One layer's effects (read-only arrays, one entry per channel).

    Attributes
    ----------
    layer
        Qualified module name.
    estimate
        ``(C,)`` float64: the first-order change of the target per channel.
    exact
        ``(C,)`` float64: the true change where ``verified``, NaN elsewhere.
    verified
        ``(C,)`` bool: channels whose exact effect was measured.
    channel_dim
        The dimension of the layer's output holding the channels.
    shape
        The output's shape (first call).
    calls
        How many times the module ran in the forward pass (its effects sum over calls).
    """

    layer: str
    estimate: np.ndarray
    exact: np.ndarray
    verified: np.ndarray
    channel_dim: int
    shape: tuple[int, ...]
    calls: int

    @property
    def channels(self) -> int:
        """Number of channels."""
        return int(self.estimate.shape[0])

    def row(self, channel: int) -> EffectRow:
        """The figures of one channel."""
        exact = float(self.exact[channel]) if self.verified[channel] else None
        return EffectRow(self.layer, int(channel), float(self.estimate[channel]), exact)

    def order(self, by: str = "estimate") -> np.ndarray:
        """Channels by decreasing ``|effect|`` (``by``: ``"estimate"`` or ``"exact"``; channels
        not verified go last for ``"exact"``); ties keep channel order."""
        if by == "estimate":
            key = np.abs(self.estimate)
        elif by == "exact":
            key = np.where(self.verified, np.abs(np.nan_to_num(self.exact, nan=np.inf)), -1.0)
        else:
            raise ValueError(f"by must be 'estimate' or 'exact', not {by!r}")
        key = np.nan_to_num(key, nan=-1.0)
        return np.argsort(-key, kind="stable")


@dataclass(frozen=True)
class _Context:
    """What :func:`verify` needs from the clean run (not part of the results' equality)."""

    inputs: Any
    output: Any
    target: Any
    baseline: Baseline
    edits: Mapping[str, tuple]
    #: Layers in the order they first ran: batches then mix neighbours only, which keeps
    #: their shared prefix long (see :mod:`actviz.analysis.effects_exact`).
    run_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Effects:
    """The result of :func:`effects`: per layer and channel, estimated (and exact) effects.

    Attributes
    ----------
    layers
        The layers, in the order asked.
    results
        ``{layer: LayerEffects}`` (read-only).
    method
        ``"estimate"``, or ``"exact"`` once channels were verified.
    baseline
        What channels were set to, in words.
    target_value, target_description, target_index
        The clean run's target, what it is, and its class (or token, or detected label) when
        it has one.
    warnings
        Things to know (a layer the target does not depend on, ...).
    elapsed_s
        Seconds in total; ``exact_s`` of them on exact passes, in ``forwards`` forward passes.
    """

    layers: tuple[str, ...]
    results: Mapping[str, LayerEffects] = field(repr=False)
    method: str
    baseline: str
    target_value: float
    target_description: str
    target_index: int | None = None
    warnings: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    exact_s: float = 0.0
    forwards: int = 0
    context: _Context | None = field(default=None, repr=False, compare=False)

    def __getitem__(self, layer: str) -> LayerEffects:
        try:
            return self.results[layer]
        except KeyError:
            raise KeyError(
                f"layer {layer!r} has no effects (layers: {', '.join(self.layers)})"
            ) from None

    def __iter__(self) -> Any:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def estimate(self, layer: str) -> np.ndarray:
        """``(C,)`` estimated effects of ``layer``."""
        return self[layer].estimate

    def exact(self, layer: str) -> np.ndarray:
        """``(C,)`` exact effects of ``layer`` (NaN where not verified)."""
        return self[layer].exact

    def top(
        self, layer: str, k: int = DEFAULT_VERIFY, by: str = "estimate"
    ) -> tuple[EffectRow, ...]:
        """The ``k`` channels of ``layer`` with the largest ``|effect|``, largest first.

        Parameters
        ----------
        layer
            A layer of these effects.
        k
            How many.
        by
            ``"estimate"`` or ``"exact"`` (verified channels first).
        """
        res = self[layer]
        return tuple(res.row(int(c)) for c in res.order(by)[: max(0, int(k))])

    def top_channels(self, layer: str, k: int, by: str = "estimate") -> tuple[int, ...]:
        """The channels of :meth:`top`, e.g. for ``actviz.edits.ablate`` or ``keep``."""
        return tuple(row.channel for row in self.top(layer, k, by))

    def table(self) -> tuple[EffectRow, ...]:
        """One row per channel of every layer (layers in order, channels in order)."""
        return tuple(
            self.results[layer].row(c)
            for layer in self.layers
            for c in range(self.results[layer].channels)
        )

    def rank_correlation(self, layer: str) -> float:
        """Spearman's rank correlation of estimate and exact over ``layer``'s verified
        channels; NaN with fewer than two, or when either side is constant."""
        res = self[layer]
        mask = res.verified
        return spearman(res.estimate[mask], res.exact[mask])

    def to_dict(self, top: int = DEFAULT_VERIFY) -> dict[str, Any]:
        """A JSON-ready summary (what ``effects.json`` holds): every channel's estimate, the
        exact values by channel, the rank correlation and the ``top`` channels per layer."""

        def num(v: float) -> float | None:
            return float(v) if math.isfinite(v) else None

        layers = {}
        for name in self.layers:
            res = self.results[name]
            verified = np.flatnonzero(res.verified)
            layers[name] = {
                "channels": res.channels,
                "channel_dim": res.channel_dim,
                "shape": list(res.shape),
                "calls": res.calls,
                "estimate": [float(v) for v in res.estimate],
                "exact": {str(int(c)): num(res.exact[c]) for c in verified},
                "rank_correlation": num(self.rank_correlation(name)),
                "top": [row._asdict() for row in self.top(name, top)],
            }
        return {
            "method": self.method,
            "baseline": self.baseline,
            "target": {
                "value": self.target_value,
                "description": self.target_description,
                "index": self.target_index,
            },
            "sign": "effect = target with the channel replaced - target; negative: the channel "
            "supports the target",
            "elapsed_s": self.elapsed_s,
            "exact_s": self.exact_s,
            "forwards": self.forwards,
            "warnings": list(self.warnings),
            "layers": layers,
        }


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 0, ties given their average rank."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (ties: average ranks).

    NaN where it is undefined: fewer than two pairs, a constant side, or a non-finite value.
    """
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    b = np.asarray(y, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"spearman needs two sequences of one length, got {a.shape} and {b.shape}")
    if a.size < 2 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return math.nan
    ra, rb = _ranks(a), _ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = math.sqrt(float((ra * ra).sum()) * float((rb * rb).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else math.nan


# --------------------------------------------------------------------------------------------
# estimate
# --------------------------------------------------------------------------------------------


def _layer_estimate(
    layer: str, module: nn.Module, cap: Capture, baseline: Baseline, warnings: list[str]
) -> LayerEffects:
    recs = cap.calls(layer)
    total: torch.Tensor | None = None
    shape: tuple[int, ...] = ()
    dim = 1
    no_grad = 0
    for call, rec in enumerate(recs):
        a = first_tensor(rec.output)
        if a is None or a.ndim < 2 or not a.is_floating_point():
            got = None if a is None else f"{tuple(a.shape)} {a.dtype}"
            raise ValueError(
                f"layer {layer!r}: its output ({got}) has no float channels to measure"
            )
        dim = channel_dim(module, a)
        if call == 0:
            shape = tuple(a.shape)
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
    est = total.cpu().numpy()
    size = est.shape[0]
    return LayerEffects(
        layer,
        _frozen(est),
        _frozen(np.full(size, np.nan)),
        _frozen(np.zeros(size, dtype=bool)),
        dim,
        shape,
        len(recs),
    )


def estimate_from_capture(
    model: nn.Module,
    cap: Capture,
    layers: Sequence[str] | str | None = None,
    baseline: Any = "zero",
    *,
    target: Any = None,
) -> Effects:
    """Estimated effects of every channel of ``layers`` from a capture with gradients.

    Runs nothing: live mode can call it on each frame's capture.

    Parameters
    ----------
    model
        The captured model (its modules decide the channel dimension).
    cap
        ``actviz.capture(model, inputs, layers, target=target)`` (gradients on; any options).
    layers
        Layers of ``cap``; None: every layer it recorded.
    baseline
        See :func:`effects`.
    target
        The ``target`` the capture was made with (so that :func:`verify` measures the same).

    Raises
    ------
    ValueError
        A capture without gradients, a layer it did not record, a layer without float
        channels, or a baseline that does not fit a layer.
    """
    start = time.perf_counter()
    if not cap.gradients:
        # The capture's own warning says why it has none, when it was not asked to.
        why = "; ".join(w for w in cap.warnings if w.startswith("no gradients"))
        raise ValueError(
            "estimates need a capture with gradients (gradients=True)" + (f": {why}" if why else "")
        )
    names = list(cap.names) if layers is None else resolve_layers(model, layers)
    base = resolve_baseline(baseline)
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
    return Effects(
        layers=tuple(names),
        results=types.MappingProxyType(results),
        method="estimate",
        baseline=base.description,
        target_value=float(cap.target_value) if cap.target_value is not None else math.nan,
        target_description=cap.target_description,
        target_index=cap.target_index,
        warnings=tuple(warnings),
        elapsed_s=time.perf_counter() - start,
        context=_Context(cap.inputs, cap.output, target, base, dict(cap.edits), tuple(cap.names)),
    )


# --------------------------------------------------------------------------------------------
# exact
# --------------------------------------------------------------------------------------------


def _jobs(eff: Effects, channels: Any) -> list[tuple[str, int]]:
    """``(layer, channel)`` pairs to verify: see :func:`effects`'s ``channels``."""
    out: list[tuple[str, int]] = []
    for layer in eff.layers:
        res = eff.results[layer]
        chosen: Any = channels
        if isinstance(channels, Mapping):
            chosen = channels.get(layer, ())
        if chosen is None:
            picked = [int(c) for c in res.order()[:DEFAULT_VERIFY]]
        elif isinstance(chosen, str):
            if chosen != "all":
                raise ValueError(f"channels: 'all', an int, channels or a dict, not {chosen!r}")
            picked = list(range(res.channels))
        elif isinstance(chosen, (int, np.integer)) and not isinstance(chosen, bool):
            picked = [int(c) for c in res.order()[: int(chosen)]]
        else:
            picked = []
            for c in chosen:
                c = int(c)
                if not 0 <= c < res.channels:
                    raise ValueError(
                        f"channel {c} of layer {layer!r} is out of range (0..{res.channels - 1})"
                    )
                if c not in picked:
                    picked.append(c)
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
    """``eff`` with the exact effects of ``channels`` added (earlier exact values are kept).

    Parameters
    ----------
    model
        The model ``eff`` was estimated on, unchanged since.
    eff
        From :func:`effects` or :func:`estimate_from_capture`.
    channels
        See :func:`effects`.
    inputs
        The clean run's inputs; None: those the capture kept (``Capture.inputs``).
    batch, progress, should_stop
        See :func:`effects`.

    Raises
    ------
    ValueError
        ``eff`` without its run (made by hand), a channel out of range, or an output
        without the batch in dimension 0 (use ``batch=1``).
    actviz.core.records.CaptureCancelled
        ``should_stop()`` returned True.
    """
    start = time.perf_counter()
    ctx = eff.context
    if ctx is None:
        raise ValueError("these effects carry no run to verify (make them with actviz.effects)")
    asked = _jobs(eff, channels)
    position = {name: i for i, name in enumerate(ctx.run_order)}
    jobs = sorted(asked, key=lambda job: position.get(job[0], len(position)))
    reader = TargetReader(ctx.output, ctx.target)
    clean = reader.clean_value(eff.target_value)
    values, forwards, seconds = run_exact(
        model,
        ctx.inputs if inputs is None else inputs,
        jobs,
        ctx.baseline,
        reader,
        batch=DEFAULT_BATCH if batch is None else batch,
        edits=ctx.edits,
        progress=progress,
        should_stop=should_stop,
    )
    exact = {layer: np.array(eff.results[layer].exact) for layer in eff.layers}
    verified = {layer: np.array(eff.results[layer].verified) for layer in eff.layers}
    for (layer, channel), value in zip(jobs, values, strict=True):
        exact[layer][channel] = value - clean
        verified[layer][channel] = True
    results = {
        layer: dataclasses.replace(
            eff.results[layer], exact=_frozen(exact[layer]), verified=_frozen(verified[layer])
        )
        for layer in eff.layers
    }
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
    model, inputs, layers, target
        As for :func:`actviz.capture` (``layers``: qualified module names).
    baseline
        What a channel is replaced by: ``"zero"``; a :class:`~actviz.data.scan_result.Scan` of
        these layers (each channel's mean over the scanned images); a dict ``{layer: (C,)
        array}`` of per-channel values; or a :class:`~actviz.core.records.Capture` of another
        run recording these layers (patching: that run's activation, position by position).
    method
        ``"estimate"``: first-order estimates of every channel from one capture with
        gradients. ``"exact"``: those, plus the true change for ``channels``.
    channels
        The channels to verify (``method="exact"``): None, the top 16 of each layer by
        ``|estimate|``; an int ``k``, the top ``k``; a list of channels for every layer; a
        dict ``{layer: channels}``; ``"all"``.
    batch
        Channels measured per forward pass (the input repeated that many times); default 16.
        Use 1 for a model whose output does not keep the batch in dimension 0.
    progress
        ``progress(done, total)``: channels verified so far, after each exact forward pass.
    should_stop
        Polled during the capture (before every module) and before each exact pass; True
        raises ``CaptureCancelled``.

    Returns
    -------
    Effects
        Frozen: ``.top(layer, k)``, ``.table()``, ``.rank_correlation(layer)``, ``.to_dict()``.

    Raises
    ------
    ValueError
        Unknown layers or method, a bad target, a baseline that does not fit a layer.
    actviz.core.records.CaptureCancelled
        ``should_stop()`` returned True.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    start = time.perf_counter()
    names = resolve_layers(model, layers)
    if not names:
        raise ValueError("no layers given")
    base = resolve_baseline(baseline)
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
    missing = [n for n in names if n not in cap.records]
    if missing:
        raise ValueError(f"layer {missing[0]!r} never ran during the forward pass")
    est = estimate_from_capture(model, cap, names, base, target=target)
    est = dataclasses.replace(
        est,
        warnings=tuple(cap.warnings) + est.warnings,
        elapsed_s=time.perf_counter() - start,
    )
    if method == "estimate":
        return est
    return verify(model, est, channels, batch=batch, progress=progress, should_stop=should_stop)
