"""Effects of a mix of layers, some ranked by channels and some by concepts (no Qt):
:func:`estimate_layers`, :func:`verify_layers`, :func:`unit_edit`, giving :class:`UnitEffects`.
"""

from __future__ import annotations

import dataclasses
import time
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actviz.analysis.concepts.dictionary import Concepts
from actviz.analysis.concepts.ranking import (
    _chosen,
    _description,
    concept_estimate_from_capture,
    run_concepts_exact,
)
from actviz.analysis.effects.channel_effects import _jobs, estimate_from_capture, verify
from actviz.analysis.effects.effect_results import (
    DEFAULT_BATCH,
    Effects,
    RunContext,
    resolve_baseline,
)
from actviz.analysis.effects.exact import TargetReader


@dataclass(frozen=True)
class UnitEffects(Effects):
    """Effects whose layers in ``dictionaries`` (``{layer: Concepts}``) are ranked by concepts."""

    dictionaries: Mapping[str, Concepts] = field(default_factory=dict, repr=False, compare=False)


def dictionary_of(eff: Effects | None, layer: str) -> Concepts | None:
    """The dictionary ``layer`` is ranked by in ``eff`` (None: by channels)."""
    return getattr(eff, "dictionaries", {}).get(layer)


def unit_name(eff: Effects | None, layer: str) -> str:
    """``"concept"`` for a layer ranked by concepts, else ``"channel"``."""
    return "concept" if dictionary_of(eff, layer) is not None else "channel"


def _channel_estimates(model: Any, cap: Any, layers: list[str], target: Any) -> Effects:
    """The channels' estimates, ranked; layers without float channels left out."""
    try:
        return estimate_from_capture(model, cap, layers, target=target)
    except ValueError:
        pass
    good = []
    for name in layers:
        try:
            estimate_from_capture(model, cap, [name], target=target)
        except ValueError:
            continue
        good.append(name)
    if not good:
        raise ValueError("None of the ticked layers has channels whose effect can be measured.")
    return estimate_from_capture(model, cap, good, target=target)


def estimate_layers(
    model: Any,
    cap: Any,
    layers: Sequence[str],
    dictionaries: Mapping[str, Concepts] | None = None,
    *,
    target: Any = None,
) -> Effects:
    """Estimated effects of ``layers`` from a capture with gradients: channels, or the concepts of
    layers in ``dictionaries``. ``ValueError`` without gradients, rankable layers or fitting
    vectors.
    """
    start = time.perf_counter()
    dicts = {n: d for n, d in (dictionaries or {}).items() if n in layers}
    plain = [n for n in layers if n not in dicts]
    if not dicts:
        return _channel_estimates(model, cap, plain, target)
    channels = _channel_estimates(model, cap, plain, target) if plain else None
    results = dict(channels.results) if channels is not None else {}
    warnings = list(channels.warnings) if channels is not None else []
    for name, d in dicts.items():
        est = concept_estimate_from_capture(model, cap, d, name)
        results[name] = est.results[name]
        warnings.extend(est.warnings)
    base = resolve_baseline("zero")
    baseline = _description(0.0) if channels is None else f"{base.description}; {_description(0.0)}"
    return UnitEffects.estimated(
        cap,
        [n for n in layers if n in results],
        results,
        baseline,
        warnings,
        start,
        context=RunContext(cap.inputs, cap.output, target, base, dict(cap.edits), tuple(cap.names)),
        dictionaries=types.MappingProxyType(dicts),
    )


def verify_layers(
    model: Any,
    eff: Effects,
    channels: Any = None,
    *,
    inputs: Any = None,
    batch: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Effects:
    """``eff`` with exact effects added, as :func:`~actviz.analysis.effects.channel_effects.verify`
    (same ``channels``: None, each layer's top 16; an int; ``{layer: units}``; ``"all"``), the
    layers ranked by concepts measured with the concept removed (``x - z_i d_i``)."""
    dicts = getattr(eff, "dictionaries", None) or {}
    if not dicts:
        return verify(
            model, eff, channels, inputs=inputs, batch=batch, progress=progress,
            should_stop=should_stop,
        )  # fmt: skip
    start = time.perf_counter()
    ctx = eff.context
    if ctx is None:
        raise ValueError("these effects carry no run to verify")

    def asked(layer: str) -> Any:
        return channels.get(layer, ()) if isinstance(channels, Mapping) else channels

    plain = [n for n in eff.layers if n not in dicts]
    sub = dataclasses.replace(
        eff, layers=tuple(plain), results=types.MappingProxyType({n: eff[n] for n in plain})
    )
    per_layer = {n: asked(n) for n in plain}
    n_channels = len(_jobs(sub, per_layer))
    concept_jobs = {n: _chosen(eff[n].estimate, asked(n), dicts[n].d_sae) for n in dicts}
    total = n_channels + sum(len(c) for c in concept_jobs.values())

    def step(offset: int) -> Callable[[int, int], None] | None:
        return None if progress is None else lambda done, _total: progress(offset + done, total)

    checked = sub
    if n_channels:
        checked = verify(
            model, sub, per_layer, inputs=inputs, batch=batch, progress=step(0),
            should_stop=should_stop,
        )  # fmt: skip
    results = dict(eff.results)
    results.update(checked.results)
    reader = TargetReader(ctx.output, ctx.target)
    clean = reader.clean_value(eff.target_value)
    done, seconds, forwards = n_channels, checked.exact_s - eff.exact_s, checked.forwards
    for name, chosen in concept_jobs.items():
        if not chosen:
            continue
        values, passes, took = run_concepts_exact(
            model, ctx.inputs if inputs is None else inputs, dicts[name], name, chosen, reader,
            batch=DEFAULT_BATCH if batch is None else batch, edits=ctx.edits,
            progress=step(done), should_stop=should_stop,
        )  # fmt: skip
        changes = {i: value - clean for i, value in zip(chosen, values, strict=True)}
        results[name] = results[name].with_exact(changes)
        done, seconds, forwards = done + len(chosen), seconds + took, forwards + passes
    return dataclasses.replace(
        eff,
        results=types.MappingProxyType(results),
        method="exact",
        elapsed_s=eff.elapsed_s + time.perf_counter() - start,
        exact_s=eff.exact_s + seconds,
        forwards=forwards,
    )


def unit_edit(eff: Effects, layer: str, units: Sequence[int], *, keep: bool) -> Any:
    """The what-if edit on ``layer`` that ablates ``units`` (``keep``: every unit but them):
    channels set to zero, or, for a layer ranked by concepts, the concepts removed."""
    from actviz.core import edit_kinds as E

    d = dictionary_of(eff, layer)
    if d is None:
        return (E.keep if keep else E.ablate)(list(units))
    chosen = [int(u) for u in units]
    if keep:
        chosen = sorted(set(range(d.d_sae)) - set(chosen))
    return E.concept(d, chosen, 0.0)
