"""Live frames with a panel showing concepts (issue 41, ``concepts_live_ratio``): the frame
builds no channel mosaic for that panel (the previous frame's stands in, and the GUI thread
does not make one either), the panel shows this frame's concept tiles, and showing channels
again shows this frame's channel mosaic, not the kept one."""

from __future__ import annotations

import numpy as np
import torch

import actviz.ui.live.frame_runner as frame_runner
from actviz.analysis.concepts.tiles import concept_tiles
from actviz.core.capture import capture
from actviz.display import repage
from actviz.display.mosaic import mosaic
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.frames import TensorFrames
from tests.ui.concepts.concepts_windows import LAYER, concepts_opened


def test_live_frames_make_no_channel_mosaics_under_concept_tiles(
    actviz_window, tmp_path, monkeypatch
):
    win, model, feature, _c, _folder = concepts_opened(actviz_window, tmp_path)
    window = win.window
    att = win.session.concepts[LAYER]
    asked: list[object] = []
    real_prepare = frame_runner.prepare

    def spy(*args, **kwargs):
        asked.append(kwargs.get("mosaic_layers"))
        return real_prepare(*args, **kwargs)

    monkeypatch.setattr(frame_runner, "prepare", spy)
    remade: list[str] = []
    real_current = repage.current_mosaics

    def current(layer):
        if layer.stale_mosaics:
            remade.append(layer.name)
        return real_current(layer)

    monkeypatch.setattr("actviz.ui.window.panel_grid.current_mosaics", current)
    win.reveal(LAYER)
    live = win.live.configure(max_fps=1000)
    # No settling full frame (it builds every mosaic): the frames alone.
    offer = live.coalescer.offer
    monkeypatch.setattr(live.coalescer, "offer", lambda spec: None if spec.full else offer(spec))
    frames = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    live.set_source(TensorFrames(frames, "clip"))
    win.qtbot.waitUntil(lambda: live.frames_shown >= 1, timeout=RUN_TIMEOUT_MS)
    win.qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    shown = live.frames_shown
    live.seek(2)
    win.qtbot.waitUntil(lambda: live.frames_shown > shown, timeout=RUN_TIMEOUT_MS)
    win.qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    window.display.flush_panel_updates()

    # The frames' preparations were told the concept panel needs no channel mosaic.
    partial = [m for m in asked if m is not None]
    assert partial and all(LAYER not in m for m in partial), asked
    result = window.session.result
    torch.testing.assert_close(result.capture.inputs, frames[2:3], rtol=0, atol=0)
    assert result.layers[LAYER].stale_mosaics  # the channel mosaic is an earlier frame's
    assert LAYER not in remade  # and the GUI thread did not make it again
    # The panel shows this frame's concept tiles.
    panel = win.panel(LAYER)
    assert panel.tile_unit() == "concept"
    want = concept_tiles(
        att.concepts, result.capture, LAYER, page=window.host.page_channels(LAYER),
        normalize=win.session.normalize,
    )  # fmt: skip
    got = panel.activation_slot.mosaic
    assert got.tile_channels == want.mosaic.tile_channels
    np.testing.assert_array_equal(got.indices, want.mosaic.indices)

    # Channels again: this frame's channel mosaic, made now.
    feature.set_shown(LAYER, False)
    window.display.flush_panel_updates()
    assert panel.tile_unit() == ""
    assert LAYER in remade
    ref = capture(model, frames[2:3], [LAYER])[LAYER].tensor[0]
    m = panel.activation_slot.mosaic
    assert np.array_equal(m.indices, mosaic(ref, symmetric=m.symmetric).indices)


def test_a_panel_without_concepts_is_left_alone_by_each_new_result(
    actviz_window, tmp_path, monkeypatch
):
    """Every live frame fills the panels: one without concepts shown, and none to take off,
    costs the concepts feature nothing (#39); the one with concepts still shows them."""
    from actviz.ui.panels.feature_map import LayerPanel

    win, _model, _feature, _c, _folder = concepts_opened(actviz_window, tmp_path)
    touched: list[str] = []
    real = LayerPanel.set_tile_unit

    def spy(self, unit=""):
        touched.append(self.name)
        return real(self, unit)

    monkeypatch.setattr(LayerPanel, "set_tile_unit", spy)
    win.run_and_wait()
    assert "conv1" not in touched
    assert win.panel("conv1").tile_unit() == "" and win.panel(LAYER).tile_unit() == "concept"
    assert LAYER in touched  # its tiles follow the new result
