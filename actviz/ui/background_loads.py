"""The window's background loaders (Qt-free, so tests swap them) and the requests tracking them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_SUFFIXES = {".pt2", ".safetensors", ".pth", ".ckpt", ".ts", ".torchscript"}
#: File-dialog filters of the inputs the window opens.
IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.bmp *.gif *.tif *.tiff *.webp)"
TENSOR_FILTER = "Tensors (*.pt *.pth *.npy *.npz *.safetensors)"
MAX_ERROR_CHARS = 240  #: Longest error text the banner shows (the first line of the message, cut).

#: ``model_loader(source, *, arch, weights, trust) -> LoadedModel``; raises on failure
#: (``UntrustedFileError`` when a full pickle needs ``trust=True``).
ModelLoader = Callable[..., Any]
#: ``input_loader(source, *, model, loaded_model) -> LoadedInput``; raises on failure.
InputLoader = Callable[..., Any]


def names_a_model(path: str | Path) -> bool:
    """Whether a dropped ``path`` opens as a model (by suffix, or a Hugging Face folder); a
    ``.pt`` file opens as an input first, and as a model when it holds one."""
    return Path(path).suffix.lower() in MODEL_SUFFIXES or (Path(path) / "config.json").is_file()


def load_model_source(
    source: str, *, arch: str | None = None, weights: str | None = "DEFAULT", trust: bool = False
) -> Any:
    """Default model loader: :func:`actviz.io.models.loading.open_model` (on a loader thread)."""
    from actviz.io.models.loading import open_model

    return open_model(source, arch=arch, weights=weights, trust=trust)


def load_input_source(source: str, *, model: Any = None, loaded_model: Any = None) -> Any:
    """Default input loader (never runs the model, so it may overlap a capture)."""
    from actviz.io.input_files import open_input

    return open_input(source, model=model, loaded_model=loaded_model)


@dataclass(eq=False)
class ModelRequest:
    """One "open this model" request (``succeeded`` None until done; ``dialog``: its dialog)."""

    source: str
    arch: str | None = None
    weights: str | None = "DEFAULT"
    trust: bool = False
    remember: bool = True
    job: Any = None
    succeeded: bool | None = None
    dialog: Any = None


@dataclass(eq=False)
class InputRequest:
    """One "open this input" request. ``quiet``: a start-up default; ``dropped``: a model file
    opens as the model; ``swap``: re-read for a model just opened."""

    source: str
    remember: bool = True
    quiet: bool = False
    dropped: bool = False
    swap: bool = False
    model: Any = None
    job: Any = None  #: The loader's job reading it (None while it waits for a model being opened).
    succeeded: bool | None = None


def short_source(source: str) -> str:
    """What the status bar calls a source: a file's name, or the source as given."""
    text = str(source)
    return (Path(text).name or text) if "/" in text or "\\" in text else text


def format_eta(seconds: float) -> str:
    """``"0:07"``, ``"12:03"``, ``"1:02:03"``; ``"—"`` while unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "—"
    hours, rest = divmod(int(round(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def describe_error(exc: BaseException) -> str:
    """One readable line for the banner (unexpected errors with their type)."""
    from actviz.io.errors import ActvizError

    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    if len(text) > MAX_ERROR_CHARS:  # the rest is in the traceback, behind "Details"
        text = text[: MAX_ERROR_CHARS - 1].rstrip() + "…"
    if isinstance(exc, (ActvizError, ValueError, OSError)):
        return text
    return f"{type(exc).__name__}: {text}"


def error_details(exc: BaseException) -> str:
    """The whole traceback of ``exc``, for the banner's Details button."""
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def failed_status(source: str) -> str:
    """The status bar's line for a failed open; the banner above holds the reason."""
    return f"Could not open {short_source(source)}: see the message above"


def failure_reason(error: BaseException, source: str) -> str:
    """Why opening ``source`` failed, without the file name the error starts with."""
    return describe_error(error).removeprefix(f"{source}: ")


def arch_needed_text(error: Any, *, in_dialog: bool = False) -> str:
    """What the window says about an ``ArchitectureNeededError`` (``in_dialog``: choose below)."""
    name = Path(error.path).name or error.path
    candidates = list(getattr(error, "candidates", ()) or ())
    lead = f"{name} holds only weights, not the architecture"
    if not candidates:
        found = "and no known architecture matches its tensor names and shapes"
        ask = (
            "Type the architecture it belongs to: a torchvision name (resnet18) or "
            "path/model.py:ClassName."
            if in_dialog
            else "Name it in File > Open model (Ctrl+O)."
        )
    else:
        best = candidates[0]
        tied = [c.name for c in candidates if c.fits and c.score == best.score]
        if best.fits and len(tied) > 1:
            found = f"and {len(tied)} architectures fit it equally well ({', '.join(tied)})"
        elif best.fits:
            found = f"and {best.name} fits it ({best.reason})"
        else:
            found = f"and none fits exactly; closest: {best.name} ({best.reason})"
        ask = (
            "Choose one of the candidates below, or type another architecture."
            if in_dialog
            else "Open it from File > Open model (Ctrl+O) to choose among the candidates."
        )
    return f"{lead}, {found}. {ask}"


def local_files(mime: Any) -> list[str]:
    """Local file paths carried by a drag's ``QMimeData`` (empty for text or remote URLs)."""
    if mime is None or not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]
