"""File > Export report while the window's model is busy: the report's own pass over the model
(a vision transformer's attention maps) never runs beside a run's capture on the same model.

Hooks are per-module state: two captures on one model at once would put one's records in the
other's and may leave hooks behind. A counting module inside the model sees every forward
pass through it and remembers how many were inside at once. The report queued behind a run
is made stale by the next run; it is still written (after the run) and said to be written,
where before the worker skipped it without a word.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch import nn

from actviz.testing import assert_no_hooks

timm = pytest.importorskip("timm")


class _Overlap(nn.Module):
    """Identity that counts the forward passes inside it at once (and lingers a little, so
    an overlap has time to show)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self._lock:
            self.inside += 1
            self.calls += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.02)
            return x
        finally:
            with self._lock:
                self.inside -= 1


def _vit() -> tuple[nn.Module, _Overlap]:
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        img_size=32,
        depth=2,
        num_classes=5,
    ).eval()
    probe = _Overlap()
    model.norm_pre = probe  # every forward pass goes through it
    return model, probe


def test_a_report_started_during_a_run_never_captures_beside_it(actviz_window, tmp_path):
    model, probe = _vit()
    win = actviz_window()
    win.set_model(model, layers=["blocks.0", "blocks.1"])
    win.set_input(torch.randn(1, 3, 32, 32))
    win.run_and_wait()
    sessions = win.sessions.feature
    out = tmp_path / "report.html"
    probe.most = probe.calls = 0
    # A run in flight, the report asked meanwhile, then another run: all on one model.
    with win.qtbot.waitSignal(sessions.report_written, timeout=120_000):
        assert win.window.runs.run() is not None
        assert sessions.export_report(out)
        assert win.window.runs.run() is not None
    win.wait_idle()
    assert probe.calls >= 2  # the runs and the report's attention pass went through the model
    assert probe.most == 1, f"{probe.most} forward passes on the model at once"
    assert_no_hooks(model)
    text = out.read_text()
    assert "blocks.0" in text and "data:image/png;base64," in text
    assert 'id="sequence"' in text  # the report recorded the attention maps on the model


def test_a_report_started_during_live_playback_never_captures_beside_a_frame(
    actviz_window, tmp_path
):
    from actviz.testing import RUN_TIMEOUT_MS
    from actviz.ui.live.frames import TensorFrames

    model, probe = _vit()
    win = actviz_window()
    win.set_model(model, layers=["blocks.0", "blocks.1"])
    win.set_input(torch.randn(1, 3, 32, 32))
    win.run_and_wait()
    live = win.live.controller
    live.set_source(TensorFrames(torch.randn(8, 3, 32, 32), "clip"))
    live.set_speed(60)
    win.qtbot.waitUntil(lambda: live.frames_shown >= 1, timeout=RUN_TIMEOUT_MS)
    probe.most = probe.calls = 0
    live.play()
    win.qtbot.waitUntil(lambda: live.frames_shown >= 2, timeout=RUN_TIMEOUT_MS)
    sessions = win.sessions.feature
    out = tmp_path / "live.html"
    with win.qtbot.waitSignal(sessions.report_written, timeout=120_000):
        assert sessions.export_report(out)
    win.qtbot.waitUntil(lambda: live.frames_shown >= 4, timeout=RUN_TIMEOUT_MS)
    live.pause()
    win.qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    win.wait_idle()
    assert probe.calls >= 3
    assert probe.most == 1, f"{probe.most} forward passes on the model at once"
    assert_no_hooks(model)
    assert 'id="sequence"' in out.read_text()
