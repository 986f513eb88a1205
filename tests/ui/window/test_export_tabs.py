"""Export everything writes the same files whatever tab is shown."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN


def test_export_from_the_layers_tab_writes_the_saliency_too(actviz_window, tmp_path):
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "conv2", "fc"])
    w = win.window
    w.host.show_tab(None)  # the Layers tab: runs skip the input gradient
    result = win.run_and_wait()
    assert result.capture.input_grads is None
    assert w.exports.export_all(tmp_path / "layers", wait=True)
    from_layers = sorted(p.name for p in (tmp_path / "layers").rglob("*") if p.is_file())
    assert "saliency.png" in from_layers and "saliency.npy" in from_layers
    w.host.show_tab(w.centre.overview_tab)
    win.run_and_wait()
    assert w.session.result.capture.input_grads is not None
    assert w.exports.export_all(tmp_path / "overview", wait=True)
    from_overview = sorted(p.name for p in (tmp_path / "overview").rglob("*") if p.is_file())
    assert from_layers == from_overview
