"""One gate for every input: live frames refuse what the window's runs refuse (a float tensor
for a text model, pictures from a folder for a text model), the Live dock's perturbations are
off with the reason, and no frame job reaches the model to fail there."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tests.io.hf_tiny import save_tiny_gpt2  # noqa: E402

LOAD_MS = 60_000


def _text_window(actviz_window, tmp_path):
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    win = actviz_window(size=(1280, 720))
    assert win.window.files.open_model_source(str(folder))
    win.wait_idle(LOAD_MS)
    return win


def test_a_float_tensor_on_a_text_model_is_refused_by_live_frames_too(actviz_window, tmp_path):
    win = _text_window(actviz_window, tmp_path)
    w = win.window
    live = win.live.feature
    win.open_dock("Live")
    errors, messages = [], []
    w.worker.job_submitted.connect(lambda job: job.failed.connect(errors.append))
    live.controller.message.connect(messages.append)
    w.script.set_input(torch.randn(1, 3, 16, 16))
    assert w.runs.run() is None  # the window refuses it
    refusal = win.banner_messages()[-1]  # the window's own words
    assert refusal.startswith("The input does not fit") and "reads text" in refusal
    controls = live.dock.perturbation_controls()
    assert all(not c.isEnabled() for c in controls)
    assert controls[0].toolTip() == refusal
    live.controller.update_perturbation(noise=0.3)  # a script or a stale slider moves it
    live.controller.request(0)
    win.wait_idle()
    assert messages[-1] == refusal
    assert errors == []  # no frame ran the embedding on floats


def test_pictures_from_a_folder_are_refused_for_a_text_model(actviz_window, tmp_path):
    folder = tmp_path / "frames"
    (folder / "cats").mkdir(parents=True)
    for i in range(3):
        pixels = np.random.default_rng(i).integers(0, 255, (16, 16, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"f{i}.png")
    win = _text_window(actviz_window, tmp_path)
    w = win.window
    live = win.live.feature
    errors, messages = [], []
    w.worker.job_submitted.connect(lambda job: job.failed.connect(errors.append))
    live.controller.message.connect(messages.append)
    assert live.controller.open_folder(folder)
    live.controller.step(1)
    win.wait_idle()
    assert messages[-1] == f"The frames are pictures; {w.session.model_name} reads text."
    assert errors == []
