"""Live inputs without widgets: frame sources, perturbations, the player and the coalescer.

Everything here is plain logic the live controller (:mod:`actviz.ui.live.playback`) drives:

* :class:`FrameSource` and its kinds: the frames of a ``(T, C, H, W)`` tensor
  (:class:`TensorFrames`), a folder of images (:class:`ImageFolder`), the current input alone
  (:class:`StillFrame`) and a camera (:class:`WebcamSource`, only where QtMultimedia exists;
  :func:`webcam_status` says why not otherwise);
* :class:`Perturbation`: occlusion patch, noise, brightness and contrast applied to the model
  input *and* to its display image, so what the panels show is what the model saw;
* :class:`Player`: play/pause/step/seek/speed over a frame count;
* :class:`Coalescer`: at most ``limit`` frames in flight and one waiting; a newer request
  replaces the waiting one (counted as dropped) and starts are spaced by a minimum interval,
  which caps repaints (at ~60 Hz, a display's refresh);
* :class:`RateMeter`: frames per second over a sliding window.

Frames are loaded on the worker thread (``FrameSource.frame`` is called there), so decoding an
image never blocks the GUI.
"""

from __future__ import annotations

import collections
import importlib.util
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actviz.core.structures import iter_tensors, map_tensors
from actviz.data.sources import IMAGE_SUFFIXES

log = logging.getLogger(__name__)

__all__ = [
    "IMAGE_SUFFIXES",
    "WEBCAM_MISSING",
    "Coalescer",
    "FrameSource",
    "ImageFolder",
    "LiveFrame",
    "Perturbation",
    "Player",
    "RateMeter",
    "StillFrame",
    "TensorFrames",
    "WebcamSource",
    "estimate_bytes",
    "image_tensor",
    "picture_of",
    "webcam_status",
]

WEBCAM_MISSING = "webcam needs PySide6-Addons (QtMultimedia)"


# --------------------------------------------------------------------------------------------
# frames and sources
# --------------------------------------------------------------------------------------------


@dataclass
class LiveFrame:
    """One frame ready for the model.

    Attributes
    ----------
    value
        The model input (a tensor, usually ``(1, C, H, W)``; tuples/dicts pass through).
    image
        ``(H, W, 3)`` uint8 picture of it for overlays, or None (rebuilt from the tensor).
    label
        Short text for the controls, e.g. the file name.
    index
        Position in the source.
    path
        The file it was read from ("" when none: a camera, an in-memory tensor).
    """

    value: Any
    image: np.ndarray | None
    label: str
    index: int
    path: str = ""


class FrameSource:
    """A sequence of frames. ``frame(i)`` may be called from the worker thread."""

    name = "frames"

    def __len__(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def frame(self, index: int) -> LiveFrame:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        """One line for the controls."""
        return f"{self.name}: {len(self)} frame{'s' if len(self) != 1 else ''}"


def _display(value: torch.Tensor) -> np.ndarray | None:
    from actviz.display.attribution import display_image

    return display_image(value, None)


class StillFrame(FrameSource):
    """The current input as a one-frame source (perturbations without a sequence)."""

    def __init__(
        self, value: Any, image: np.ndarray | None = None, label: str = "input", path: str = ""
    ) -> None:
        self.value = value
        self.image = image
        self.name = label
        self.path = path

    def __len__(self) -> int:
        return 1

    def frame(self, index: int) -> LiveFrame:
        return LiveFrame(self.value, self.image, self.name, 0, self.path)


class TensorFrames(FrameSource):
    """The frames of a ``(T, C, H, W)`` tensor (or ``(T, ...)``), one ``(1, ...)`` input each.

    Parameters
    ----------
    frames
        The stacked frames; frame ``i`` is ``frames[i:i+1]``.
    name
        Shown in the controls.
    device, dtype
        Where the model lives; float frames get its dtype.
    """

    def __init__(
        self,
        frames: torch.Tensor,
        name: str = "tensor",
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if not isinstance(frames, torch.Tensor) or frames.dim() < 2 or frames.shape[0] < 1:
            shape = tuple(frames.shape) if isinstance(frames, torch.Tensor) else type(frames)
            raise ValueError(
                f"a frame sequence needs a tensor shaped (T, C, H, W) with T >= 1, got {shape}"
            )
        frames = frames.detach()
        if device is not None:
            frames = frames.to(device)
        if dtype is not None and frames.is_floating_point():
            frames = frames.to(dtype)
        self.frames = frames
        self.name = name
        #: The file the frames were read from ("" for an in-memory tensor).
        self.path = ""
        self._images: dict[int, np.ndarray | None] = {}

    @classmethod
    def from_file(cls, path: str | Path, model: torch.nn.Module | None = None) -> TensorFrames:
        """Read a tensor file (``.pt``/``.npy``/``.npz``/``.safetensors``) holding ``(T, C, H, W)``.

        Raises
        ------
        ValueError
            The file holds something else (a tuple, a dict, a 1-D tensor).
        actviz.io.errors.InputError
            The file cannot be read.
        """
        from actviz.io.input_files import open_input

        loaded = open_input(str(path))  # no model: the (T, ...) layout is not checked as (N, ...)
        value = loaded.value
        if not isinstance(value, torch.Tensor):
            raise ValueError(
                f"{Path(path).name}: holds a {type(value).__name__}; a frame sequence is one "
                "tensor shaped (T, C, H, W)"
            )
        device = dtype = None
        if model is not None:
            for p in model.parameters():
                device = p.device
                if p.is_floating_point():
                    dtype = p.dtype
                    break
        frames = cls(value, Path(path).name, device=device, dtype=dtype)
        frames.path = str(path)
        return frames

    def __len__(self) -> int:
        return int(self.frames.shape[0])

    def frame(self, index: int) -> LiveFrame:
        index = int(index) % len(self)
        value = self.frames[index : index + 1]
        if index not in self._images:
            self._images[index] = _display(value) if value.dim() == 4 else None
        return LiveFrame(value, self._images[index], f"{self.name}[{index}]", index, self.path)


class ImageFolder(FrameSource):
    """The images of a folder, in name order, each prepared like an opened input.

    Parameters
    ----------
    folder
        A directory holding image files (:data:`IMAGE_SUFFIXES`).
    model, loaded_model
        What ``actviz.io.input_files.open_input`` adapts the images to (size, transforms).
    cache
        Frames kept decoded (looping over a short folder then costs nothing).
    """

    def __init__(
        self,
        folder: str | Path,
        model: torch.nn.Module | None = None,
        loaded_model: Any = None,
        cache: int = 32,
    ) -> None:
        folder = Path(folder)
        if not folder.is_dir():
            raise ValueError(f"{folder}: not a folder")
        from actviz.data.sources import folder_images

        # As a scan reads it: class subfolders included (an ImageFolder layout plays in order).
        self.files = [Path(p) for p in folder_images(folder.resolve())[0]]
        if not self.files:
            raise ValueError(
                f"{folder}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in this folder "
                "or its subfolders"
            )
        self.folder = folder
        self.name = folder.name or str(folder)
        self.model = model
        self.loaded_model = loaded_model
        self._cache: collections.OrderedDict[int, LiveFrame] = collections.OrderedDict()
        self._cache_size = max(1, cache)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.files)

    def frame(self, index: int) -> LiveFrame:
        from actviz.io.input_files import open_input

        index = int(index) % len(self)
        with self._lock:
            hit = self._cache.get(index)
            if hit is not None:
                self._cache.move_to_end(index)
                return hit
        path = self.files[index]
        loaded = open_input(str(path), model=self.model, loaded_model=self.loaded_model)
        frame = LiveFrame(loaded.value, loaded.image, path.name, index, str(path))
        with self._lock:
            self._cache[index] = frame
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return frame


# --------------------------------------------------------------------------------------------
# perturbations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Perturbation:
    """Changes applied to the current frame before the model sees it.

    All amounts are relative, so one setting means the same on any input scale (raw pixels,
    ImageNet-normalised tensors, ...).

    Attributes
    ----------
    occlusion
        Centre ``(x, y)`` of a square patch, as fractions of the width and height; None: off.
    occlusion_size
        Patch side as a fraction of the shorter image side.
    noise
        Gaussian noise, standard deviation as a fraction of the frame's own std (0 = off).
    brightness
        Shift as a fraction of the frame's value range (-1 .. 1).
    contrast
        Factor around each channel's mean (1 = unchanged, 0 = flat).
    seed
        Seed of the noise pattern: fixed, so moving the noise slider scales one pattern
        instead of flickering.
    """

    occlusion: tuple[float, float] | None = None
    occlusion_size: float = 0.25
    noise: float = 0.0
    brightness: float = 0.0
    contrast: float = 1.0
    seed: int = 0

    def is_identity(self) -> bool:
        return (
            self.occlusion is None
            and self.noise == 0.0
            and self.brightness == 0.0
            and self.contrast == 1.0
        )

    def describe(self) -> str:
        """e.g. ``"occlusion 25% at (0.40, 0.60), noise 10%"``; "none" when nothing applies."""
        parts = []
        if self.occlusion is not None:
            x, y = self.occlusion
            parts.append(f"occlusion {self.occlusion_size:.0%} at ({x:.2f}, {y:.2f})")
        if self.noise:
            parts.append(f"noise {self.noise:.0%}")
        if self.brightness:
            parts.append(f"brightness {self.brightness:+.0%}")
        if self.contrast != 1.0:
            parts.append(f"contrast {self.contrast:.0%}")
        return ", ".join(parts) or "none"

    # -- geometry ----------------------------------------------------------------------------
    def patch_box(self, height: int, width: int) -> tuple[int, int, int, int] | None:
        """``(y0, y1, x0, x1)`` of the occlusion patch in an image of that size (clipped)."""
        if self.occlusion is None:
            return None
        side = max(1, round(self.occlusion_size * min(height, width)))
        cx, cy = self.occlusion[0] * width, self.occlusion[1] * height
        # floor(... + 0.5): plain rounding, not Python's round-half-to-even.
        x0 = math.floor(cx - side / 2 + 0.5)
        y0 = math.floor(cy - side / 2 + 0.5)
        x0c, y0c = max(0, x0), max(0, y0)
        x1c, y1c = min(width, x0 + side), min(height, y0 + side)
        if x1c <= x0c or y1c <= y0c:
            return None
        return y0c, y1c, x0c, x1c

    # -- application -------------------------------------------------------------------------
    def apply(self, value: Any, image: np.ndarray | None = None) -> tuple[Any, np.ndarray | None]:
        """Perturb a model input and its display image the same way.

        Parameters
        ----------
        value
            A tensor ``(N, C, H, W)`` (or ``(C, H, W)``), or a tuple/list/dict whose first such
            float tensor is perturbed; anything else is returned unchanged.
        image
            ``(H', W', 3)`` uint8 display picture, or None.

        Returns
        -------
        tuple
            New ``(value, image)``; inputs are never modified in place.
        """
        if self.is_identity():
            return value, image
        noise_field: torch.Tensor | None = None
        new_value = value
        new_image = None
        target = image_tensor(value)
        if target is not None:
            perturbed, noise_field = self._apply_tensor(target)
            new_value = _replace_image_tensor(value, perturbed)
            if image is not None:
                # The picture of exactly the tensor the model gets, in the picture's colours.
                new_image = picture_of(perturbed, target, image)
        if new_image is None and image is not None:
            new_image = self._apply_image(image, noise_field)
        return new_value, new_image

    def as_dict(self) -> dict[str, Any]:
        """Every perturbation that applies, with its value (``{}`` when none does), e.g.
        ``{"noise": 0.2, "seed": 0, "brightness": 0.1, "occlusion": {"x": .., "y": .., "size": ..}}``."""
        out: dict[str, Any] = {}
        if self.occlusion is not None:
            x, y = self.occlusion
            out["occlusion"] = {"x": float(x), "y": float(y), "size": float(self.occlusion_size)}
        if self.noise:
            out["noise"] = float(self.noise)
            out["seed"] = int(self.seed)  # the noise pattern, so the frame can be rebuilt
        if self.brightness:
            out["brightness"] = float(self.brightness)
        if self.contrast != 1.0:
            out["contrast"] = float(self.contrast)
        return out

    def _apply_tensor(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        squeeze = x.dim() == 3
        t = (x[None] if squeeze else x).detach()
        dtype = t.dtype
        t = t.float().clone()
        dims = (2, 3)
        if self.contrast != 1.0:
            mean = t.mean(dim=dims, keepdim=True)
            t = mean + self.contrast * (t - mean)
        if self.brightness:
            span = t.amax(dim=(1, 2, 3), keepdim=True) - t.amin(dim=(1, 2, 3), keepdim=True)
            t = t + self.brightness * span
        field = None
        if self.noise:
            gen = torch.Generator(device="cpu").manual_seed(self.seed)
            field = torch.randn(t.shape, generator=gen).to(t.device)
            std = t.std(dim=(1, 2, 3), keepdim=True)
            t = t + self.noise * std * field
        box = self.patch_box(t.shape[2], t.shape[3])
        if box is not None:
            y0, y1, x0, x1 = box
            # Each channel's mean: the "grey" of this input's own scale.
            fill = t.mean(dim=dims, keepdim=True).expand(-1, -1, y1 - y0, x1 - x0)
            t[:, :, y0:y1, x0:x1] = fill
        t = t.to(dtype)
        return (t[0] if squeeze else t), field

    def _apply_image(self, image: np.ndarray, field: torch.Tensor | None) -> np.ndarray:
        img = np.asarray(image)[..., :3].astype(np.float32)
        h, w = img.shape[:2]
        if self.contrast != 1.0:
            mean = img.mean(axis=(0, 1), keepdims=True)
            img = mean + self.contrast * (img - mean)
        if self.brightness:
            img = img + self.brightness * 255.0
        if self.noise:
            if field is not None and tuple(field.shape[2:]) == (h, w):
                # The same pattern the model got, so the picture shows what it saw.
                z = field[0].permute(1, 2, 0).cpu().numpy()
                if z.shape[2] != 3:
                    z = np.repeat(z[..., :1], 3, axis=2)
            else:
                z = np.random.default_rng(self.seed).standard_normal((h, w, 3)).astype(np.float32)
            img = img + self.noise * float(img.std()) * z
        box = self.patch_box(h, w)
        if box is not None:
            y0, y1, x0, x1 = box
            img[y0:y1, x0:x1] = img.mean(axis=(0, 1))
        return np.ascontiguousarray(np.clip(img + 0.5, 0, 255).astype(np.uint8))


def picture_of(tensor: torch.Tensor, clean: torch.Tensor, image: np.ndarray) -> np.ndarray | None:
    """``tensor`` (a perturbed ``clean``) drawn the way ``image`` draws ``clean``.

    A frame's picture is, channel by channel, an affine map of its tensor (a min-max view,
    or the model's normalisation undone, rounded to uint8). That map is fitted on the clean
    pair and applied to ``tensor``, so the picture shows exactly what the model receives:
    brightness as brighter, noise and the patch where they are. Returns None when ``image``
    is not such a view of ``clean`` (another size, another picture), so the caller can fall
    back to perturbing the picture itself.
    """
    if tensor.dim() == 4:
        tensor, clean = tensor[0], clean[0]
    if tensor.dim() != 3 or clean.shape != tensor.shape or tensor.shape[0] not in (1, 3):
        return None
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[:2] != tuple(tensor.shape[1:]) or img.shape[2] < 3:
        return None
    x = clean.detach().to("cpu", torch.float64).numpy()
    t = tensor.detach().to("cpu", torch.float64).numpy()
    out = np.empty(img.shape[:2] + (3,), np.uint8)
    for c in range(3):
        k = min(c, x.shape[0] - 1)
        xc, yc = x[k].ravel(), img[..., c].ravel().astype(np.float64)
        inside = (yc > 0) & (yc < 255)  # clipped pixels say nothing about the map
        if inside.sum() < 2 or np.ptp(xc[inside]) == 0:
            return None
        a, b = np.polyfit(xc[inside], yc[inside], 1)
        fit = a * xc + b
        if np.abs(fit[inside] - yc[inside]).max() > 1.0:
            return None  # not a view of this tensor
        if np.any(fit[yc == 0] > 1.0) or np.any(fit[yc == 255] < 254.0):
            return None
        out[..., c] = np.clip(np.round(a * t[k] + b), 0, 255).astype(np.uint8)
    return out


def _is_image_tensor(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() in (3, 4)


def image_tensor(value: Any) -> torch.Tensor | None:
    """The tensor a perturbation applies to: the input itself or the first image-like one
    (float, 3 or 4 dimensions); None when ``value`` holds none (token ids, features)."""
    return next((t for t in iter_tensors(value) if _is_image_tensor(t)), None)


def _replace_image_tensor(value: Any, new: torch.Tensor) -> Any:
    """``value`` with its first image-like tensor replaced by ``new`` (types kept)."""
    old = image_tensor(value)
    return map_tensors(value, lambda t: new if t is old else t)


# --------------------------------------------------------------------------------------------
# player, rate, coalescing
# --------------------------------------------------------------------------------------------


class Player:
    """Play/pause/step/seek over ``length`` frames at ``fps`` frames per second.

    The player only keeps the position; the controller's timer calls :meth:`advance`.
    """

    MIN_FPS = 0.25
    MAX_FPS = 60.0

    def __init__(self, length: int = 1, fps: float = 10.0, loop: bool = True) -> None:
        self.length = max(1, int(length))
        self.index = 0
        self.playing = False
        self.loop = loop
        self.fps = fps
        self.set_fps(fps)

    def set_length(self, length: int) -> None:
        self.length = max(1, int(length))
        self.index = min(self.index, self.length - 1)

    def set_fps(self, fps: float) -> None:
        self.fps = float(min(max(fps, self.MIN_FPS), self.MAX_FPS))

    @property
    def interval_ms(self) -> int:
        return max(1, round(1000.0 / self.fps))

    def play(self) -> None:
        if self.length > 1:
            if not self.loop and self.index >= self.length - 1:
                self.index = 0  # play again from the start
            self.playing = True

    def pause(self) -> None:
        self.playing = False

    def toggle(self) -> bool:
        """Play if paused, pause if playing; returns whether it now plays."""
        if self.playing:
            self.pause()
        else:
            self.play()
        return self.playing

    def seek(self, index: int) -> int:
        self.index = int(min(max(index, 0), self.length - 1))
        return self.index

    def step(self, delta: int = 1) -> int:
        """Move ``delta`` frames (wrapping when looping, clamped otherwise)."""
        if self.loop:
            self.index = (self.index + delta) % self.length
        else:
            self.index = int(min(max(self.index + delta, 0), self.length - 1))
        return self.index

    def advance(self) -> int | None:
        """The next frame while playing; None (and paused) at the end of a non-looping run."""
        if not self.playing:
            return None
        if not self.loop and self.index >= self.length - 1:
            self.playing = False
            return None
        return self.step(1)


class RateMeter:
    """Events per second over the last ``window_s`` seconds."""

    def __init__(self, window_s: float = 2.0, clock: Callable[[], float] = time.perf_counter):
        self.window_s = window_s
        self.clock = clock
        self._times: collections.deque[float] = collections.deque()

    def tick(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self._times.append(now)
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._times and now - self._times[0] > self.window_s:
            self._times.popleft()

    def rate(self, now: float | None = None) -> float:
        """Events per second (0 with fewer than two events in the window)."""
        now = self.clock() if now is None else now
        self._trim(now)
        if len(self._times) < 2:
            return 0.0
        span = self._times[-1] - self._times[0]
        return (len(self._times) - 1) / span if span > 0 else 0.0

    def reset(self) -> None:
        self._times.clear()


class Coalescer:
    """At most ``limit`` jobs in flight and one waiting; the waiting one is always the latest.

    ``offer`` while jobs run replaces the waiting item (the replaced one is *dropped*);
    ``take`` hands out the waiting item when fewer than ``limit`` run and at least
    ``min_interval_s`` passed since the last start (which caps the result rate, e.g. ~60 Hz).
    """

    def __init__(
        self,
        min_interval_s: float = 1 / 60,
        clock: Callable[[], float] = time.perf_counter,
        limit: int = 1,
    ):
        self.min_interval_s = min_interval_s
        self.clock = clock
        self.limit = limit
        self.in_flight = 0
        self.pending: Any = None
        self._has_pending = False
        self._last_start = -math.inf
        self.offered = 0
        self.started = 0
        self.dropped = 0

    @property
    def busy(self) -> bool:
        """Whether ``limit`` jobs are in flight (no more may start)."""
        return self.in_flight >= max(1, self.limit)

    def offer(self, item: Any) -> None:
        """Make ``item`` the waiting job (replacing, and dropping, an older waiting one)."""
        if self._has_pending:
            self.dropped += 1
        self.pending = item
        self._has_pending = True
        self.offered += 1

    def take(self) -> tuple[bool, Any]:
        """``(True, item)`` when the waiting item may start now (it is then in flight)."""
        if self.busy or not self._has_pending or self.wait_s() > 0:
            return False, None
        item, self.pending, self._has_pending = self.pending, None, False
        self.in_flight += 1
        self._last_start = self.clock()
        self.started += 1
        return True, item

    def wait_s(self) -> float:
        """Seconds until the interval allows the next start (0 when it does now)."""
        return max(0.0, self._last_start + self.min_interval_s - self.clock())

    def finish(self) -> None:
        """A job in flight ended (finished, failed, cancelled or superseded)."""
        self.in_flight = max(0, self.in_flight - 1)

    def clear(self) -> None:
        """Forget the waiting item (not counted as dropped)."""
        self.pending, self._has_pending = None, False

    @property
    def has_pending(self) -> bool:
        return self._has_pending


# --------------------------------------------------------------------------------------------
# memory estimate
# --------------------------------------------------------------------------------------------


def estimate_bytes(
    shapes: dict[str, tuple[int, ...]], layers: Sequence[str], gradients: bool = True
) -> int | None:
    """Bytes a capture of ``layers`` will hold, from the output shapes of an earlier run
    (float32 outputs, and as much again for gradients); None when a layer's shape is unknown."""
    total = 0
    for name in layers:
        shape = shapes.get(name)
        if shape is None:
            return None
        total += math.prod(shape) * 4
    return total * (2 if gradients else 1)


# --------------------------------------------------------------------------------------------
# webcam
# --------------------------------------------------------------------------------------------


def webcam_status() -> tuple[bool, str]:
    """Whether a webcam source can work here, and why not.

    Returns
    -------
    tuple
        ``(True, camera description)``, or ``(False, reason)``: :data:`WEBCAM_MISSING` when
        QtMultimedia is not installed (PySide6-Essentials lacks it), or "no camera found".
    """
    try:
        spec = importlib.util.find_spec("PySide6.QtMultimedia")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return False, WEBCAM_MISSING
    try:
        from PySide6.QtMultimedia import QMediaDevices

        cameras = QMediaDevices.videoInputs()
    except Exception as exc:  # noqa: BLE001 - a broken multimedia backend is "unavailable"
        return False, _webcam_failure(exc)
    if not cameras:
        return False, "no camera found"
    return True, cameras[0].description()


def _webcam_failure(exc: BaseException) -> str:
    """Why Qt's camera support did not load, in words: a missing system library is named
    ("webcam unavailable: Qt's camera support needs libpulse.so.0, which is not installed")
    instead of the loader's "libpulse.so.0: cannot open shared object file: No such file or
    directory"."""
    text = str(exc)
    missing = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", text)
    if missing:
        return (
            f"webcam unavailable: Qt's camera support needs {missing.group(1)}, "
            "which is not installed"
        )
    return f"webcam unavailable: Qt's camera support did not load ({text})"


class WebcamSource(FrameSource):
    """Frames from the default camera through QtMultimedia (PySide6-Addons).

    The camera pushes frames on the GUI thread; the newest one is kept and :meth:`frame`
    turns it into a model input with ``open_input`` (the model's transforms apply). Create it
    only when :func:`webcam_status` says it can work.
    """

    name = "webcam"

    def __init__(self, model: torch.nn.Module | None = None, loaded_model: Any = None) -> None:
        ok, why = webcam_status()
        if not ok:
            raise RuntimeError(why)
        from PySide6.QtMultimedia import QCamera, QMediaCaptureSession, QVideoSink

        self.model = model
        self.loaded_model = loaded_model
        self._lock = threading.Lock()
        self._latest: np.ndarray | None = None
        self._count = 0
        self.camera = QCamera()
        self.capture_session = QMediaCaptureSession()
        self.sink = QVideoSink()
        self.capture_session.setCamera(self.camera)
        self.capture_session.setVideoSink(self.sink)
        self.sink.videoFrameChanged.connect(self._on_frame)
        self.listeners: list[Callable[[], None]] = []

    def start(self) -> None:
        self.camera.start()

    def stop(self) -> None:
        self.camera.stop()

    def _on_frame(self, video_frame: Any) -> None:
        from PySide6.QtGui import QImage

        image = video_frame.toImage().convertToFormat(QImage.Format.Format_RGB888)
        if image.isNull():
            return
        w, h = image.width(), image.height()
        buf = np.frombuffer(image.constBits(), np.uint8, image.bytesPerLine() * h)
        rgb = buf.reshape(h, image.bytesPerLine())[:, : w * 3].reshape(h, w, 3).copy()
        with self._lock:
            self._latest = rgb
            self._count += 1
        for listener in list(self.listeners):
            listener()

    def __len__(self) -> int:
        return 1

    def frame(self, index: int) -> LiveFrame:
        from PIL import Image

        from actviz.io.input_files import open_input

        with self._lock:
            rgb, count = self._latest, self._count
        if rgb is None:
            raise RuntimeError("the camera has not delivered a frame yet")
        loaded = open_input(Image.fromarray(rgb), model=self.model, loaded_model=self.loaded_model)
        return LiveFrame(loaded.value, loaded.image, f"camera frame {count}", 0)
