"""Compare two runs layer by layer: ``actviz.compare(cap_a, cap_b)``.

Per layer call with same-shaped outputs, in float64: ``cosine``, ``rel_l2`` (``|a - b| / |b|``,
B is the reference), ``max_abs`` and linear ``cka`` (None for a batch of one)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from actviz.core.records import Capture
from actviz.core.structures import first_tensor

#: Elements converted to float64 at a time, so a wide layer is not copied whole three times.
CHUNK = 1 << 20


@dataclass(frozen=True)
class LayerDiff:
    """How far one layer call (or the model output) of run A is from run B's."""

    name: str
    call_index: int
    shape: tuple[int, ...]
    cosine: float
    rel_l2: float
    max_abs: float
    cka: float | None

    def to_dict(self) -> dict:
        """JSON-ready: non-finite figures as None (JSON has no inf or NaN)."""
        out = {
            k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in asdict(self).items()
        }
        return {**out, "shape": list(self.shape)}


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare` (immutable)."""

    layers: tuple[LayerDiff, ...]
    output: LayerDiff | None
    tol: float
    first_divergence: LayerDiff | None
    #: ``(name, call_index, reason)`` of common layer calls that could not be compared.
    skipped: tuple[tuple[str, int, str], ...] = ()

    def layer(self, name: str, call: int = 0) -> LayerDiff:
        """The figures of layer ``name``, call ``call``."""
        for diff in self.layers:
            if diff.name == name and diff.call_index == call:
                return diff
        known = sorted({d.name for d in self.layers})
        raise KeyError(f"layer {name!r} call {call} was not compared (compared: {known})")

    def to_dict(self) -> dict:
        """What ``compare.json`` holds."""
        first = self.first_divergence
        return {
            "tol": self.tol,
            "metrics": {
                "cosine": "<a, b> / (|a| |b|) of the flattened outputs",
                "rel_l2": "|a - b| / |b| (b: run B, the reference)",
                "max_abs": "max |a - b|",
                "cka": "linear CKA over the batch (null for a batch of one)",
            },
            "first_divergence": None
            if first is None
            else {"name": first.name, "call_index": first.call_index, "rel_l2": first.rel_l2},
            "output": None if self.output is None else self.output.to_dict(),
            "layers": [d.to_dict() for d in self.layers],
            "skipped": [{"name": n, "call_index": k, "reason": why} for n, k, why in self.skipped],
        }


def layer_diff(name: str, call: int, a: torch.Tensor, b: torch.Tensor) -> LayerDiff:
    """The figures of :mod:`actviz.core.compare` for two tensors of one shape (A, then B), summed
    in float64 over :data:`CHUNK` pieces along the features (CKA's Gram matrices add up)."""
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{name!r}: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}")
    n = a.shape[0] if a.ndim else 1
    xa, xb = a.detach().reshape(n, -1), b.detach().reshape(n, -1)
    width = max(1, CHUNK // max(n, 1))
    dot = sq_a = sq_b = sq_d = max_abs = 0.0
    gram_a, gram_b = torch.zeros(n, n, dtype=torch.float64), torch.zeros(n, n, dtype=torch.float64)
    for start in range(0, xa.shape[1], width):
        x, y = (  # complex values by their magnitude
            (t.abs() if t.is_complex() else t).to("cpu", torch.float64)
            for t in (xa[:, start : start + width], xb[:, start : start + width])
        )
        d = x - y
        dot += float((x * y).sum())
        sq_a += float((x * x).sum())
        sq_b += float((y * y).sum())
        sq_d += float((d * d).sum())
        if d.numel():
            max_abs = max(max_abs, float(d.abs().max()))
        if n > 1:
            xc, yc = x - x.mean(0, keepdim=True), y - y.mean(0, keepdim=True)
            gram_a += xc @ xc.T
            gram_b += yc @ yc.T
    norm_a, norm_b, norm_d = math.sqrt(sq_a), math.sqrt(sq_b), math.sqrt(sq_d)
    # Two zero vectors point the same way; one zero vector, nowhere in particular.
    cosine = dot / (norm_a * norm_b) if norm_a and norm_b else float(norm_a == norm_b)
    rel = norm_d / norm_b if norm_b != 0.0 else (0.0 if norm_d == 0.0 else math.inf)
    cka = None
    if n > 1:
        # Linear CKA in its Gram form: N x N, cheap for wide layers and small batches.
        denom = float(torch.linalg.norm(gram_a)) * float(torch.linalg.norm(gram_b))
        if denom != 0.0 and math.isfinite(denom):
            cka = float((gram_a * gram_b).sum()) / denom
    return LayerDiff(name, call, tuple(a.shape), cosine, rel, max_abs, cka)


def compare(
    cap_a: Capture, cap_b: Capture, *, tol: float = 1e-4, layers: Sequence[str] | str | None = None
) -> Comparison:
    """Compare run A with run B (the reference) layer by layer, and their outputs.

    Parameters
    ----------
    tol
        ``first_divergence`` is the first layer (in A's order) whose ``rel_l2`` exceeds it.
    layers
        Only these layers (each must be in both captures); None: every layer both recorded.

    Raises
    ------
    ValueError
        A layer one capture lacks, or a negative ``tol``."""
    if not (isinstance(tol, (int, float)) and tol >= 0):
        raise ValueError(f"tol must be a number >= 0, not {tol!r}")
    if layers is None:
        names = [n for n in cap_a.names if n in cap_b.records]
    else:
        names = [layers] if isinstance(layers, str) else list(layers)
        for name in names:
            missing = [tag for tag, cap in (("A", cap_a), ("B", cap_b)) if name not in cap.records]
            if missing:
                raise ValueError(
                    f"layer {name!r} is not in run {' and '.join(missing)}'s capture; "
                    f"compare layers both runs recorded"
                )
    diffs: list[LayerDiff] = []
    skipped: list[tuple[str, int, str]] = []
    for name in names:
        calls_a, calls_b = cap_a.records[name], cap_b.records[name]
        for k in range(max(len(calls_a), len(calls_b))):
            if k >= len(calls_a) or k >= len(calls_b):
                skipped.append((name, k, "only one run made this call"))
                continue
            ta, tb = first_tensor(calls_a[k].output), first_tensor(calls_b[k].output)
            if ta is None or tb is None:
                skipped.append((name, k, "no tensor output"))
            elif tuple(ta.shape) != tuple(tb.shape):
                skipped.append((name, k, f"shapes differ: {tuple(ta.shape)} vs {tuple(tb.shape)}"))
            else:
                diffs.append(layer_diff(name, k, ta, tb))
    out_a, out_b = first_tensor(cap_a.output), first_tensor(cap_b.output)
    output = None
    if out_a is not None and out_b is not None and out_a.shape == out_b.shape:
        output = layer_diff("output", 0, out_a, out_b)
    # The diverging call that finished first in run A (not the first layer: calls interleave);
    # records without their order: the first in layer order.
    diverged = [d for d in diffs if d.rel_l2 > tol]
    seqs = [cap_a.records[d.name][d.call_index].seq for d in diverged]
    first = diverged[0] if diverged else None
    if diverged and all(s is not None for s in seqs):
        first = min(zip(seqs, range(len(diverged)), diverged, strict=True))[2]
    return Comparison(tuple(diffs), output, float(tol), first, tuple(skipped))
