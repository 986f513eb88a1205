"""Tensors and images as model inputs: what an opened input is (:class:`LoadedInput`), what a
model expects (:func:`expected_input`); tensor files read and fitted to the model, seeded
``random:`` tensors, and images read as scans read them (an image gives the same input in both)."""

from __future__ import annotations

import contextlib
import inspect
import pickle
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from actviz.core.input_copies import forward_takes_list
from actviz.core.structures import describe, map_tensors
from actviz.io.errors import InputError, ModelFileAsInputError, ModelLoadError
from actviz.io.models.checkpoints import FileFormat, extract_weights, one_line, shape_text

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from actviz.io.models.loaded_model import LoadedModel

#: Seed of ``random:`` inputs when none is given, so runs repeat.
RANDOM_SEED = 0
_TENSOR_FORMATS = (
    FileFormat.TORCH_ZIP, FileFormat.PICKLE, FileFormat.NPY, FileFormat.NPZ, FileFormat.SAFETENSORS
)  # fmt: skip
# ITU-R 601-2 luma, the weights PIL's convert("L") uses.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
# Parameter names ending the keys of a state_dict (a dict of keyword inputs has none of them).
_WEIGHT_KEY = re.compile(
    r"\.(weight|bias|running_mean|running_var|num_batches_tracked|in_proj_\w+)$"
)


@dataclass(frozen=True)
class LoadedInput:
    """An input ready for the model, and what the UI needs to show it: ``value`` is a tensor,
    tuple, dict or list of images; ``kind`` ``"image"``, ``"tensor"``, ``"random"`` or ``"text"``;
    ``image`` the first sample as the model sees it before normalisation (None if not
    image-like); ``description`` one status line; ``tokens`` a text input's token strings.
    A session keeps its input as one (embedded in its file: ``source`` is only shown)."""

    value: Any = field(repr=False)
    source: str = ""
    kind: str = "tensor"
    image: np.ndarray | None = field(default=None, repr=False)
    description: str = ""
    tokens: Sequence[str] | None = None

    @property
    def text(self) -> str | None:
        return self.source[5:] if self.source.startswith("text:") else None

    @property
    def caption(self) -> str:
        """The line under the input's preview: its file's name and how it was made."""
        caption = self.description or self.source
        if self.source and self.text is None and (name := Path(self.source).name) not in caption:
            caption = f"{name} · {caption}"
        return caption


@dataclass
class ExpectedInput:
    """What is known about the model's input: ``channels``, ``spatial_dims`` (1-3), ``layer`` (the
    evidence, for messages), ``size`` ``(H, W)``, and the first parameter's ``dtype``/``device``."""

    channels: int | None = None
    spatial_dims: int | None = None
    layer: str = ""
    size: tuple[int, int] | None = None
    dtype: torch.dtype = torch.float32
    device: torch.device = torch.device("cpu")


def reads_text(loaded_model: Any) -> bool:
    """True for a model with a tokenizer and no image processor (a language model)."""
    return (
        getattr(loaded_model, "tokenizer", None) is not None
        and getattr(loaded_model, "processor", None) is None
    )


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
    """What a model expects as input, from its first convolution and ``loaded_model``'s metadata."""
    if model is None and loaded_model is not None:
        model = loaded_model.model
    exp = ExpectedInput()
    if loaded_model is not None:
        exp.size = loaded_model.input_size
        if (shape := getattr(loaded_model, "input_shape", None)) is not None and len(shape) >= 3:
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
    if exp.channels is None and (found := _first_conv(model)) is not None:
        name, conv = found
        type_name = getattr(conv, "original_name", None) or type(conv).__name__
        exp.channels = int(conv.in_channels)
        exp.spatial_dims = int(type_name[-2]) if type_name[-2].isdigit() else None
        out = getattr(conv, "out_channels", "?")
        exp.layer = f"first layer {name or '(model)'}: {type_name}({exp.channels}, {out}, ...)"
    return exp


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
    with contextlib.suppress(OSError, ValueError, TypeError):
        img = ImageOps.exif_transpose(img)  # phone photos store rotation in EXIF
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


def _to_uint8_rgb(chw: torch.Tensor) -> np.ndarray:
    """(C, H, W) float in [0, 1] -> (H, W, 3) uint8; one channel is repeated to gray RGB."""
    arr = chw.detach().to("cpu", torch.float32).clamp(0.0, 1.0).numpy()
    if arr.shape[0] == 1:
        arr = np.repeat(arr, 3, axis=0)
    return np.ascontiguousarray(np.round(arr[:3].transpose(1, 2, 0) * 255.0).astype(np.uint8))


def _describe_transforms(transforms: Any) -> str:
    parts = []
    for word, key in (("resize", "resize_size"), ("center crop", "crop_size")):
        if sides := getattr(transforms, key, None):
            parts.append(f"{word} {'x'.join(str(v) for v in sides)}")
    if (mean := getattr(transforms, "mean", None)) is not None:
        imagenet = [round(float(v), 3) for v in mean] == [0.485, 0.456, 0.406]
        parts.append("ImageNet normalisation" if imagenet else "mean/std normalisation")
    return ", ".join(parts) or f"via {getattr(transforms, '__name__', type(transforms).__name__)}"


def _from_image(
    img: Image.Image, src: str, exp: ExpectedInput, transforms: Any, size: tuple[int, int] | None
) -> LoadedInput:
    from PIL import Image

    mode, (width, height) = img.mode, img.size
    arr, notes = _image_to_float(img)
    channels = exp.channels
    if channels is None and transforms is not None:
        channels = 3  # weight transforms are written for RGB
    if channels == 3 and arr.shape[-1] == 1:
        arr, notes = np.repeat(arr, 3, axis=-1), [*notes, "gray -> 3 channels"]
    elif channels == 1 and arr.shape[-1] == 3:
        arr, notes = (arr @ _LUMA)[..., None], [*notes, "RGB -> gray"]
    elif channels not in (None, arr.shape[-1]):
        raise InputError(
            f"{src}: model expects {channels} input channels ({exp.layer}); "
            f"an image gives 1 (gray) or 3 (RGB)"
        )
    chw = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))

    if transforms is not None:
        if type(transforms).__module__.startswith("torchvision.transforms"):
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
        y = (y if y.ndim == 3 else y[0]).to(torch.float32)
        mean, std = getattr(transforms, "mean", None), getattr(transforms, "std", None)
        if mean is not None and std is not None and len(mean) == len(std) == y.shape[0]:
            m, s = (torch.tensor(list(v), dtype=y.dtype).view(-1, 1, 1) for v in (mean, std))
            shown = y * s + m  # the normalisation undone
        else:
            lo, hi = float(y.min()), float(y.max())
            if lo >= 0.0 and hi <= 1.0:
                shown = y
            else:
                shown = (y - lo) / (hi - lo) if hi > lo else torch.zeros_like(y)
        how = _describe_transforms(transforms)
    else:
        target, y, how = exp.size or size, chw, "scaled to [0, 1]"
        if target is not None and tuple(target) != (chw.shape[1], chw.shape[2]):
            y = torch.nn.functional.interpolate(
                chw[None], size=tuple(target), mode="bilinear", align_corners=False, antialias=True
            )[0].clamp(0.0, 1.0)
            how = f"resized to {target[1]}x{target[0]}, {how}"
        shown = y
    value = y[None].to(device=exp.device, dtype=exp.dtype).contiguous()
    shape = "x".join(str(s) for s in value.shape)
    extra = f", {', '.join(notes)}" if notes else ""
    name = Path(src).name if src != "<image>" else src
    description = f"{name}: {mode} {width}x{height} -> {shape} ({how}{extra})"
    return LoadedInput(value, src, "image", _to_uint8_rgb(shown), description)


def _array_to_tensor(arr: np.ndarray, src: str) -> torch.Tensor:
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise InputError(f"{src}: holds a {arr.dtype} array; expected numbers")
    try:
        return torch.from_numpy(np.array(arr, copy=True, order="C"))
    except TypeError as exc:  # dtypes torch lacks (e.g. uint32 on old torch, complex256)
        raise InputError(f"{src}: unsupported array dtype {arr.dtype} ({one_line(exc)})") from exc


def _read_tensor_file(path: Path, src: str, fmt: str) -> tuple[Any, str]:
    """Read .pt / .npy / .npz / .safetensors content; returns (value, word for messages)."""
    if fmt in (FileFormat.NPY, FileFormat.NPZ):
        try:
            loaded = np.load(path, allow_pickle=False)
            if fmt == FileFormat.NPY:
                return _array_to_tensor(loaded, src), "array"
            with loaded as npz:
                arrays = {name: _array_to_tensor(npz[name], src) for name in npz.files}
        except ValueError as exc:
            raise InputError(f"{src}: holds Python objects, not numbers ({one_line(exc)})") from exc
        except (OSError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"{src}: damaged .{fmt} file ({one_line(exc)})") from exc
        if not arrays:
            raise InputError(f"{src}: the .npz archive holds no arrays")
        if len(arrays) == 1:
            return next(iter(arrays.values())), "array"
        positional = [f"arr_{i}" for i in range(len(arrays))]
        if set(arrays) == set(positional):
            # np.savez(f, a, b) names them arr_0, arr_1: the forward's positional inputs.
            return tuple(arrays[name] for name in positional), "array"
        return arrays, "array"
    if fmt == FileFormat.SAFETENSORS:
        from actviz.io.models.checkpoints import read_safetensors

        if not (tensors := read_safetensors(path, src, InputError)):
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
        if weights := _model_weights(obj):
            # A checkpoint opened as input by mistake would fail as unexpected keyword inputs.
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


def _model_weights(obj: dict[str, Any]) -> str:
    """What model weights ``obj`` holds, in words; "" when it is no checkpoint."""
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


def _check_arguments(value: dict[str, Any] | tuple[Any, ...], src: str, model: Any) -> None:
    """Refuse keyword inputs (a dict) or more or fewer positional ones (a tuple) than the model's
    forward takes, before the run fails; nothing when its signature is unknown (TorchScript)."""
    module = getattr(model, "model", model)
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (AttributeError, TypeError, ValueError):  # no forward, or a builtin's
        return
    P = inspect.Parameter
    cls = getattr(module, "original_name", None) or type(module).__name__
    if isinstance(value, dict):
        names = [p.name for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)]
        unknown = [k for k in value if k not in names]
        if not unknown or any(p.kind is P.VAR_KEYWORD for p in params):
            return
        shown = ", ".join(repr(k) for k in unknown[:4]) + (", ..." if len(unknown) > 4 else "")
        takes = ", ".join(names) if names else "no keyword inputs"
        raise InputError(
            f"{src}: holds keyword inputs {shown}, but {cls}.forward takes {takes}; "
            "save a tensor (or a dict keyed by those names)"
        )
    # A detector's tuple of images is its one list argument.
    if any(p.kind is P.VAR_POSITIONAL for p in params) or forward_takes_list(module):
        return
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is P.empty]
    count = len(value)
    if len(required) <= count <= len(positional):
        return
    many = f"{len(required)} to {len(positional)}" if len(required) < len(positional) else ""
    names = ", ".join(p.name for p in positional)
    raise InputError(
        f"{src}: holds {count} positional input{'' if count == 1 else 's'}, but {cls}.forward "
        f"takes {many or len(positional)} ({names})"
    )


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
            f"of shape {shape_text(t)}; expected {rank}-D {layout}"
        )
    if t.shape[1] != c:
        raise InputError(
            f"{src}: model expects {c} input channels ({exp.layer}), got {article} {word} of "
            f"shape {shape_text(t)} with {t.shape[1]} channel"
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
    if (finite := x[torch.isfinite(x)]).numel() == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    x = torch.nan_to_num((x - lo) / (hi - lo) if hi > lo else torch.zeros_like(x))
    return _to_uint8_rgb(x)


def _from_value(value: Any, src: str, kind: str, word: str, exp: ExpectedInput) -> LoadedInput:
    notes: list[str] = []
    if isinstance(value, torch.Tensor):
        value, notes = _fit_tensor(value, src, word, exp)
    value = map_tensors(
        value, lambda t: t.to(exp.device, exp.dtype) if t.is_floating_point() else t.to(exp.device)
    )
    name = Path(src).name if not src.startswith(("<", "random")) else src
    extra = f" ({', '.join(notes)})" if notes else ""
    return LoadedInput(value, src, kind, _display_image(value), f"{name}: {describe(value)}{extra}")


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
    t = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    t, notes = _fit_tensor(t, src, "tensor", exp)
    value = t.to(exp.device)
    extra = f", {', '.join(notes)}" if notes else ""
    description = f"random: {describe(value)}, standard normal, seed {seed}{extra}"
    return LoadedInput(value, src, "random", _display_image(value), description)
