"""A camera as a live frame source (QtMultimedia, PySide6-Addons), and why it may be missing."""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from PySide6.QtGui import QImage

from actviz.ui.live.frames import FrameSource, LiveFrame

WEBCAM_MISSING = "webcam needs PySide6-Addons (QtMultimedia)"


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
        missing = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", str(exc))
        if missing:
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
