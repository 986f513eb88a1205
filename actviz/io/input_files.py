"""Opening model inputs (images, tensor files, seeded random tensors, text): :func:`open_input`
gives exactly what the forward takes, fitted to the model, and the image it sees for overlays;
whether an input fits a model, and the model's default input when it does not
(:func:`input_misfit`, :func:`natural_input_source`), read without running the model."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from actviz.core.input_copies import forward_takes_list, list_layout
from actviz.core.structures import describe
from actviz.display.logit_lens import token_texts
from actviz.io import input_tensors as tensors
from actviz.io.errors import InputError, ModelFileAsInputError
from actviz.io.input_tensors import RANDOM_SEED as RANDOM_SEED  # re-exported: its old home
from actviz.io.input_tensors import ExpectedInput, LoadedInput, expected_input, reads_text
from actviz.io.models.checkpoints import FileFormat, one_line, sniff_format

if TYPE_CHECKING:  # pragma: no cover
    from actviz.io.models.loaded_model import LoadedModel

#: Sources starting with this are text for the model's tokenizer.
TEXT_PREFIX = "text:"
#: What a text model reads when it is opened without an input.
DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog because it"
#: Side of the random image given to an image model of unknown input size.
DEFAULT_SIDE = 224
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def load_input(source: Any, **options: Any) -> Any:
    """Open an input and return only the value; ``options`` as :func:`open_input` takes them."""
    return open_input(source, **options).value


def open_input(
    source: Any,
    *,
    model: nn.Module | None = None,
    loaded_model: LoadedModel | None = None,
    size: int | tuple[int, int] | None = None,
    as_list: bool | None = None,
) -> LoadedInput:
    """Open an image, a tensor file or a random spec as the model's input.

    Parameters
    ----------
    source
        ``"text:Some words"`` (a model with a tokenizer); an image path (any PIL mode); a tensor
        file (``.pt``, ``.npy``, ``.npz``); ``"random:1x3x224x224[:SEED]"`` or ``"random"`` (the
        model's shape); or an in-memory tensor, array or PIL image.
    model
        The model (or a :class:`~actviz.io.models.loaded_model.LoadedModel`).
    loaded_model
        Its transforms preprocess images and its input size sets the resize target.
    size
        ``(H, W)`` (or an int) to resize images to when the model does not say.
    as_list
        Give a list of ``(C, H, W)`` images instead of a batch (torchvision detectors); None
        decides by :func:`forward_takes_list`.

    Raises
    ------
    InputError
        Missing or unreadable file, or data that does not fit the model."""
    if model is not None and not isinstance(model, nn.Module) and hasattr(model, "model"):
        # open_input(src, model=loaded): what open_model returned, not the module.
        model, loaded_model = None, loaded_model or model
    loaded = _open_value(source, model, loaded_model, size)
    if loaded.kind == "text":
        return loaded
    if as_list is None:
        target = model if model is not None else getattr(loaded_model, "model", None)
        as_list = target is not None and forward_takes_list(target)
    # As a list of (C, H, W) images: one list argument.
    images = list_layout(loaded.value, True) if as_list else None
    if not isinstance(images, list):
        return loaded  # not asked, or a dict of keyword inputs or a scalar: nothing to split
    image = loaded.image
    if image is None and images and images[0].ndim == 3:
        image = tensors._display_image(images[0][None])
    count = f"{len(images)} image{'' if len(images) == 1 else 's'}"
    description = f"{loaded.description}, as a list of {count}"
    return LoadedInput(images, loaded.source, loaded.kind, image, description)


def _open_value(
    source: Any,
    model: nn.Module | None,
    loaded_model: LoadedModel | None,
    size: int | tuple[int, int] | None,
) -> LoadedInput:
    exp = expected_input(model, loaded_model)
    if size is not None:
        size = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
    transforms = loaded_model.transforms if loaded_model is not None else None

    if isinstance(source, torch.Tensor):
        return tensors._from_value(source.detach().clone(), "<tensor>", "tensor", "tensor", exp)
    if isinstance(source, np.ndarray):
        return tensors._from_value(
            tensors._array_to_tensor(source, "<array>"), "<array>", "tensor", "array", exp
        )
    if _is_pil_image(source):
        _check_takes_images("<image>", loaded_model)
        return tensors._from_image(source, "<image>", exp, transforms, size)
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(f"{source!r}: not an input (give a file path, 'random:...' or a tensor)")

    src = os.fspath(source)
    if src.startswith(TEXT_PREFIX):
        return _from_text(src, exp, loaded_model)
    if src == "random" or src.startswith("random:"):
        return tensors._from_random(src, exp, size)
    path = Path(src)
    if not path.exists():
        raise InputError(f"{src}: file not found")
    if path.is_dir():
        raise InputError(f"{src}: is a folder, not an image or tensor file")
    fmt = sniff_format(path)
    if fmt == FileFormat.EMPTY:
        raise InputError(f"{src}: file is empty")
    if fmt in tensors._TENSOR_FORMATS:
        value, word = tensors._read_tensor_file(path, src, fmt)
        if isinstance(value, (dict, tuple)):
            tensors._check_arguments(value, src, model if model is not None else loaded_model)
        return tensors._from_value(value, src, "tensor", word, exp)
    if fmt in (FileFormat.TORCHSCRIPT, FileFormat.EXPORT):
        raise ModelFileAsInputError(
            f"{src}: is a model file ({fmt}), not an input; open it as the model "
            "(File > Open model…, or --model on the command line)"
        )
    image = tensors._open_image(path, src)
    _check_takes_images(src, loaded_model)
    return tensors._from_image(image, src, exp, transforms, size)


def _check_takes_images(src: str, loaded_model: LoadedModel | None) -> None:
    """Refuse an image for a text model (a tokenizer and no image processor)."""
    if reads_text(loaded_model):
        raise InputError(
            f"{src}: {loaded_model.name} reads text (it has a tokenizer and no image "
            f"processor), not images; give text as {TEXT_PREFIX}your words"
        )


def _is_pil_image(obj: Any) -> bool:
    from PIL import Image

    return isinstance(obj, Image.Image)


def _from_text(src: str, exp: ExpectedInput, loaded_model: LoadedModel | None) -> LoadedInput:
    text = src[len(TEXT_PREFIX) :]
    if (tokenizer := getattr(loaded_model, "tokenizer", None)) is None:
        name = f"{loaded_model.name} has" if loaded_model is not None else "no model was given, so"
        raise InputError(
            f"{_short(src)}: text input needs the model's tokenizer, and {name} none (open a "
            "Hugging Face model folder that holds its tokenizer files, and pass "
            "model=the opened model)"
        )
    if not text:
        raise InputError(f"{src}: the text is empty; write it after 'text:'")
    try:
        encoded = tokenizer(text, return_tensors="pt")
    except Exception as exc:  # tokenizers raise their own error types
        raise InputError(
            f"{_short(src)}: the tokenizer failed ({type(exc).__name__}: {one_line(exc)})"
        ) from exc
    ids = encoded["input_ids"]
    if ids.numel() == 0:
        raise InputError(f"{_short(src)}: the tokenizer made no tokens of this text")
    if (mask := encoded.get("attention_mask")) is None:
        mask = torch.ones_like(ids)
    value = {"input_ids": ids.to(exp.device), "attention_mask": mask.to(exp.device)}
    tokens = token_texts(tokenizer, ids[0].tolist())  # the one rule for a token's text
    count = f"{ids.shape[1]} token{'' if ids.shape[1] == 1 else 's'}"
    description = f"text {_short(text, 40)!r}: {count} ({describe(value)})"
    return LoadedInput(value, src, "text", None, description, tokens)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def input_kind(value: Any, source: str = "") -> str:
    """``"text"`` (token ids, ``text:`` inputs), ``"image"`` (an image file or a float
    (N, C, H, W) tensor) or ``"tensor"`` (anything else)."""
    if source.startswith(TEXT_PREFIX) or (isinstance(value, Mapping) and "input_ids" in value):
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
    strict, img = getattr(embed, "strict_img_size", False), getattr(embed, "img_size", None)
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
