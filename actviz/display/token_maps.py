"""Token sequences, as :func:`sequence_kind` decides: a text input's ``(N, T, D)`` output shown
per token (:func:`token_view`), a ViT's patch tokens as maps over the grid (:func:`patch_maps`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.display.layer_views import as_numpy


@dataclass(frozen=True)
class SequenceLayout:
    """Where a ViT's tokens sit: ``grid`` ``(rows, columns)`` after ``prefix`` other tokens."""

    grid: tuple[int, int]
    prefix: int = 0

    @property
    def tokens(self) -> int:
        """Sequence length of the model's token layers: prefix plus patches."""
        return self.prefix + self.grid[0] * self.grid[1]


def sequence_layout(model: nn.Module | None) -> SequenceLayout | None:
    """The patch layout of a timm or Hugging Face vision transformer, None for other models."""
    if model is None:
        return None
    grid = getattr(getattr(model, "patch_embed", None), "grid_size", None)
    if grid is not None and len(tuple(grid)) == 2:
        prefix = int(getattr(model, "num_prefix_tokens", 1 if hasattr(model, "cls_token") else 0))
        return SequenceLayout((int(grid[0]), int(grid[1])), prefix)
    config = getattr(model, "config", None)
    size, patch = getattr(config, "image_size", None), getattr(config, "patch_size", None)
    if isinstance(size, int) and isinstance(patch, int) and patch > 0 and size >= patch:
        return SequenceLayout((size // patch, size // patch), 1)
    return None


def sequence_kind(
    shape: tuple[int, ...] | None, tokens: Sequence[str] | None, layout: SequenceLayout | None
) -> str | None:
    """``"patches"`` for a ViT token layer (``(N, prefix + rows * cols, D)`` under ``layout``),
    ``"tokens"`` for an ``(N, T, D)`` output with ``T == len(tokens)``, else None."""
    if shape is None or len(shape) != 3:
        return None
    if layout is not None and shape[1] == layout.tokens:
        return "patches"
    return "tokens" if tokens is not None and len(tokens) > 0 and shape[1] == len(tokens) else None


@dataclass(frozen=True)
class TokenView:
    """One sample of an ``(N, T, D)`` output per token (arrays read-only): ``heat`` is ``(T, D)``,
    ``norms`` each token's L2 norm; ``grad_heat`` and ``grad_norms`` the same for ``|gradient|``
    (None without one); ``shape`` the whole output's."""

    tokens: tuple[str, ...]
    heat: np.ndarray
    norms: np.ndarray
    grad_heat: np.ndarray | None
    grad_norms: np.ndarray | None
    shape: tuple[int, ...]
    sample: int
    unit: str = "feature"  #: What a column is ("concept": a dictionary's page of concepts).
    columns: tuple[int, ...] | None = None  #: Each column's number (None: 0, 1, ...).

    def __post_init__(self) -> None:
        for arr in (self.heat, self.norms, self.grad_heat, self.grad_norms):
            if arr is not None:
                arr.setflags(write=False)

    def describe(self, token: int, feature: int, *, gradient: bool = False) -> str:
        """Hover text: the token, the feature and the value there."""
        data = self.grad_heat if gradient else self.heat
        if data is None or not (0 <= token < data.shape[0] and 0 <= feature < data.shape[1]):
            return ""
        what = "|grad|" if gradient else "value"
        column = self.columns[feature] if self.columns is not None else feature
        return (
            f"token {token} {self.tokens[token]!r}, {self.unit} {column}: "
            f"{what} {float(data[token, feature]):.4g}"
        )


def row_norms(heat: np.ndarray) -> np.ndarray:
    """Each token's L2 norm over a ``(T, D)`` heat map (float64 sums, float32 out)."""
    return np.linalg.norm(heat.astype(np.float64), axis=1).astype(np.float32)


def _sample(x: Any, sample: int) -> np.ndarray:
    if (data := as_numpy(x)).ndim != 3:
        raise ValueError(f"a token view needs an (N, T, D) output, got {tuple(data.shape)}")
    return np.array(data[min(sample, data.shape[0] - 1)], dtype=np.float32)


def token_view(
    record_tensor: Any, tokens: Sequence[str], sample: int = 0, *, grad: Any = None
) -> TokenView:
    """Token x feature heat map and per-token norms of one sample of an ``(N, T, D)`` output;
    ``ValueError`` if the output is not ``(N, T, D)`` with ``T == len(tokens)``."""
    if (heat := _sample(record_tensor, sample)).shape[0] != len(tokens):
        raise ValueError(f"{len(tokens)} tokens for a sequence of {heat.shape[0]} positions")
    shape = tuple(as_numpy(record_tensor).shape)
    grad_heat = grad_norms = None
    if grad is not None and tuple(as_numpy(grad).shape) == shape:
        grad_heat = np.abs(_sample(grad, sample))
        grad_norms = row_norms(grad_heat)
    return TokenView(
        tokens=tuple(str(t) for t in tokens),
        heat=heat,
        norms=row_norms(heat),
        grad_heat=grad_heat,
        grad_norms=grad_norms,
        shape=shape,
        sample=min(sample, shape[0] - 1),
    )


def patch_maps(record_tensor: Any, layout: SequenceLayout, sample: int = 0) -> np.ndarray:
    """The patch tokens of one sample of an ``(N, T, D)`` ViT output as ``(D, rows, cols)`` maps."""
    one = torch.from_numpy(_sample(record_tensor, sample))[None]
    return np.ascontiguousarray(patch_grid_tensor(one, layout)[0].numpy())


def token_labels(
    count: int, tokens: Sequence[str] | None, layout: SequenceLayout | None = None
) -> list[str]:
    """Labels of ``count`` positions: the input's tokens when there are as many, a ViT's
    ``cls`` / ``(row, col)`` patch names under ``layout``, else the positions."""
    if tokens is not None and len(tokens) == count:
        return [str(t) for t in tokens]
    if layout is not None and layout.tokens == count:
        cols = layout.grid[1]
        prefix = ["cls"] + [f"reg{i}" for i in range(1, layout.prefix)]
        return prefix[: layout.prefix] + [
            f"({i // cols},{i % cols})" for i in range(count - layout.prefix)
        ]
    return [str(i) for i in range(count)]


def patch_grid_tensor(tokens: torch.Tensor, layout: SequenceLayout) -> torch.Tensor:
    """``(N, T, D)`` ViT tokens as ``(N, D, rows, cols)`` maps on the patch grid (prefix tokens
    dropped), where they live (Grad-CAM of a vision transformer)."""
    n, t, d = tokens.shape
    if t != layout.tokens:
        raise ValueError(
            f"{t} tokens do not fit {layout.prefix} prefix tokens and a "
            f"{layout.grid[0]}x{layout.grid[1]} patch grid"
        )
    return tokens[:, layout.prefix :, :].transpose(1, 2).reshape(n, d, *layout.grid)
