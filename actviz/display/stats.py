"""Statistics and histograms of layer outputs, on the tensor's device: :func:`tensor_stats` is exact
(float64 torch, no host sync) or fast (float32 NumPy for finite CPU tensors, 1e-5 relative)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

HIST_BINS = 64
#: Layout of :func:`stats_vector`.
STAT_FIELDS = tuple("numel finite nan zeros mean std min max grad_norm has_grad".split())


def as_float(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached as a real float32 tensor (complex by magnitude), copied only if need be."""
    if (t := t.detach()).is_complex():
        return t.abs().float()
    return t if t.dtype == torch.float32 else t.float()


def _as_tensor(values: Any) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values
    return torch.as_tensor(np.asarray(values, dtype=np.float32))


def stats_vector(t: torch.Tensor, g: torch.Tensor | None = None) -> torch.Tensor:
    """Exact statistics of ``t`` (and the L2 norm of ``g``) as a float64 vector laid out as
    :data:`STAT_FIELDS`, computed on ``t``'s device without any host synchronisation."""
    f = as_float(t).reshape(-1)
    n, dev = f.numel(), f.device
    fin = torch.isfinite(f)
    n_fin = fin.sum().to(torch.float64)
    v = torch.where(fin, f, torch.zeros((), dtype=f.dtype, device=dev)).to(torch.float64)
    denom = n_fin.clamp_min(1.0)
    mean = v.sum() / denom
    var = (((v - mean) * fin) ** 2).sum() / denom
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=dev)
    mn = torch.where(fin, v, inf).amin() if n else inf
    mx = torch.where(fin, v, -inf).amax() if n else -inf
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=dev)
    gn = torch.linalg.vector_norm(g.detach(), dtype=torch.float64) if g is not None else nan
    return torch.stack(
        [
            torch.tensor(float(n), dtype=torch.float64, device=dev),
            n_fin,
            torch.isnan(f).sum().to(torch.float64),
            (f == 0).sum().to(torch.float64),
            mean,
            var.sqrt(),
            mn,
            mx,
            gn.to(torch.float64),
            torch.tensor(float(g is not None), dtype=torch.float64, device=dev),
        ]
    )


def stats_from_vector(shape: tuple[int, ...], vector: Any) -> dict[str, Any]:
    """The statistics dict of a :func:`stats_vector` read back on the host."""
    s = dict(zip(STAT_FIELDS, np.asarray(vector, dtype=np.float64).tolist(), strict=True))
    n, n_fin, n_nan = int(s["numel"]), int(s["finite"]), int(s["nan"])
    out: dict[str, Any] = {
        "shape": tuple(shape),
        "numel": n,
        "nan": n_nan,
        "inf": n - n_fin - n_nan,
        "zero_frac": s["zeros"] / n if n else 0.0,
    }
    out.update({k: s[k] if n_fin else float("nan") for k in ("mean", "std", "min", "max")})
    out["grad_norm"] = s["grad_norm"] if s["has_grad"] else None
    return out


def _sum_of_squares(a: np.ndarray) -> float:
    # einsum's own loop, not BLAS: OpenBLAS threads dot products above 10k elements.
    return float(np.einsum("i,i->", a, a))


def _fast_stats(t: torch.Tensor, g: torch.Tensor | None) -> dict[str, Any] | None:
    """Float32 NumPy statistics of an all-finite CPU float32 tensor, else None (NumPy leaves
    torch's threads to the capture running beside it)."""
    if (data := as_float(t)).device.type != "cpu" or data.numel() == 0:
        return None
    a = data.reshape(-1).numpy()
    lo, hi = float(a.min()), float(a.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):  # min/max propagate NaN and Inf
        return None
    n = a.size
    mean = float(a.sum()) / n
    return {
        "shape": tuple(t.shape),
        "numel": n,
        "nan": 0,
        "inf": 0,
        "zero_frac": float(np.count_nonzero(a == 0)) / n,
        "mean": mean,
        "std": math.sqrt(_sum_of_squares(a - np.float32(mean)) / n),
        "min": lo,
        "max": hi,
        "grad_norm": grad_norm(g, exact=False),
    }


def grad_norm(g: torch.Tensor | None, *, exact: bool = True) -> float | None:
    """L2 norm of gradient ``g`` (None for no gradient): float64, or single-threaded float32."""
    if g is None:
        return None
    f = as_float(g)
    if not exact and f.device.type == "cpu":
        return math.sqrt(_sum_of_squares(f.reshape(-1).numpy()))
    return float(torch.linalg.vector_norm(g.detach(), dtype=torch.float64))


def tensor_stats(t: Any, g: torch.Tensor | None = None, *, exact: bool = True) -> dict[str, Any]:
    """Mean, std, min, max (finite values), zero fraction, NaN/Inf counts, shape, and the L2
    norm of gradient ``g`` (``grad_norm``); ``exact=False`` takes the fast float32 path."""
    t = _as_tensor(t)
    if not exact and (fast := _fast_stats(t, g)) is not None:
        return fast
    return stats_from_vector(tuple(t.shape), stats_vector(t, g).cpu())


def layer_stats(record: Any, *, exact: bool = True) -> dict[str, Any]:
    """:func:`tensor_stats` of a record's output and gradient, with its ``name`` and ``type``."""
    t = record.tensor
    stats = tensor_stats(t if t is not None else torch.zeros(0), record.grad, exact=exact)
    stats.update(name=record.name, type=record.module_type)
    return stats


def histogram_tensor(t: torch.Tensor, bins: int = HIST_BINS) -> torch.Tensor:
    """``bins`` counts, ``bins + 1`` edges (float64) of ``t``'s finite values, on its device."""
    f = as_float(t).reshape(-1).to(torch.float64)
    fin = torch.isfinite(f)
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=f.device)
    lo = torch.where(fin, f, inf).amin() if f.numel() else inf
    hi = torch.where(fin, f, -inf).amax() if f.numel() else inf
    empty = ~torch.isfinite(lo)
    lo = torch.where(empty, torch.zeros_like(lo), lo)
    hi = torch.where(empty, torch.ones_like(hi), hi)
    same = hi == lo
    lo, hi = torch.where(same, lo - 0.5, lo), torch.where(same, hi + 0.5, hi)
    idx = torch.floor((f - lo) * (bins / (hi - lo))).clamp(0, bins - 1).to(torch.int64)
    idx = torch.where(fin, idx, torch.full_like(idx, bins))  # non-finite: an overflow bin
    counts = torch.zeros(bins + 1, dtype=torch.float64, device=f.device)
    counts.scatter_add_(0, idx, torch.ones_like(f))
    edges = lo + (hi - lo) * torch.arange(bins + 1, device=f.device, dtype=torch.float64) / bins
    return torch.cat([counts[:bins], edges])


def histogram(values: Any, bins: int = HIST_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of the finite values: float32 ``(counts, edges)`` (``[0, 1]`` when none)."""
    return split_histogram(histogram_tensor(_as_tensor(values), bins).cpu().numpy(), bins)


def split_histogram(packed: np.ndarray, bins: int = HIST_BINS) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, edges)`` as float32 from a :func:`histogram_tensor` read back on the host."""
    packed = np.asarray(packed)
    return packed[:bins].astype(np.float32), packed[bins:].astype(np.float32)
