"""Opening model inputs: images, tensor files (.pt/.npy/.npz) and seeded random tensors.

``open_input`` turns a source into exactly what the model's forward takes (a tensor, a
tuple of positional tensors, a dict of keyword tensors, or a list of ``(C, H, W)`` images for
models whose forward takes a list, such as torchvision's detectors) and, for images, also
keeps the picture as the model sees it (after resize/crop, before normalisation) for overlays.

What the model expects is read from the :class:`~actviz.io.models.loaded_model.LoadedModel` when
there is one (preprocessing transforms, input size) and from the model's first convolution
(``in_channels``), so a grayscale photo can feed an RGB network and vice versa, and a
tensor of the wrong rank or channel count is refused with a message that says why.
"""

from __future__ import annotations

import inspect
import logging
import os
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from actviz.core.input_copies import forward_takes_list, list_layout
from actviz.core.structures import describe, map_tensors
from actviz.io.errors import InputError, ModelFileAsInputError, ModelLoadError
from actviz.io.models.checkpoints import FileFormat, extract_weights, one_line, sniff_format

if TYPE_CHECKING:
    from PIL import Image

    from actviz.io.models.loaded_model import LoadedModel

__all__ = [
    "LoadedInput",
    "ExpectedInput",
    "expected_input",
    "forward_takes_list",
    "open_input",
    "load_input",
]

log = logging.getLogger(__name__)

#: Sources starting with this are text for the model's tokenizer.
TEXT_PREFIX = "text:"
#: Seed of ``random:`` inputs when none is given, so runs repeat.
RANDOM_SEED = 0
# ITU-R 601-2 luma, the weights PIL's convert("L") uses.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_TENSOR_FORMATS = (
    FileFormat.TORCH_ZIP,
    FileFormat.PICKLE,
    FileFormat.NPY,
    FileFormat.NPZ,
    FileFormat.SAFETENSORS,
)


@dataclass
class LoadedInput:
    """An input ready for the model, plus what the UI needs to show it.

    Attributes
    ----------
    value
        Tensor, tuple of tensors (positional inputs), dict of tensors (keyword inputs), or a
        list of ``(C, H, W)`` tensors (one list argument, for models that take a list).
    source
        The source as given (file path, ``random:...`` spec, or a description).
    kind
        ``"image"``, ``"tensor"`` or ``"random"``.
    image
        ``(H, W, 3)`` uint8 RGB of the first sample as the model sees it (after resize and
        crop, before normalisation), for overlays; None when the input is not image-like.
    description
        One line for status bars, e.g. ``"cat.png: RGB 640x480 -> 1x3x224x224 (...)"``.
    tokens
        For ``"text"`` inputs: one readable string per position of ``input_ids[0]`` (axis
        labels of token views); None otherwise.
    """

    value: Any
    source: str
    kind: str
    image: np.ndarray | None
    description: str
    tokens: list[str] | None = None


@dataclass
class ExpectedInput:
    """What is known about the model's input.

    Attributes
    ----------
    channels
        Input channels, from the first convolution or the recorded input shape.
    spatial_dims
        1, 2 or 3 for Conv1d/2d/3d inputs; None when unknown.
    layer
        How the evidence is named in messages, e.g. ``"first layer conv1: Conv2d(3, 64, ...)"``.
    size
        ``(H, W)`` expected by the model, when known.
    dtype, device
        Of the model's first floating parameter (float inputs are cast to them).
    """

    channels: int | None = None
    spatial_dims: int | None = None
    layer: str = ""
    size: tuple[int, int] | None = None
    dtype: torch.dtype = torch.float32
    device: torch.device = torch.device("cpu")


def _first_conv(model: nn.Module) -> tuple[str, nn.Module] | None:
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.conv._ConvNd):
            return name, module
        # TorchScript keeps the original class name and the conv attributes.
        original = getattr(module, "original_name", "")
        if isinstance(original, str) and re.fullmatch(r"Conv(Transpose)?[123]d", original):
            if isinstance(getattr(module, "in_channels", None), int):
                return name, module
    return None


def expected_input(
    model: nn.Module | None = None, loaded_model: LoadedModel | None = None
) -> ExpectedInput:
    """Read what a model expects as input from its first convolution and its metadata.

    Parameters
    ----------
    model
        The module (taken from ``loaded_model`` when not given).
    loaded_model
        Result of :func:`actviz.io.models.loading.open_model`, for input size and recorded shape.

    Returns
    -------
    ExpectedInput
        Fields are None where nothing can be told.
    """
    if model is None and loaded_model is not None:
        model = loaded_model.model
    exp = ExpectedInput()
    if loaded_model is not None:
        exp.size = loaded_model.input_size
        shape = getattr(loaded_model, "input_shape", None)
        if shape is not None and len(shape) >= 3:
            exp.channels = int(shape[1])
            exp.spatial_dims = len(shape) - 2
            exp.layer = f"exported input shape {tuple(shape)}"
    if model is None:
        return exp
    for param in model.parameters():
        exp.device = param.device
        if param.is_floating_point():
            exp.dtype = param.dtype
            break
    if exp.channels is None:
        found = _first_conv(model)
        if found is not None:
            name, conv = found
            type_name = getattr(conv, "original_name", None) or type(conv).__name__
            exp.channels = int(conv.in_channels)
            exp.spatial_dims = int(type_name[-2]) if type_name[-2].isdigit() else None
            out = getattr(conv, "out_channels", "?")
            exp.layer = f"first layer {name or '(model)'}: {type_name}({exp.channels}, {out}, ...)"
    return exp


def load_input(
    source: Any,
    *,
    model: nn.Module | None = None,
    loaded_model: LoadedModel | None = None,
    size: int | tuple[int, int] | None = None,
    as_list: bool | None = None,
) -> Any:
    """Open an input and return only the value for the model; see :func:`open_input`."""
    return open_input(
        source, model=model, loaded_model=loaded_model, size=size, as_list=as_list
    ).value


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
        ``"text:Some words"`` for a model with a tokenizer (a Hugging Face model folder):
        the value is the ``{"input_ids", "attention_mask"}`` dict and ``tokens`` holds the
        token strings. Or a path to an image (PNG, JPEG, BMP, TIFF, WebP, ...; any PIL mode
        including grayscale, palette, RGBA and 16-bit), a tensor file (``.pt`` with a tensor, a
        tuple/list of tensors or a dict of tensors; ``.npy``; ``.npz``), a spec such as
        ``"random:1x3x224x224"`` (optionally ``"random:1x3x224x224:SEED"``; plain
        ``"random"`` uses the model's expected shape), or an in-memory tensor, numpy array
        or PIL image.
    model
        The model the input is for (used to adapt channels and check shapes), or the
        :class:`~actviz.io.models.loaded_model.LoadedModel` (then also ``loaded_model``).
    loaded_model
        Result of :func:`actviz.io.models.loading.open_model`: its transforms (torchvision weights,
        demo) preprocess images; its input size sets the resize target.
    size
        ``(H, W)`` (or one int for square) to resize images to when the model does not say.
    as_list
        Give the model a list of ``(C, H, W)`` images (one per batch element) instead of an
        ``(N, C, H, W)`` batch, as torchvision's detectors take. None (default) decides from
        the model: :func:`forward_takes_list` (its forward's first argument is annotated as a
        list). A tensor file holding a tuple/list of tensors is then that one list.

    Returns
    -------
    LoadedInput
        ``value`` sits on the model's device; floating values have the model's dtype.

    Raises
    ------
    InputError
        Missing or unreadable file, or data that does not fit the model; the message
        names the file and what was expected.
    """
    if model is not None and not isinstance(model, nn.Module) and hasattr(model, "model"):
        # open_input(src, model=loaded): what open_model returned, not the module.
        model, loaded_model = None, loaded_model or model
    loaded = _open_value(source, model, loaded_model, size)
    if loaded.kind == "text":
        return loaded
    if as_list is None:
        target = model if model is not None else getattr(loaded_model, "model", None)
        as_list = target is not None and forward_takes_list(target)
    return _as_list(loaded) if as_list else loaded


def _as_list(loaded: LoadedInput) -> LoadedInput:
    """The same input as a list of (C, H, W) images: one list argument."""
    images = list_layout(loaded.value, True)
    if not isinstance(images, list):
        return loaded  # a dict of keyword inputs or a scalar: nothing to split
    image = loaded.image
    if image is None and images and images[0].ndim == 3:
        image = _display_image(images[0][None])
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
    size = _normalise_size(size)
    transforms = loaded_model.transforms if loaded_model is not None else None

    if isinstance(source, torch.Tensor):
        return _from_value(source.detach().clone(), "<tensor>", "tensor", "tensor", exp)
    if isinstance(source, np.ndarray):
        return _from_value(_array_to_tensor(source, "<array>"), "<array>", "tensor", "array", exp)
    if _is_pil_image(source):
        _check_takes_images("<image>", loaded_model)
        return _from_image(source, "<image>", exp, transforms, size)
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(f"{source!r}: not an input (give a file path, 'random:...' or a tensor)")

    src = os.fspath(source)
    if src.startswith(TEXT_PREFIX):
        return _from_text(src, exp, loaded_model)
    if src == "random" or src.startswith("random:"):
        return _from_random(src, exp, size)
    path = Path(src)
    if not path.exists():
        raise InputError(f"{src}: file not found")
    if path.is_dir():
        raise InputError(f"{src}: is a folder, not an image or tensor file")
    fmt = sniff_format(path)
    if fmt == FileFormat.EMPTY:
        raise InputError(f"{src}: file is empty")
    if fmt in _TENSOR_FORMATS:
        value, word = _read_tensor_file(path, src, fmt)
        if isinstance(value, dict):
            _check_keywords(value, src, model if model is not None else loaded_model)
        elif isinstance(value, tuple):
            _check_positional(value, src, model if model is not None else loaded_model)
        return _from_value(value, src, "tensor", word, exp)
    if fmt in (FileFormat.TORCHSCRIPT, FileFormat.EXPORT):
        raise ModelFileAsInputError(
            f"{src}: is a model file ({fmt}), not an input; open it as the model "
            "(File > Open model…, or --model on the command line)"
        )
    image = _open_image(path, src)
    _check_takes_images(src, loaded_model)
    return _from_image(image, src, exp, transforms, size)


def _check_takes_images(src: str, loaded_model: LoadedModel | None) -> None:
    """Refuse an image for a text model (a tokenizer and no image processor)."""
    if loaded_model is None or getattr(loaded_model, "tokenizer", None) is None:
        return
    if getattr(loaded_model, "processor", None) is None:
        raise InputError(
            f"{src}: {loaded_model.name} reads text (it has a tokenizer and no image "
            f"processor), not images; give text as {TEXT_PREFIX}your words"
        )


def _normalise_size(size: int | tuple[int, int] | None) -> tuple[int, int] | None:
    if size is None:
        return None
    if isinstance(size, int):
        return (size, size)
    h, w = size
    return (int(h), int(w))


def _is_pil_image(obj: Any) -> bool:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - pillow is a dependency
        return False
    return isinstance(obj, Image.Image)


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------


def _open_image(path: Path, src: str) -> Image.Image:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img.load()  # decode now: truncated files fail here, not later
            return img.copy()
    except UnidentifiedImageError as exc:
        raise InputError(
            f"{src}: not a readable image or tensor file (expected PNG, JPEG, BMP, TIFF, WebP, "
            ".pt, .npy or .npz)"
        ) from exc
    except Image.DecompressionBombError as exc:
        raise InputError(f"{src}: image too large to open safely ({one_line(exc)})") from exc
    except FileNotFoundError as exc:  # gone since it was listed or chosen: not "damaged"
        raise InputError(f"{src}: no such file") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        # PIL reports truncated or damaged image data as OSError / SyntaxError.
        raise InputError(f"{src}: damaged image ({one_line(exc)})") from exc


def _image_to_float(img: Image.Image) -> tuple[np.ndarray, list[str]]:
    """PIL image of any mode -> (H, W, C) float32 in [0, 1] with C in {1, 3}, plus notes."""
    from PIL import Image, ImageOps

    notes: list[str] = []
    try:
        img = ImageOps.exif_transpose(img)  # phone photos store rotation in EXIF
    except (OSError, ValueError, TypeError):
        pass
    mode = img.mode
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif mode == "PA":
        img = img.convert("RGBA")
    elif mode == "1":
        img = img.convert("L")
    mode = img.mode
    if mode in ("RGBA", "LA", "RGBa", "La"):
        # Transparent pixels carry arbitrary colour; the model should see what a viewer sees.
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        img = Image.alpha_composite(background, rgba).convert("RGB" if mode[0] == "R" else "L")
        notes.append("alpha composited on white")
        mode = img.mode
    if mode.startswith("I;16") or mode == "I":
        arr = np.asarray(img).astype(np.float32)
        peak = 65535.0 if (mode.startswith("I;16") or arr.max(initial=0) > 255) else 255.0
        return np.clip(arr / peak, 0.0, 1.0)[..., None], [*notes, f"{mode} scaled by 1/{peak:g}"]
    if mode == "F":
        arr = np.asarray(img, dtype=np.float32)
        lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
        if lo < 0.0 or hi > 1.0:
            arr = (arr - lo) / (hi - lo) if hi > lo else np.zeros_like(arr)
            notes.append(f"float image rescaled from [{lo:g}, {hi:g}]")
        return np.nan_to_num(arr)[..., None], notes
    if mode == "L":
        return (np.asarray(img, dtype=np.float32) / 255.0)[..., None], notes
    if mode != "RGB":
        img = img.convert("RGB")  # CMYK, YCbCr, LAB, HSV
    return np.asarray(img, dtype=np.float32) / 255.0, notes


def _adapt_channels(
    arr: np.ndarray, channels: int | None, exp: ExpectedInput, src: str
) -> tuple[np.ndarray, list[str]]:
    have = arr.shape[-1]
    if channels is None or channels == have:
        return arr, []
    if channels == 3 and have == 1:
        return np.repeat(arr, 3, axis=-1), ["gray -> 3 channels"]
    if channels == 1 and have == 3:
        return (arr @ _LUMA)[..., None], ["RGB -> gray"]
    raise InputError(
        f"{src}: model expects {channels} input channels ({exp.layer}); "
        f"an image gives 1 (gray) or 3 (RGB)"
    )


def _to_uint8_rgb(chw: torch.Tensor) -> np.ndarray:
    """(C, H, W) float in [0, 1] -> (H, W, 3) uint8; one channel is repeated to gray RGB."""
    arr = chw.detach().to("cpu", torch.float32).clamp(0.0, 1.0).numpy()
    if arr.shape[0] == 1:
        arr = np.repeat(arr, 3, axis=0)
    arr = arr[:3].transpose(1, 2, 0)
    return np.ascontiguousarray(np.round(arr * 255.0).astype(np.uint8))


def _unnormalise(y: torch.Tensor, transforms: Any) -> torch.Tensor | None:
    mean = getattr(transforms, "mean", None)
    std = getattr(transforms, "std", None)
    if mean is None or std is None or len(mean) != y.shape[0] or len(std) != y.shape[0]:
        return None
    m = torch.tensor(list(mean), dtype=y.dtype).view(-1, 1, 1)
    s = torch.tensor(list(std), dtype=y.dtype).view(-1, 1, 1)
    return y * s + m


def _describe_transforms(transforms: Any) -> str:
    parts = []
    resize = getattr(transforms, "resize_size", None)
    crop = getattr(transforms, "crop_size", None)
    if resize:
        parts.append(f"resize {'x'.join(str(r) for r in resize)}")
    if crop:
        parts.append(f"center crop {'x'.join(str(c) for c in crop)}")
    mean = getattr(transforms, "mean", None)
    if mean is not None:
        imagenet = [round(float(v), 3) for v in mean] == [0.485, 0.456, 0.406]
        parts.append("ImageNet normalisation" if imagenet else "mean/std normalisation")
    if parts:
        return ", ".join(parts)
    return f"via {getattr(transforms, '__name__', type(transforms).__name__)}"


def _is_torchvision_preset(transforms: Any) -> bool:
    return type(transforms).__module__.startswith("torchvision.transforms")


def _from_image(
    img: Image.Image,
    src: str,
    exp: ExpectedInput,
    transforms: Any,
    size: tuple[int, int] | None,
) -> LoadedInput:
    from PIL import Image

    mode, (width, height) = img.mode, img.size
    arr, notes = _image_to_float(img)
    channels = exp.channels
    if channels is None and transforms is not None:
        channels = 3  # weight transforms are written for RGB
    arr, channel_notes = _adapt_channels(arr, channels, exp, src)
    notes += channel_notes
    chw = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))

    if transforms is not None:
        if _is_torchvision_preset(transforms):
            # torchvision presets accept float tensors: 16-bit precision survives.
            call_arg: Any = chw
        else:
            # Custom transforms (the demo's) are written for PIL images.
            rgb = np.repeat(arr, 3, axis=-1) if arr.shape[-1] == 1 else arr
            call_arg = Image.fromarray(np.round(rgb * 255.0).astype(np.uint8), "RGB")
        try:
            y = transforms(call_arg)
        except Exception as exc:  # user/library transforms may raise anything
            raise InputError(
                f"{src}: the model's preprocessing failed ({type(exc).__name__}: {one_line(exc)})"
            ) from exc
        if not isinstance(y, torch.Tensor) or y.ndim not in (3, 4):
            raise InputError(f"{src}: the model's preprocessing did not return a (C, H, W) tensor")
        y = y if y.ndim == 3 else y[0]
        y = y.to(torch.float32)
        shown = _unnormalise(y, transforms)
        if shown is None:
            lo, hi = float(y.min()), float(y.max())
            if lo >= 0.0 and hi <= 1.0:
                shown = y
            else:
                shown = (y - lo) / (hi - lo) if hi > lo else torch.zeros_like(y)
        how = _describe_transforms(transforms)
    else:
        target = exp.size or size
        y = chw
        if target is not None and tuple(target) != (chw.shape[1], chw.shape[2]):
            y = torch.nn.functional.interpolate(
                chw[None], size=tuple(target), mode="bilinear", align_corners=False, antialias=True
            )[0].clamp(0.0, 1.0)
            how = f"resized to {target[1]}x{target[0]}, scaled to [0, 1]"
        else:
            how = "scaled to [0, 1]"
        shown = y
    value = y[None].to(device=exp.device, dtype=exp.dtype).contiguous()
    shape = "x".join(str(s) for s in value.shape)
    extra = f", {', '.join(notes)}" if notes else ""
    name = Path(src).name if src != "<image>" else src
    description = f"{name}: {mode} {width}x{height} -> {shape} ({how}{extra})"
    return LoadedInput(value, src, "image", _to_uint8_rgb(shown), description)


# --------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------


def _array_to_tensor(arr: np.ndarray, src: str) -> torch.Tensor:
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise InputError(f"{src}: holds a {arr.dtype} array; expected numbers")
    try:
        return torch.from_numpy(np.array(arr, copy=True, order="C"))
    except TypeError as exc:  # dtypes torch lacks (e.g. uint32 on old torch, complex256)
        raise InputError(f"{src}: unsupported array dtype {arr.dtype} ({one_line(exc)})") from exc


def _read_tensor_file(path: Path, src: str, fmt: str) -> tuple[Any, str]:
    """Read .pt / .npy / .npz / .safetensors content; returns (value, word for messages)."""
    if fmt == FileFormat.NPY:
        try:
            arr = np.load(path, allow_pickle=False)
        except ValueError as exc:
            raise InputError(f"{src}: holds Python objects, not numbers ({one_line(exc)})") from exc
        except (OSError, EOFError) as exc:
            raise InputError(f"{src}: damaged .npy file ({one_line(exc)})") from exc
        return _array_to_tensor(arr, src), "array"
    if fmt == FileFormat.NPZ:
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {name: _array_to_tensor(npz[name], src) for name in npz.files}
        except ValueError as exc:
            raise InputError(f"{src}: holds Python objects, not numbers ({one_line(exc)})") from exc
        except (OSError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"{src}: damaged .npz file ({one_line(exc)})") from exc
        if not arrays:
            raise InputError(f"{src}: the .npz archive holds no arrays")
        if len(arrays) == 1:
            return next(iter(arrays.values())), "array"
        positional = [f"arr_{i}" for i in range(len(arrays))]
        if set(arrays) == set(positional):
            # np.savez(f, a, b) names unnamed arrays arr_0, arr_1: the forward's positional
            # inputs, in order (a .pt file's tuple).
            return tuple(arrays[name] for name in positional), "array"
        return arrays, "array"
    if fmt == FileFormat.SAFETENSORS:
        try:
            from safetensors.torch import load_file

            tensors = load_file(str(path), device="cpu")
        except Exception as exc:  # ImportError or safetensors' own SafetensorError
            raise InputError(f"{src}: cannot read safetensors file ({one_line(exc)})") from exc
        if not tensors:
            raise InputError(f"{src}: the safetensors file holds no tensors")
        return (next(iter(tensors.values())) if len(tensors) == 1 else tensors), "tensor"
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise InputError(
            f"{src}: holds Python objects, not just tensors; inputs are read with "
            "weights_only=True, so save a tensor, a tuple/list of tensors or a dict of tensors"
        ) from exc
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        raise InputError(f"{src}: damaged tensor file ({one_line(exc)})") from exc
    return _tensor_structure(obj, src), "tensor"


def _tensor_structure(obj: Any, src: str) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (tuple, list)):
        if not obj or not any(isinstance(v, torch.Tensor) for v in obj):
            raise InputError(f"{src}: holds a {type(obj).__name__} without tensors")
        return tuple(obj)
    if isinstance(obj, dict):
        if not obj or not all(isinstance(k, str) for k in obj):
            raise InputError(f"{src}: holds a dict whose keys are not all argument names")
        weights = _model_weights(obj)
        if weights:
            # A checkpoint picked in Open input by mistake: it would be passed as keyword
            # inputs and fail in the model's forward with an unexpected keyword argument.
            raise ModelFileAsInputError(
                f"{src}: holds {weights}, not an input; open it as the model "
                "(File > Open model…, or --model on the command line)"
            )
        if not any(isinstance(v, torch.Tensor) for v in obj.values()):
            raise InputError(
                f"{src}: holds a dict of {describe(obj)[1:-1]}, not tensors; expected a tensor, "
                "a tuple/list of tensors or a dict of tensors (keyword inputs)"
            )
        return dict(obj)
    raise InputError(
        f"{src}: holds a {type(obj).__name__}; expected a tensor, a tuple/list of tensors "
        "(positional inputs) or a dict of tensors (keyword inputs)"
    )


# Parameter names ending the keys of a state_dict (a dict of keyword inputs has none of them).
_WEIGHT_KEY = re.compile(
    r"\.(weight|bias|running_mean|running_var|num_batches_tracked|in_proj_\w+)$"
)


def _model_weights(obj: dict[str, Any]) -> str:
    """What model weights ``obj`` holds, e.g. "model weights (a state_dict of 122 tensors,
    e.g. conv1.weight)"; "" when it does not look like a checkpoint."""
    try:
        found, where = extract_weights(obj, "")
    except ModelLoadError:
        return ""
    if not isinstance(found, dict):
        return f"a whole model ({type(found).__name__})"
    if where:
        return f"a training checkpoint (model weights under {where})"
    named = [k for k in found if _WEIGHT_KEY.search(k)]
    if not named or len(named) * 2 < len(found):
        return ""
    return f"model weights (a state_dict of {len(found)} tensors, e.g. {', '.join(named[:2])})"


def _check_keywords(value: dict[str, Any], src: str, model: Any) -> None:
    """Refuse keyword inputs the model's forward does not take, before the run fails."""
    module = getattr(model, "model", model)
    if not isinstance(module, nn.Module):
        return
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):  # TorchScript methods and builtins have no signature
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in params if p.kind in kinds]
    unknown = [k for k in value if k not in names]
    if not unknown:
        return
    cls = getattr(module, "original_name", None) or type(module).__name__
    shown = ", ".join(repr(k) for k in unknown[:4]) + (", ..." if len(unknown) > 4 else "")
    takes = ", ".join(names) if names else "no keyword inputs"
    raise InputError(
        f"{src}: holds keyword inputs {shown}, but {cls}.forward takes {takes}; "
        "save a tensor (or a dict keyed by those names)"
    )


def _check_positional(value: tuple[Any, ...], src: str, model: Any) -> None:
    """Refuse more (or fewer) positional inputs than the model's forward takes."""
    module = getattr(model, "model", model)
    if not isinstance(module, nn.Module) or forward_takes_list(module):
        return  # a detector's tuple of images is its one list argument
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):  # TorchScript methods and builtins have no signature
        return
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in params if p.kind in kinds]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    count = len(value)
    if len(required) <= count <= len(positional):
        return
    cls = getattr(module, "original_name", None) or type(module).__name__
    many = f"{len(required)} to {len(positional)}" if len(required) < len(positional) else ""
    names = ", ".join(p.name for p in positional)
    raise InputError(
        f"{src}: holds {count} positional input{'' if count == 1 else 's'}, but {cls}.forward "
        f"takes {many or len(positional)} ({names})"
    )


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _fit_tensor(
    t: torch.Tensor, src: str, word: str, exp: ExpectedInput
) -> tuple[torch.Tensor, list[str]]:
    """Check a single tensor against the model; add a missing batch dimension."""
    notes: list[str] = []
    if t.is_floating_point():
        t = t.to(exp.dtype)
    if exp.channels is None or exp.spatial_dims is None:
        return t, notes
    rank = exp.spatial_dims + 2
    c = exp.channels
    layout = f"(N, {c}" + ", D, H, W"[-3 * exp.spatial_dims :] + ")"
    article = "an" if word[0] in "aeiou" else "a"
    if t.ndim == rank - 1 and t.shape[0] == c:
        t = t.unsqueeze(0)
        notes.append("added a batch dimension")
    elif t.ndim != rank:
        raise InputError(
            f"{src}: model expects {c} input channels ({exp.layer}), got a {t.ndim}-D {word} "
            f"of shape {_shape_text(tuple(t.shape))}; expected {rank}-D {layout}"
        )
    if t.shape[1] != c:
        raise InputError(
            f"{src}: model expects {c} input channels ({exp.layer}), got {article} {word} of "
            f"shape {_shape_text(tuple(t.shape))} with {t.shape[1]} channel"
            f"{'' if t.shape[1] == 1 else 's'}; expected {layout}"
        )
    return t, notes


def _display_image(value: Any) -> np.ndarray | None:
    """A min-max view of the first sample when the input is an (N, 1|3, H, W) tensor."""
    if not isinstance(value, torch.Tensor) or value.ndim != 4 or value.shape[1] not in (1, 3):
        return None
    if not (value.is_floating_point() or value.dtype == torch.uint8):
        return None
    x = value[0].detach().to("cpu", torch.float32)
    finite = x[torch.isfinite(x)]
    if finite.numel() == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    x = torch.nan_to_num((x - lo) / (hi - lo) if hi > lo else torch.zeros_like(x))
    return _to_uint8_rgb(x)


def _move(value: Any, exp: ExpectedInput) -> Any:
    def move(t: torch.Tensor) -> torch.Tensor:
        return (
            t.to(device=exp.device, dtype=exp.dtype) if t.is_floating_point() else t.to(exp.device)
        )

    return map_tensors(value, move)


def _from_value(value: Any, src: str, kind: str, word: str, exp: ExpectedInput) -> LoadedInput:
    notes: list[str] = []
    if isinstance(value, torch.Tensor):
        value, notes = _fit_tensor(value, src, word, exp)
    value = _move(value, exp)
    name = Path(src).name if not src.startswith(("<", "random")) else src
    extra = f" ({', '.join(notes)})" if notes else ""
    return LoadedInput(value, src, kind, _display_image(value), f"{name}: {describe(value)}{extra}")


# --------------------------------------------------------------------------------------------
# Random
# --------------------------------------------------------------------------------------------


def _from_random(src: str, exp: ExpectedInput, size: tuple[int, int] | None) -> LoadedInput:
    spec = src[len("random") :].lstrip(":")
    shape_text, _, seed_text = spec.partition(":")
    seed = RANDOM_SEED
    if seed_text:
        try:
            seed = int(seed_text)
        except ValueError:
            raise InputError(f"{src}: seed {seed_text!r} is not an integer") from None
    if shape_text:
        try:
            shape = tuple(int(s) for s in re.split(r"[x,*]", shape_text.lower()))
        except ValueError:
            raise InputError(
                f"{src}: cannot read the shape {shape_text!r}; write it like random:1x3x224x224"
            ) from None
        if not shape or any(s <= 0 for s in shape):
            raise InputError(f"{src}: every dimension must be a positive integer")
    else:
        hw = exp.size or size
        if hw is None or exp.spatial_dims not in (None, 2):
            raise InputError(
                f"{src}: the model's input size is unknown; give a shape like random:1x3x224x224"
            )
        shape = (1, exp.channels or 3, *hw)
    if int(np.prod(shape)) > 2**31:
        raise InputError(f"{src}: {np.prod(shape):.3g} elements is too many for one input")
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=gen, dtype=torch.float32)
    t, notes = _fit_tensor(t, src, "tensor", exp)
    value = t.to(exp.device)
    extra = f", {', '.join(notes)}" if notes else ""
    description = f"random: {describe(value)}, standard normal, seed {seed}{extra}"
    return LoadedInput(value, src, "random", _display_image(value), description)


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def _from_text(src: str, exp: ExpectedInput, loaded_model: LoadedModel | None) -> LoadedInput:
    text = src[len(TEXT_PREFIX) :]
    tokenizer = getattr(loaded_model, "tokenizer", None)
    if tokenizer is None:
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
    mask = encoded.get("attention_mask")
    if mask is None:
        mask = torch.ones_like(ids)
    value = {"input_ids": ids.to(exp.device), "attention_mask": mask.to(exp.device)}
    tokens = token_strings(tokenizer, ids[0].tolist())
    count = f"{ids.shape[1]} token{'' if ids.shape[1] == 1 else 's'}"
    description = f"text {_short(text, 40)!r}: {count} ({describe(value)})"
    return LoadedInput(value, src, "text", None, description, tokens)


def token_strings(tokenizer: Any, ids: list[int]) -> list[str]:
    """One readable string per token id, for axis labels.

    Each id is decoded on its own (``" world"``, not byte-level ``"Ġworld"``); where that gives
    nothing readable (an empty string, or a lone part of a multi-byte character) the
    tokenizer's own token string is used.
    """
    raw = tokenizer.convert_ids_to_tokens(ids)
    out = []
    for token_id, token in zip(ids, raw, strict=True):
        try:
            text = tokenizer.decode([token_id], clean_up_tokenization_spaces=False)
        except Exception:  # noqa: BLE001 - decoding a lone id may fail; the raw token remains
            text = ""
        out.append(text if text and "\ufffd" not in text else str(token))
    return out


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
