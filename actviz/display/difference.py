"""Differences between two runs (A minus B): the one path to difference pictures
(:func:`prepare_difference`) and before/after predictions (:func:`prediction_change`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from actviz.core.structures import first_tensor
from actviz.core.targets import sequence_logits
from actviz.display.colormaps import DIVERGING_CMAP
from actviz.display.layer_views import layer_view
from actviz.display.logit_lens import token_texts
from actviz.display.prepared import DisplaySpec, Lazy, PreparedLayer
from actviz.display.repage import layer_mosaics
from actviz.display.stats import histogram, tensor_stats

#: The colour map of every difference picture (diverging: 0 in the middle).
DIFFERENCE_CMAP = DIVERGING_CMAP


def _tensor(cap: Any, name: str, call: int) -> torch.Tensor | None:
    calls = cap.records.get(name) if hasattr(cap, "records") else None
    return None if not calls or call >= len(calls) else first_tensor(calls[call].output)


def prepare_difference(
    cap_a: Any, cap_b: Any, spec: DisplaySpec, layers: Sequence[str] | None = None, *, call: int = 0
) -> dict[str, PreparedLayer]:
    """Run A minus run B per layer as prepared layers (mosaics symmetric about 0 in
    :data:`DIFFERENCE_CMAP`; no gradient views) for ``layers`` (default ``spec.layers`` or all
    both runs recorded); layers one run lacks or whose shapes differ are left out."""
    if layers is None:
        layers = spec.layers or [n for n in cap_a.names if n in cap_b.records]
    out: dict[str, PreparedLayer] = {}
    for name in layers:
        a, b = _tensor(cap_a, name, call), _tensor(cap_b, name, call)
        if a is None or b is None or tuple(a.shape) != tuple(b.shape):
            continue
        diff = a.detach().to("cpu", torch.float32) - b.detach().to("cpu", torch.float32)
        rec = cap_a.records[name][call]
        view = layer_view(diff, spec.sample)
        first, page = spec.first_channel(name), spec.page_size(name)
        order = spec.channel_orders.get(name)
        # No gradient view, no downsampling; symmetric about 0 (the diverging map).
        m, _ = layer_mosaics(
            view, None, spec.normalize, first, page=page, symmetric=True, order=order
        )
        stats = tensor_stats(diff)
        biggest = float(diff.abs().max()) if diff.numel() else 0.0
        stats.update(name=name, type=rec.module_type, max_abs=biggest, colormap=DIFFERENCE_CMAP)
        out[name] = PreparedLayer(
            name=name,
            module_type=rec.module_type,
            shape=tuple(diff.shape),
            calls=len(cap_a.records[name]),
            view=view,
            mosaic=m,
            grad_view=None,
            grad_mosaic=None,
            stats=stats,
            hist_lazy=Lazy(lambda d=diff: histogram(d)),
        )
    return out


class PredictionRow(NamedTuple):
    """One class in both runs: A's and B's probability and logit, and A minus B."""

    index: int
    name: str
    p_a: float
    p_b: float
    dp: float
    logit_a: float
    logit_b: float
    dlogit: float


@dataclass(frozen=True)
class PredictionChange:
    """How run A's predictions differ from run B's (one sample): ``rows``, both runs' top ``k``
    classes by probability; ``target``, the target's row; ``message``, why there are no rows."""

    rows: tuple[PredictionRow, ...]
    target: PredictionRow | None
    top_a: int | None
    top_b: int | None
    k: int
    sample: int
    message: str = ""

    @property
    def changed(self) -> bool:
        return self.top_a != self.top_b


def _logits(output: Any, sample: int) -> torch.Tensor | None:
    seq = sequence_logits(output)
    t = seq[:, -1, :] if seq is not None else first_tensor(output)
    if t is None or not t.is_floating_point() or t.ndim not in (1, 2) or t.numel() == 0:
        return None
    if t.ndim == 2:
        t = t[min(max(sample, 0), t.shape[0] - 1)]
    t = t.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(t).all()):
        big = torch.finfo(torch.float32).max
        t = torch.nan_to_num(t, nan=-big, posinf=big, neginf=-big)
    return t


def prediction_change(
    output_a: Any,
    output_b: Any,
    *,
    k: int = 5,
    categories: Sequence[str] | None = None,
    target: int | None = None,
    sample: int = 0,
    tokenizer: Any = None,
) -> PredictionChange:
    """Top classes (a language model's next tokens) of two outputs side by side, with
    their changes (A minus B); empty rows with a ``message`` when not comparable logits."""
    a, b = _logits(output_a, sample), _logits(output_b, sample)
    if a is None or b is None or a.shape != b.shape:
        why = "no class scores to compare"
        if a is not None and b is not None:
            why = f"the outputs have different sizes ({a.numel()} vs {b.numel()} classes)"
        return PredictionChange((), None, None, None, k, sample, why)
    pa, pb = torch.softmax(a, 0), torch.softmax(b, 0)
    kk = max(1, min(int(k), a.numel()))
    chosen = sorted({*torch.topk(pa, kk).indices.tolist(), *torch.topk(pb, kk).indices.tolist()})

    tokens = sequence_logits(output_a) is not None and not categories
    texts: dict[int, str] = {}
    if tokens and tokenizer is not None:
        wanted = sorted(set(chosen) | ({int(target)} if target is not None else set()))
        texts = {i: repr(t) for i, t in zip(wanted, token_texts(tokenizer, wanted), strict=True)}

    def row(i: int) -> PredictionRow:
        if tokens:
            name = texts.get(i, f"token {i}")
        else:
            name = categories[i] if categories and 0 <= i < len(categories) else f"class {i}"
        p_a, p_b = float(pa[i]), float(pb[i])
        l_a, l_b = float(a[i]), float(b[i])
        return PredictionRow(i, name, p_a, p_b, p_a - p_b, l_a, l_b, l_a - l_b)

    rows = sorted((row(i) for i in chosen), key=lambda r: (-max(r.p_a, r.p_b), r.index))
    target_row = row(int(target)) if target is not None and 0 <= int(target) < a.numel() else None
    return PredictionChange(
        tuple(rows), target_row, int(torch.argmax(pa)), int(torch.argmax(pb)), kk, sample
    )
