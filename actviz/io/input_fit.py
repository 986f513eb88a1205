"""Whether an input fits a model, and the model's default input when it does not, read from the
first convolution, tokenizer and loader record without running the model (instant on the GUI)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from actviz.io.input_files import TEXT_PREFIX, expected_input
from actviz.io.loaded_input import reads_text

#: What a text model reads when it is opened without an input.
DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog because it"
#: Side of the random image given to an image model of unknown input size.
DEFAULT_SIDE = 224
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def input_kind(value: Any, source: str = "") -> str:
    """``"text"`` (token ids, ``text:`` inputs), ``"image"`` (an image file or a float
    (N, C, H, W) tensor) or ``"tensor"`` (anything else)."""
    if source.startswith(TEXT_PREFIX):
        return "text"
    if isinstance(value, Mapping) and "input_ids" in value:
        return "text"
    if isinstance(value, torch.Tensor) and not value.is_floating_point() and value.ndim <= 2:
        return "text"
    if source and Path(source).suffix.lower() in _IMAGE_SUFFIXES:
        return "image"
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.ndim == 4:
        return "image"
    return "tensor"


def _fixed_size(model: nn.Module | None) -> tuple[int, int] | None:
    """The (H, W) a model insists on (vision transformers' position embeddings), if any."""
    size = getattr(model, "image_size", None)  # torchvision VisionTransformer
    if isinstance(size, int):
        return (size, size)
    embed = getattr(model, "patch_embed", None)  # timm
    strict = getattr(embed, "strict_img_size", False)
    img = getattr(embed, "img_size", None)
    if strict and isinstance(img, Sequence) and len(img) == 2:
        return (int(img[0]), int(img[1]))
    config = getattr(model, "config", None)  # Hugging Face vision models
    side = getattr(config, "image_size", None)
    if isinstance(side, int) and getattr(config, "model_type", "") in ("vit", "deit", "beit"):
        return (side, side)
    return None


def input_misfit(
    loaded_model: Any, value: Any, source: str = "", *, model: nn.Module | None = None
) -> str | None:
    """Why ``value`` (opened from ``source``) cannot go to the model, in a few words, or None: an
    image file fits any 2-D image model; a tensor must match rank, channels and a fixed size."""
    model = model if model is not None else getattr(loaded_model, "model", None)
    kind = input_kind(value, source)
    if reads_text(loaded_model):
        return None if kind == "text" else "it reads text"
    exp = expected_input(model, loaded_model if hasattr(loaded_model, "input_size") else None)
    if kind == "text":
        return "it does not read text" if exp.channels is not None or loaded_model else None
    is_file = bool(source) and Path(source).is_file()
    if kind == "image" and is_file:
        if exp.spatial_dims not in (None, 2):  # a video or volume model: no transform helps
            return f"it takes {exp.spatial_dims + 2}-D inputs, not a picture"
        return None  # read again through the new model's transforms
    if not isinstance(value, torch.Tensor) or exp.channels is None or exp.spatial_dims is None:
        return None
    rank = exp.spatial_dims + 2
    if value.ndim != rank or value.shape[1] != exp.channels:
        shape = "x".join(str(int(d)) for d in value.shape)
        return f"it takes {exp.channels}-channel {rank}-D inputs, not {shape}"
    if (fixed := _fixed_size(model)) is not None and tuple(value.shape[-2:]) != fixed:
        return f"it takes {fixed[0]}x{fixed[1]} images"
    return None


def natural_input_source(
    loaded_model: Any, samples: Sequence[str | Path] = (), *, model: nn.Module | None = None
) -> str | None:
    """The input a model is shown with when the current one does not fit: a text prompt, a bundled
    image sample or a random tensor; None when nothing is known of its input."""
    model = model if model is not None else getattr(loaded_model, "model", None)
    if reads_text(loaded_model):
        return TEXT_PREFIX + DEFAULT_PROMPT
    exp = expected_input(model, loaded_model if hasattr(loaded_model, "input_size") else None)
    if exp.channels is None or exp.spatial_dims is None:
        return None
    if exp.channels == 3 and exp.spatial_dims == 2 and samples:
        return str(samples[0])
    size = _fixed_size(model) or exp.size or (DEFAULT_SIDE, DEFAULT_SIDE)
    spatial = list(size) if exp.spatial_dims == 2 else [32] * exp.spatial_dims
    return "random:" + "x".join(str(d) for d in (1, exp.channels, *spatial))
