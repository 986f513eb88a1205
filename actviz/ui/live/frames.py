"""Live inputs without widgets: frame sources (a camera's needs QtMultimedia), :class:`Player`,
:class:`Coalescer`, :class:`RateMeter`. ``FrameSource.frame`` runs on the worker thread."""

from __future__ import annotations

import collections
import functools
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
from PySide6.QtGui import QImage

from actviz.data.sources import IMAGE_SUFFIXES, folder_images
from actviz.display.attribution import display_image

log = logging.getLogger(__name__)

WEBCAM_MISSING = "webcam needs PySide6-Addons (QtMultimedia)"


@dataclass
class LiveFrame:
    """One frame ready for the model."""

    value: Any  # the model input (usually ``(1, C, H, W)``; tuples and dicts pass through)
    image: np.ndarray | None  # (H, W, 3) uint8 picture for overlays (None: from the tensor)
    label: str  # short text for the controls, e.g. the file name
    index: int  # position in the source
    path: str = ""  # the file it was read from ("" for a camera, an in-memory tensor)
    caption: str = ""  # the preview's line when it is not the label (the opened input's)


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


class StillFrame(FrameSource):
    """The current input as a one-frame source (perturbations without a sequence)."""

    def __init__(
        self,
        value: Any,
        image: np.ndarray | None = None,
        label: str = "input",
        path: str = "",
        caption: str = "",
    ) -> None:
        self.value, self.image = value, image
        self.name, self.path, self.caption = label, path, caption

    @classmethod
    def of_input(cls, inp: Any) -> StillFrame | None:
        """The session's opened input (a ``LoadedInput``) as a source; None without one."""
        if inp is None:
            return None
        name = Path(inp.source).name if inp.source else "input"
        path = inp.source if inp.source and Path(inp.source).is_file() else ""
        return cls(inp.value, inp.image, name, path, inp.caption)

    def __len__(self) -> int:
        return 1

    def frame(self, index: int) -> LiveFrame:
        return LiveFrame(self.value, self.image, self.name, 0, self.path, self.caption)


class TensorFrames(FrameSource):
    """The frames ``frames[i:i+1]`` of a ``(T, ...)`` tensor, on the model's device and dtype."""

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
        self.frames, self.name = frames, name
        self.path = ""  #: The file the frames were read from ("" for an in-memory tensor).
        self._images: dict[int, np.ndarray | None] = {}

    @classmethod
    def from_file(cls, path: str | Path, model: torch.nn.Module | None = None) -> TensorFrames:
        """Read a ``(T, C, H, W)`` tensor file (ValueError if not such, ``InputError`` if unread)."""
        from actviz.io.input_files import open_input

        value = open_input(str(path)).value  # no model: (T, ...) is not checked as (N, ...)
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
            self._images[index] = display_image(value, None) if value.dim() == 4 else None
        return LiveFrame(value, self._images[index], f"{self.name}[{index}]", index, self.path)


class ImageFolder(FrameSource):
    """A folder's images (subfolders too) in name order, opened for ``model``; ``cache`` kept."""

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
        # As a scan reads it (an ImageFolder layout plays in order).
        self.files = [Path(p) for p in folder_images(folder.resolve())[0]]
        if not self.files:
            raise ValueError(
                f"{folder}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in this folder "
                "or its subfolders"
            )
        self.folder, self.name = folder, folder.name or str(folder)
        files = self.files

        @functools.lru_cache(maxsize=max(1, cache))  # a closure: no cycle through ``self``
        def read(index: int) -> LiveFrame:
            from actviz.io.input_files import open_input

            path = files[index]
            loaded = open_input(str(path), model=model, loaded_model=loaded_model)
            return LiveFrame(loaded.value, loaded.image, path.name, index, str(path))

        self._read = read

    def __len__(self) -> int:
        return len(self.files)

    def frame(self, index: int) -> LiveFrame:
        return self._read(int(index) % len(self))


def webcam_status() -> tuple[bool, str]:
    """``(True, camera description)`` where a webcam can work, else ``(False, why)``."""
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
        # A missing system library is named.
        if missing := re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", str(exc)):
            why = f"Qt's camera support needs {missing.group(1)}, which is not installed"
            return False, f"webcam unavailable: {why}"
        return False, f"webcam unavailable: Qt's camera support did not load ({exc})"
    return (False, "no camera found") if not cameras else (True, cameras[0].description())


class WebcamSource(FrameSource):
    """Frames from the default camera: the newest pushed (GUI thread) is kept, and :meth:`frame`
    opens it as a model input. Create it only when :func:`webcam_status` says it can work."""

    name = "webcam"

    def __init__(self, model: torch.nn.Module | None = None, loaded_model: Any = None) -> None:
        ok, why = webcam_status()
        if not ok:
            raise RuntimeError(why)
        from PySide6.QtMultimedia import QCamera, QMediaCaptureSession, QVideoSink

        self.model, self.loaded_model = model, loaded_model
        self._lock = threading.Lock()
        self._latest: np.ndarray | None = None
        self._count = 0
        self.camera, self.sink = QCamera(), QVideoSink()
        self.capture_session = QMediaCaptureSession()
        self.capture_session.setCamera(self.camera)
        self.capture_session.setVideoSink(self.sink)
        self.sink.videoFrameChanged.connect(self._on_frame)
        self.listeners: list[Callable[[], None]] = []

    def start(self) -> None:
        self.camera.start()

    def stop(self) -> None:
        self.camera.stop()

    def _on_frame(self, video_frame: Any) -> None:
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


class Player:
    """The position of play/pause/step/seek over ``length`` frames at ``fps`` (no timer)."""

    MIN_FPS = 0.25
    MAX_FPS = 60.0

    def __init__(self, length: int = 1, fps: float = 10.0, loop: bool = True) -> None:
        self.length, self.index, self.playing = max(1, int(length)), 0, False
        self.loop, self.fps = loop, fps
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

    def seek(self, index: int) -> int:
        self.index = int(min(max(index, 0), self.length - 1))
        return self.index

    def step(self, delta: int = 1) -> int:
        """Move ``delta`` frames (wrapping when looping, clamped otherwise)."""
        if self.loop:
            self.index = (self.index + delta) % self.length
            return self.index
        return self.seek(self.index + delta)

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
        self.window_s, self.clock = window_s, clock
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
    """At most ``limit`` jobs in flight and the latest one waiting (``offer`` drops the last);
    ``take`` hands it out when there is room and ``min_interval_s`` passed."""

    def __init__(
        self,
        min_interval_s: float = 1 / 60,
        clock: Callable[[], float] = time.perf_counter,
        limit: int = 1,
    ):
        self.min_interval_s, self.clock, self.limit = min_interval_s, clock, limit
        self.in_flight = 0
        #: The waiting item, and whether there is one (None may be an item).
        self.pending: Any = None
        self.has_pending = False
        self._last_start = -math.inf
        self.offered = self.started = self.dropped = 0

    @property
    def busy(self) -> bool:
        """Whether ``limit`` jobs are in flight (no more may start)."""
        return self.in_flight >= max(1, self.limit)

    def offer(self, item: Any) -> None:
        """Make ``item`` the waiting job (replacing, and dropping, an older waiting one)."""
        if self.has_pending:
            self.dropped += 1
        self.pending, self.has_pending = item, True
        self.offered += 1

    def take(self) -> tuple[bool, Any]:
        """``(True, item)`` when the waiting item may start now (it is then in flight)."""
        if self.busy or not self.has_pending or self.wait_s() > 0:
            return False, None
        item, self.pending, self.has_pending = self.pending, None, False
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
        self.pending, self.has_pending = None, False


def estimate_bytes(
    shapes: dict[str, tuple[int, ...]], layers: Sequence[str], gradients: bool = True
) -> int | None:
    """Bytes a capture of ``layers`` will hold (outputs and gradients, float32; None: unknown)."""
    total = 0
    for name in layers:
        if (shape := shapes.get(name)) is None:
            return None
        total += math.prod(shape) * 4
    return total * (2 if gradients else 1)
