"""Images as model inputs, shared with scans so an image gives the same input in both: any PIL
mode to floats, channels fitted, the model's preprocessing and the picture it sees."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from actviz.io.errors import InputError
from actviz.io.loaded_input import ExpectedInput, LoadedInput
from actviz.io.models.checkpoints import one_line

if TYPE_CHECKING:
    from PIL import Image

# ITU-R 601-2 luma, the weights PIL's convert("L") uses.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


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
        y = y if y.ndim == 3 else y[0]
        y = y.to(torch.float32)
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
