"""What :func:`~actviz.analysis.effects.channel_effects.effects` returns: per layer and channel the
estimated (and exact) effects, their rankings, agreement (Spearman) and JSON form; and what a
channel is set to when its effect is measured (:class:`Baseline`: zero, a dataset mean, another
run), one object for the estimate and the exact pass, so both measure the same replacement.
Bar charts of the effects (PIL, no Qt: :func:`effects_chart`): colours say the sign everywhere,
:data:`SUPPORTS_RGB` when replacing lowers the target, :data:`OPPOSES_RGB` when it raises it;
exact values in a darker shade beside their estimate."""

from __future__ import annotations

import math
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image, ImageDraw

from actviz.core.edit_kinds import source_output
from actviz.core.records import Capture
from actviz.data.atlas_map import frozen
from actviz.data.scan_result import Scan
from actviz.io.export.typeset import _BG, _INK, _fmt, _font, _text_w

#: Negative effect: setting the channel to the baseline lowers the target.
SUPPORTS_RGB = (52, 112, 184)
#: Positive effect: setting the channel to the baseline raises the target.
OPPOSES_RGB = (200, 70, 60)
_GRID = (215, 215, 215)
#: Channels verified per layer when ``channels`` is not given.
DEFAULT_VERIFY = 16
#: Samples per forward pass of the exact method.
DEFAULT_BATCH = 16


class Baseline:
    """A resolved baseline: ``"zero"``, ``"mean"`` (a per-channel value) or ``"patch"`` (another
    run's output at the same layer and call), with a one-line ``description``."""

    def __init__(
        self,
        kind: str,
        description: str,
        means: Mapping[str, np.ndarray] | None = None,
        source: Capture | None = None,
        scan: Scan | None = None,
    ) -> None:
        self.kind, self.description, self.source = kind, description, source
        self._means, self._scan = means, scan
        # Per (layer, call, rows, device, dtype): the source repeated for a batch, made once.
        self._repeated: dict[tuple, torch.Tensor] = {}

    def _mean(self, layer: str, channels: int) -> np.ndarray:
        if self._scan is not None:
            if layer not in self._scan.layers:
                raise ValueError(
                    f"baseline: layer {layer!r} was not in the scan (scanned: "
                    f"{', '.join(self._scan.layers)}); scan it too, or pick another baseline"
                )
            vec = np.array(self._scan.stats(layer).mean, dtype=np.float64)
        else:
            assert self._means is not None
            if layer not in self._means:
                raise ValueError(
                    f"baseline: no channel means for layer {layer!r} (given for "
                    f"{', '.join(self._means) or 'no layer'})"
                )
            vec = np.array(self._means[layer], dtype=np.float64).reshape(-1)
        if vec.shape[0] != channels:
            raise ValueError(
                f"baseline: {vec.shape[0]} channel means for layer {layer!r}, but its output has "
                f"{channels} channels along its channel dimension (a scan averages dimension 1; "
                f"for (N, T, D) sequences pass {{layer: array of D means}})"
            )
        return vec

    def _source(self, layer: str, call: int, t: torch.Tensor, rows: int) -> torch.Tensor:
        assert self.source is not None
        try:
            return source_output(self.source, layer, call, (rows, *t.shape[1:]))
        except ValueError as exc:
            raise ValueError(f"baseline: layer {layer!r}: {exc}") from None

    def _mean_view(self, layer: str, t: torch.Tensor, dim: int, dtype: Any) -> torch.Tensor:
        """The channel means shaped to broadcast over ``t`` along ``dim``."""
        shape = [1] * t.ndim
        shape[dim] = -1
        return torch.from_numpy(self._mean(layer, t.shape[dim])).to(t.device, dtype).view(shape)

    def release(self) -> None:
        """Drop the repeated copies made for batches (they may sit on the model's device)."""
        self._repeated.clear()

    def single(self, layer: str, call: int, a: torch.Tensor, dim: int) -> torch.Tensor | None:
        """The baseline of one recorded call ``a`` (float64, broadcastable); None for zero."""
        if self.kind == "zero":
            return None
        if self.kind == "mean":
            return self._mean_view(layer, a, dim, torch.float64)
        return self._source(layer, call, a, a.shape[0]).to(a.device, torch.float64)

    def batched(self, layer: str, call: int, t: torch.Tensor, dim: int, b: int) -> torch.Tensor:
        """The baseline of a batch ``t`` of ``b`` repeated samples, in ``t``'s dtype and device."""
        if self.kind == "zero":
            return torch.zeros((), dtype=t.dtype, device=t.device)
        if self.kind == "mean":
            key = ("mean", layer, t.ndim, dim, t.device, t.dtype)
            if key not in self._repeated:
                self._repeated[key] = self._mean_view(layer, t, dim, t.dtype)
            return self._repeated[key]
        key = ("patch", layer, call, b, t.device, t.dtype)
        if (rep := self._repeated.get(key)) is None:
            src = self._source(layer, call, t, t.shape[0] // b).to(t.device, t.dtype)
            rep = self._repeated[key] = src.repeat(b, *([1] * (src.ndim - 1)))
        return rep


def resolve_baseline(baseline: Any) -> Baseline:
    """``effects``'s ``baseline`` as a :class:`Baseline`: ``"zero"``, a Scan (channel means), a
    ``{layer: (C,) array}`` mapping or another run's Capture (patching); else ``TypeError``."""
    if isinstance(baseline, Baseline):
        return baseline
    if isinstance(baseline, str):
        if baseline.strip().lower() in ("zero", "zeros", "0"):
            return Baseline("zero", "zero")
        raise ValueError(
            f"unknown baseline {baseline!r}: use 'zero', a scan (actviz.scan), a dict "
            "{layer: channel means} or a capture of another run"
        )
    if isinstance(baseline, Scan):
        return Baseline("mean", f"channel mean over {baseline.count} scanned images", scan=baseline)
    if isinstance(baseline, Capture):
        return Baseline("patch", "patched from another run", source=baseline)
    if isinstance(baseline, Mapping):
        return Baseline("mean", "given channel means", means=dict(baseline))
    raise TypeError(
        "baseline must be 'zero', a Scan (actviz.scan), a dict {layer: channel means} or a "
        f"Capture of another run, not {type(baseline).__name__}"
    )


def pick_units(order: Any, chosen: Any, count: int, kinds: str, unit: str) -> list[int]:
    """The units to verify of ``count`` ranked in ``order``: None, the top :data:`DEFAULT_VERIFY`;
    an int ``k``, the top ``k``; ``"all"``; else the units given (checked, repeats dropped).
    ``kinds`` leads the message of a wrong string; ``unit`` names unit ``{}`` when out of range."""
    if chosen is None:
        return [int(c) for c in order[:DEFAULT_VERIFY]]
    if isinstance(chosen, str):
        if chosen != "all":
            raise ValueError(f"{kinds}, not {chosen!r}")
        return list(range(count))
    if isinstance(chosen, (int, np.integer)) and not isinstance(chosen, bool):
        return [int(c) for c in order[: int(chosen)]]
    out: list[int] = []
    for c in map(int, chosen):
        if not 0 <= c < count:
            raise ValueError(f"{unit.format(c)} is out of range (0..{count - 1})")
        if c not in out:
            out.append(c)
    return out


class EffectRow(NamedTuple):
    """One channel's figures: ``exact`` is None where it was not verified."""

    layer: str
    channel: int
    estimate: float
    exact: float | None

    @property
    def has_effect(self) -> bool:
        """Whether the channel has a bar to draw: its estimate or its exact effect is not zero
        (a classifier's other scores have neither; a contradicted estimate is worth seeing)."""
        return self.estimate != 0.0 or (self.exact is not None and self.exact != 0.0)


@dataclass(frozen=True)
class LayerEffects:
    """One layer's effects, one read-only entry per channel: ``estimate`` and ``exact`` (NaN where
    not ``verified``) float64, the ``channel_dim``, output ``shape`` and ``calls`` (summed over)."""

    layer: str
    estimate: np.ndarray
    exact: np.ndarray
    verified: np.ndarray
    channel_dim: int
    shape: tuple[int, ...]
    calls: int

    @classmethod
    def estimated(
        cls, layer: str, estimate: np.ndarray, dim: int, shape: tuple[int, ...], calls: int
    ) -> LayerEffects:
        """Estimates only, no channel verified yet."""
        n = len(estimate)
        nan, no = frozen(np.full(n, np.nan)), frozen(np.zeros(n, dtype=bool))
        return cls(layer, frozen(np.array(estimate, dtype=np.float64)), nan, no, dim, shape, calls)

    def with_exact(self, changes: Mapping[int, float]) -> LayerEffects:
        """These effects with the exact ``{channel: change}`` of ``changes`` (others kept)."""
        exact, verified = np.array(self.exact), np.array(self.verified)
        exact[list(changes)] = list(changes.values())
        verified[list(changes)] = True
        return replace(self, exact=frozen(exact), verified=frozen(verified))

    @property
    def channels(self) -> int:
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
        return np.argsort(-np.nan_to_num(key, nan=-1.0), kind="stable")


@dataclass(frozen=True)
class RunContext:
    """What :func:`verify` needs from the clean run (not part of the results' equality)."""

    inputs: Any
    output: Any
    target: Any
    baseline: Baseline
    edits: Mapping[str, tuple]
    #: Layers in the order they first ran (batches of neighbours share a long prefix).
    run_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Effects:
    """The result of :func:`effects`: per layer and channel, estimated (and exact) effects;
    ``method`` becomes ``"exact"`` once channels were verified; ``target_*`` describe the clean
    run's target; ``elapsed_s`` in total, ``exact_s`` of it over ``forwards`` exact passes."""

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
    context: RunContext | None = field(default=None, repr=False, compare=False)

    @classmethod
    def estimated(
        cls,
        cap: Any,
        layers: Sequence[str],
        results: Mapping[str, LayerEffects],
        baseline: str,
        warnings: Sequence[str],
        start: float,
        **more: Any,
    ) -> Effects:
        """Estimates of ``layers`` on capture ``cap``'s target, begun at ``start``
        (``time.perf_counter()``); ``more``: further fields (``context``, ...)."""
        return cls(
            layers=tuple(layers),
            results=types.MappingProxyType(dict(results)),
            method="estimate",
            baseline=baseline,
            target_value=float(cap.target_value) if cap.target_value is not None else math.nan,
            target_description=cap.target_description,
            target_index=cap.target_index,
            warnings=tuple(warnings),
            elapsed_s=time.perf_counter() - start,
            **more,
        )

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
        """The ``k`` channels of ``layer`` of largest ``|effect|`` by ``by``, verified first."""
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
        return spearman(res.estimate[res.verified], res.exact[res.verified])

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
            "target": {k: getattr(self, f"target_{k}") for k in ("value", "description", "index")},
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
    sorted_x = x[order]
    first = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])  # each run of ties
    last = np.r_[first[1:], len(x)] - 1
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.repeat((first + last) / 2.0, last - first + 1)
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (ties: average ranks); NaN where it is
    undefined: fewer than two pairs, a constant side, or a non-finite value."""
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


def effect_colour(value: float, exact: bool = False) -> tuple[int, int, int]:
    """The bar colour of an effect: by sign, darker for an exact value."""
    rgb = SUPPORTS_RGB if value < 0 else OPPOSES_RGB
    return tuple(int(c * 0.6) for c in rgb) if exact else rgb  # type: ignore[return-value]


def _unit(eff: Effects, layer: str) -> str:
    # A layer ranked by a dictionary's concepts: each bar removes one concept (x - z_i d_i).
    return "concept" if getattr(eff, "dictionaries", {}).get(layer) is not None else "channel"


def chart_title(eff: Effects, layer: str) -> str:
    """What :func:`effects_chart`'s bars of ``layer`` measure, as its title says it."""
    if _unit(eff, layer) == "concept":
        return f"{layer}: effect of removing each concept"
    return f"{layer}: effect of setting each channel to {eff.baseline}"


def effects_chart(eff: Effects, layer: str, k: int = 32) -> Image.Image:
    """The ``k`` channels of ``layer`` with the largest ``|estimate|`` as bars, largest first,
    with exact bars where verified; channels without effect are left out and counted."""
    top_rows = eff.top(layer, k)
    # As in the window: channels without effect get no empty slot; the footer counts them.
    rows = [r for r in top_rows if r.has_effect]
    left_out = len(top_rows) - len(rows)
    n = max(len(rows), 1)
    values = [r.estimate for r in rows] + [r.exact for r in rows if r.exact is not None]
    finite = np.array([v for v in values if math.isfinite(v)] or [0.0])
    hi, lo = max(0.0, float(finite.max())), min(0.0, float(finite.min()))
    span = (hi - lo) or 1.0
    slot = max(14, min(36, 960 // n))
    plot_h, left, top = 240, 64, 58
    width, height = max(left + n * slot + 16, 420), top + plot_h + 52
    img = Image.new("RGB", (width, height), _BG)
    draw = ImageDraw.Draw(img)
    font, small = _font(13), _font(10)

    def y_of(v: float) -> float:
        return top + plot_h * (hi - v) / span

    zero = y_of(0.0)
    verified = sum(r.exact is not None for r in rows)
    sub = f"target {eff.target_description}"
    if verified:
        rho = eff.rank_correlation(layer)
        rho_text = f"{rho:.2f}" if math.isfinite(rho) else "n/a"
        sub += f"; exact beside estimate for {verified}, rank correlation {rho_text}"
    draw.text((8, 6), chart_title(eff, layer), fill=_INK, font=font)
    draw.text((8, 24), sub, fill=_INK, font=small)
    legend_x = 8
    for label, colour in (
        ("supports (lowers target)", SUPPORTS_RGB),
        ("opposes (raises target)", OPPOSES_RGB),
        ("exact: darker", effect_colour(-1.0, exact=True)),
    ):
        draw.rectangle([legend_x, 40, legend_x + 9, 49], fill=colour)
        draw.text((legend_x + 13, 39), label, fill=_INK, font=small)
        legend_x += 22 + _text_w(draw, label, small)
    for v in (hi, lo):
        draw.line([left - 4, y_of(v), width - 8, y_of(v)], fill=_GRID)
        text = _fmt(v)
        draw.text((left - 8 - _text_w(draw, text, small), y_of(v) - 6), text, fill=_INK, font=small)
    for i, row in enumerate(rows):
        x0 = left + i * slot
        bar = (slot - 4) // (2 if row.exact is not None else 1)
        pairs = [(row.estimate, False)] + ([(row.exact, True)] if row.exact is not None else [])
        for j, (v, exact) in enumerate(pairs):
            if not math.isfinite(v):
                continue
            x, y = x0 + 2 + j * bar, y_of(v)
            draw.rectangle(
                [x, min(y, zero), x + max(bar - 1, 1), max(y, zero)], fill=effect_colour(v, exact)
            )
        label = str(row.channel)
        lx = x0 + (slot - _text_w(draw, label, small)) // 2
        draw.text((lx, top + plot_h + 6 + (i % 2) * 12 * (slot < 26)), label, fill=_INK, font=small)
    draw.line([left - 4, zero, width - 8, zero], fill=_INK)
    footer = f"{_unit(eff, layer)} (largest |estimate| first)"
    if left_out:
        footer += f"; {left_out} without effect left out"
    draw.text((8, height - 16), footer, fill=_INK, font=small)
    return img
