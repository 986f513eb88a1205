"""Pictures about the whole input: the image shown, saliency, Grad-CAM and predictions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actviz.core.structures import first_tensor
from actviz.core.targets import detections, sequence_logits
from actviz.display.logit_lens import token_texts
from actviz.display.stats import as_float
from actviz.display.token_maps import token_labels


def _pick(t: torch.Tensor, sample: int) -> torch.Tensor:
    return t[min(sample, t.shape[0] - 1)]


def _unit(x: torch.Tensor) -> torch.Tensor:
    """``x`` scaled so its peak is 1 (zeros without a positive peak), with no host sync."""
    peak = x.max() if x.numel() else torch.zeros((), dtype=x.dtype, device=x.device)
    return torch.where(peak > 0, x / torch.where(peak > 0, peak, 1.0), torch.zeros_like(x))


def _resize(x: torch.Tensor, size: tuple[int, int] | None) -> torch.Tensor:
    if size is None or tuple(x.shape) == tuple(size):
        return x
    return F.interpolate(x[None, None], size=size, mode="bilinear", align_corners=False)[0, 0]


def grad_cam_tensor(
    activation: torch.Tensor,
    gradient: torch.Tensor,
    size: tuple[int, int] | None = None,
    sample: int = 0,
) -> torch.Tensor:
    """Grad-CAM of one ``(N, C, H, W)`` / ``(C, H, W)`` sample on its device, in [0, 1]."""
    a, g = as_float(activation), as_float(gradient)
    if a.dim() == 4:
        a, g = _pick(a, sample), _pick(g, sample)
    weights = g.mean(dim=(1, 2))
    cam = torch.relu((weights[:, None, None] * a).sum(dim=0))
    return _unit(_resize(torch.nan_to_num(cam, nan=0.0, posinf=0.0, neginf=0.0), size).clamp_min(0))


def grad_cam(
    activation: Any, gradient: Any, size: tuple[int, int] | None = None, sample: int = 0
) -> np.ndarray:
    """Grad-CAM as a float32 ``(H, W)`` array in [0, 1] (see :func:`grad_cam_tensor`);
    ``ValueError`` if the shapes differ or the layer has no spatial output."""
    a, g = torch.as_tensor(activation), torch.as_tensor(gradient)
    if a.shape != g.shape:
        raise ValueError(f"activation {tuple(a.shape)} and gradient {tuple(g.shape)} differ")
    if a.dim() not in (3, 4) or a.shape[-1] < 1 or a.shape[-2] < 1:
        raise ValueError(
            f"Grad-CAM needs a layer with a spatial (N, C, H, W) output, got {tuple(a.shape)}"
        )
    return np.ascontiguousarray(grad_cam_tensor(a, g, size, sample).cpu().numpy(), dtype=np.float32)


def saliency_tensor(
    input_grad: torch.Tensor, size: tuple[int, int] | None = None, sample: int = 0
) -> torch.Tensor:
    """Saliency of one sample on its device: max over channels of ``|grad|``, in [0, 1]."""
    if (g := as_float(input_grad).abs()).dim() == 4:
        g = _pick(g, sample)
    if g.dim() == 3:
        g = g.amax(dim=0)
    elif g.dim() < 2:
        g = g.reshape(1, -1)
    elif g.dim() > 3:
        g = g.reshape(g.shape[0], -1)
    return _resize(_unit(torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)), size)


def saliency(input_grad: Any, sample: int = 0) -> np.ndarray:
    """Saliency map: max over channels of ``|d target / d input|`` of one sample, in [0, 1]."""
    s = saliency_tensor(torch.as_tensor(input_grad), None, sample)
    return np.ascontiguousarray(s.cpu().numpy(), dtype=np.float32)


def display_image(inputs: Any, image: np.ndarray | None, sample: int = 0) -> np.ndarray | None:
    """The RGB image overlays are drawn on: the loaded one if its size matches, else one
    rebuilt from an image-like input tensor (min-max scaled), else None."""
    if (x := first_tensor(inputs)) is None or not x.is_floating_point():
        return image
    if x.dim() == 4:
        x = _pick(x, sample)
    if x.dim() != 3 or x.shape[0] not in (1, 3):
        return image if x.dim() != 3 else None
    h, w = int(x.shape[1]), int(x.shape[2])
    if image is not None and image.shape[:2] == (h, w):
        return np.ascontiguousarray(image)
    arr = x.detach().float().cpu().numpy()
    lo, hi = float(arr.min()), float(arr.max())
    scaled = np.zeros(arr.shape, np.float32)
    if hi > lo:
        np.divide(np.subtract(arr, np.float32(lo), out=scaled), np.float32(hi - lo), out=scaled)
        np.clip(scaled, 0.0, 1.0, out=scaled)
    out = np.rint(np.multiply(scaled, np.float32(255.0), out=scaled), out=scaled).astype(np.uint8)
    return np.ascontiguousarray(np.broadcast_to(out, (3, h, w)).transpose(1, 2, 0))


def saliency_unavailable(input_grads: Any, image: np.ndarray | None, inputs: Any = None) -> str:
    """Why there is no saliency picture for these input gradients ("" when there is one)."""
    if (grad := first_tensor(input_grads)) is None and token_input(inputs):
        return (
            "Saliency of a text input is |gradient × input embedding| per token: this run "
            "recorded no gradient at the model's input embedding."
        )
    if grad is None:
        if (x := first_tensor(inputs)) is not None and x.is_floating_point():
            return (
                "No input gradient in this run: it did not differentiate back to the input "
                "(press Run with a saliency view shown), or the output does not depend on it."
            )
        if x is not None:
            return "No input gradient: the input is not a float tensor."
        return "No input gradient: the input is not a float tensor or nothing depends on it."
    if grad.dim() not in (3, 4) or image is None:
        return f"Saliency needs an image-like input; this one is {tuple(grad.shape)}."
    return ""


def token_input(inputs: Any) -> bool:
    """Whether the model's (first) input is token ids (an integer tensor)."""
    x = first_tensor(inputs)
    return x is not None and not x.is_floating_point() and not x.is_complex() and x.dim() >= 1


def input_embedding(model: nn.Module | None) -> str | None:
    """The module whose output is the input's token embeddings (``get_input_embeddings()``,
    else the first ``nn.Embedding``), where a text input's saliency is read; None if none."""
    if model is None:
        return None
    names = {id(m): n for n, m in model.named_modules()}
    found = None
    with contextlib.suppress(Exception):  # none, a base class stub, or the model's own failure
        found = model.get_input_embeddings()
    if isinstance(found, nn.Module) and id(found) in names:
        return names[id(found)]
    return next((n for n, m in model.named_modules() if isinstance(m, nn.Embedding)), None)


@dataclass(frozen=True)
class TokenSaliency:
    """Saliency of a text input: ``|gradient x input embedding|`` per token (arrays read-only);
    ``tokens`` labels the ``T`` raw ``values``; ``layer`` is the embedding module read."""

    tokens: tuple[str, ...]
    values: np.ndarray
    layer: str
    sample: int = 0

    def __post_init__(self) -> None:
        self.values.setflags(write=False)

    @property
    def peak(self) -> float:
        """The largest value (1.0 when every value is 0, so shares stay finite)."""
        top = float(self.values.max()) if self.values.size else 0.0
        return top if top > 0 else 1.0

    def shares(self) -> np.ndarray:
        """Each token's value as a share of the largest, in [0, 1] (the colours drawn)."""
        return (self.values / self.peak).astype(np.float32)

    def describe(self, token: int) -> str:
        """Hover text: the token and its saliency."""
        if not 0 <= token < len(self.tokens):
            return ""
        value = float(self.values[token])
        return (
            f"token {token} {self.tokens[token]!r}: |grad × embedding| {value:.4g} "
            f"({100.0 * value / self.peak:.0f} % of the largest)"
        )


def token_saliency(
    cap: Any, layer: str | None, tokens: Sequence[str] | None = None, sample: int = 0
) -> TokenSaliency | None:
    """A text input's saliency from its embedding ``layer``'s output and gradient, or None."""
    if layer is None or layer not in cap or not token_input(cap.inputs):
        return None
    act, grad = cap[layer].tensor, cap[layer].grad
    if act is None or grad is None or act.shape != grad.shape or act.dim() not in (2, 3):
        return None
    # |sum_D gradient x input embedding| per token of one sample.
    e, g = as_float(act), as_float(grad)
    if e.dim() == 3:
        e, g = _pick(e, sample), _pick(g, sample)
    values = (e.to(torch.float64) * g.to(torch.float64)).sum(dim=-1).abs()
    values = torch.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0).float().cpu().numpy()
    labels = tuple(token_labels(int(values.shape[0]), tokens))
    s = min(sample, int(act.shape[0]) - 1) if act.dim() == 3 else 0
    return TokenSaliency(labels, np.ascontiguousarray(values, dtype=np.float32), layer, s)


def saliency_at_image(
    input_grads: Any, image: np.ndarray | None, sample: int = 0, inputs: Any = None
) -> tuple[np.ndarray | None, str]:
    """The saliency map at the size of the picture shown, or None and why (as the window words it)."""
    if why := saliency_unavailable(input_grads, image, inputs):
        return None, why
    grad = first_tensor(input_grads)
    heat = saliency_tensor(grad, image.shape[:2], sample)  # type: ignore[union-attr]
    return np.ascontiguousarray(heat.cpu().numpy(), dtype=np.float32), ""


def gradcam_candidates(cap: Any, layout: Any = None) -> list[str]:
    """The Grad-CAM layers of an image input: those with an ``(N, C, H, W)`` output and a
    same-shape gradient, plus under a ViT patch ``layout`` the token layers whose patch tokens
    have a gradient."""
    out = []
    for name in cap.names:
        act, grad = (rec := cap[name]).tensor, rec.grad
        if act is None or grad is None or act.shape != grad.shape:
            continue
        tokens = layout is not None and act.dim() == 3 and act.shape[1] == layout.tokens
        if act.dim() == 4 or (tokens and bool(grad[:, layout.prefix :].ne(0).any())):
            out.append(name)
    return out


def default_gradcam_layer(
    cap: Any, candidates: Iterable[str], requested: str | None = None
) -> str | None:
    """The Grad-CAM layer shown first: ``requested`` when it has a map, else the last
    candidate larger than 1x1 (one rule for the window, live mode and export)."""
    if requested in (names := list(candidates)):
        return requested
    # A ViT token candidate (N, T, D) is a map on its patch grid: spatial, larger than 1x1.
    shapes = {n: tuple(cap[n].tensor.shape) for n in names}
    shapes = {n: (*s[:2], s[1], 1) if len(s) == 3 else s for n, s in shapes.items()}
    return last_spatial_layer(names, shapes)


def last_spatial_layer(
    names: Sequence[str], shapes: Mapping[str, tuple[int, ...] | None]
) -> str | None:
    """The last of ``names`` with an ``(N, C, H, W)`` output larger than 1x1 (Grad-CAM's pick)."""
    for name in reversed(names):
        shape = shapes.get(name)
        if shape is not None and len(shape) == 4 and shape[-1] * shape[-2] > 1:
            return name
    return None


def top_k(
    output: Any, k: int = 5, categories: Sequence[str] | None = None, sample: int = 0
) -> list[tuple[int, str, float]]:
    """Top-k softmax classes of a ``(N, C)`` / ``(C,)`` output as ``(index, label, p)``, or []."""
    t = as_float(torch.as_tensor(output).cpu())  # complex scores by magnitude
    if t.dim() == 2 and t.shape[0] == 0:
        return []  # no rows, e.g. a detector's boxes when it found nothing
    if t.dim() == 2:
        t = _pick(t, sample)
    if t.dim() != 1 or t.numel() < 2:
        return []
    values, idx = torch.topk(torch.softmax(t.double(), dim=0), min(k, t.numel()))
    return [
        (int(i), categories[i] if categories and i < len(categories) else f"class {i}", float(p))
        for p, i in zip(values.tolist(), idx.tolist(), strict=True)
    ]


def prediction_kind(output: Any, categories: Sequence[str] | None = None) -> str:
    """What :func:`top_predictions` ranks: ``"detection"``, ``"token"`` or ``"class"``."""
    if detections(output) is not None:
        return "detection"
    return "token" if sequence_logits(output) is not None and not categories else "class"


def top_predictions(
    output: Any,
    categories: Sequence[str] | None,
    k: int = 5,
    sample: int = 0,
    tokenizer: Any = None,
) -> list[tuple[int, str, float]]:
    """The model's top ``k`` answers for one sample as ``(index, label, probability)``: a
    classifier's :func:`top_k` (NaN ranked last), a detector's best detections, or a language
    model's next tokens labelled by ``categories`` or their quoted text."""
    if (logits := sequence_logits(output)) is not None:
        rows = top_predictions(logits[:, -1, :], categories, k, sample)
        if categories:
            return rows
        if tokenizer is None:
            return [(i, f"token {i}", p) for i, _label, p in rows]
        texts = token_texts(tokenizer, [i for i, _label, _p in rows])
        return [(i, repr(text), p) for (i, _label, p), text in zip(rows, texts, strict=True)]
    if (dets := detections(output)) is not None:
        det = dets[min(sample, len(dets) - 1)]
        scores, labels = det["scores"].detach().float().cpu(), det["labels"].detach().cpu()
        rows = []
        for i in torch.argsort(scores, descending=True)[:k].tolist():
            label = int(labels[i])
            known = categories and 0 <= label < len(categories)
            name = categories[label] if known else f"label {label}"
            rows.append((label, f"{name} (detection {i})", float(scores[i])))
        return rows
    if (output := first_tensor(output)) is None or not output.is_floating_point():
        return []
    if not bool(torch.isfinite(output).all()):
        # top_k works in float32: stay inside its range so the softmax stays finite.
        big = torch.finfo(torch.float32).max
        output = torch.nan_to_num(output.float(), nan=-big, posinf=big, neginf=-big)
    return top_k(output, k=k, categories=list(categories) if categories else None, sample=sample)
