"""The Live dock's perturbation pad says why it has no picture, and shows the picture again.

Real windows, real (random-init or tiny) models: the pad before any input, on the demo's
image, on a random image-shaped tensor (drawn as the frames draw it), on a feature vector (no
picture: a line of text, painted), on frames without a picture after one with a picture, and
back on the demo after the model switches.
"""

from __future__ import annotations

import numpy as np
import torch
import torchvision
from torch import nn

from actviz.display.attribution import display_image
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.dock import NO_INPUT_TEXT, NOT_AN_IMAGE_TEXT
from actviz.ui.live.frames import TensorFrames
from tests.ui.conftest import LOAD_TIMEOUT_MS


def _pad_pixels(pad) -> np.ndarray:
    """What the pad paints, (H, W, 3) uint8."""
    from PySide6.QtGui import QImage

    q = pad.grab().toImage().convertToFormat(QImage.Format.Format_RGB888)
    rows = np.frombuffer(q.constBits(), np.uint8, q.sizeInBytes()).reshape(q.height(), -1)
    return rows[:, : q.width() * 3].reshape(q.height(), q.width(), 3).copy()


def _says(pad, text: str) -> None:
    """The pad has no picture and paints ``text``: light glyph pixels on its dark box, on one
    line at the dock's width."""
    assert pad.rgb is None
    assert pad.placeholder == text
    px = _pad_pixels(pad)
    light = px.min(axis=2) > 128  # the text is light grey, the box #202124
    assert light.sum() > 50, "no text painted"
    rows = np.flatnonzero(light.any(axis=1))
    assert rows.max() - rows.min() < 1.2 * pad.fontMetrics().height()  # one line
    assert pad.fontMetrics().horizontalAdvance(text) <= pad.width() - 16


def _shows(pad, rgb: np.ndarray) -> None:
    """The pad shows ``rgb`` and no text."""
    assert pad.rgb is not None
    np.testing.assert_array_equal(pad.rgb, rgb[..., :3])
    px = _pad_pixels(pad)
    r = pad.image_rect().toAlignedRect()
    assert r.width() > 50 and r.height() > 50
    inside = px[r.top() + 2 : r.bottom() - 2, r.left() + 2 : r.right() - 2]
    assert inside.std() > 5  # a picture, not a flat box


def _open_demo(qtbot, window) -> None:
    assert window.files.load_demo()
    qtbot.waitUntil(
        lambda: (
            window.session.input is not None
            and window.session.input.image is not None
            and not window.is_busy()
        ),
        timeout=LOAD_TIMEOUT_MS,
    )


class _FlatNet(nn.Module):
    """Takes a (1, 3, 4, 4) picture or its 48 values as a (1, 48) vector."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(48, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))


def test_pad_says_why_it_has_no_picture_and_shows_it_again(qtbot, actviz_window, demo_resources):
    win = actviz_window(size=(1280, 720))
    window = win.window
    dock = win.open_dock("Live")
    pad = dock.pad
    # Before any input: why it is empty and what to do; nothing to perturb or count yet.
    _says(pad, NO_INPUT_TEXT)
    controls = dock.perturbation_controls()
    assert not any(c.isEnabled() for c in controls)
    assert {c.toolTip() for c in controls} == {NO_INPUT_TEXT}
    assert dock.frame_label.text() == "no input"

    _open_demo(qtbot, window)
    win.run_and_wait()
    _shows(pad, window.session.input.image)
    assert all(c.isEnabled() for c in controls) and NO_INPUT_TEXT not in dock.noise_slider.toolTip()
    assert dock.frame_label.text().startswith("frame 1/1")

    # A random-init ResNet on a random image-shaped tensor: drawn as its frames and the Model
    # dock's preview draw it (min-max), so the occlusion patch has something to go over.
    torch.manual_seed(0)
    win.set_model(torchvision.models.resnet18(weights=None).eval())
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    win.set_input(x)
    assert window.session.input.image is None
    _shows(pad, display_image(x, None))
    win.run_and_wait()
    np.testing.assert_array_equal(window.model_dock.input_preview.rgb, pad.rgb)

    # A feature vector has no picture: the pad says so instead of a dark box.
    torch.manual_seed(0)
    win.set_model(_FlatNet().eval())
    win.set_input(torch.randn(1, 48))
    _says(pad, NOT_AN_IMAGE_TEXT)
    # A perturbation runs live frames of it: still no picture, still the line.
    live = win.live.controller
    shown = live.frames_shown
    dock.noise_slider.setValue(30)
    qtbot.waitUntil(lambda: live.frames_shown > shown and live.idle, timeout=RUN_TIMEOUT_MS)
    _says(pad, NOT_AN_IMAGE_TEXT)
    dock.reset_perturbation()
    qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)

    # Back to the demo: its picture again.
    _open_demo(qtbot, window)
    win.run_and_wait()
    _shows(pad, window.session.input.image)


def test_frames_without_a_picture_replace_the_last_picture(qtbot, actviz_window):
    """A sequence whose frames are vectors, played after a picture was shown: the pad must not
    keep the picture of an input the model no longer gets."""
    torch.manual_seed(0)
    picture = torch.rand(1, 3, 4, 4, generator=torch.Generator().manual_seed(2))
    win = actviz_window(_FlatNet().eval(), picture, ["fc"])
    window = win.window
    dock = win.open_dock("Live")
    pad = dock.pad
    win.run_and_wait()
    np.testing.assert_array_equal(pad.rgb, display_image(picture, None))

    live = win.live.controller
    live.set_source(TensorFrames(torch.randn(3, 48), "vectors"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1 and live.idle, timeout=RUN_TIMEOUT_MS)
    _says(pad, NOT_AN_IMAGE_TEXT)
    assert tuple(window.session.result.capture.inputs.shape) == (1, 48)
