"""Issue 39, defect 5: the report paints as the window does now: with the colour map chosen
after the run (not the run's), and |gradient| scaled per channel as the panels scale it. One
rule (:func:`actviz.display.colormaps.painting`) for the window, Export everything and the
report: the report's pictures are the export's, and the export's are the panels' pixels."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import torch
from PIL import Image

from actviz.display.mosaic import mosaic
from tests.helpers import tile_pixels
from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "conv2"]


def _report_pictures(path) -> dict[str, np.ndarray]:
    text = path.read_text()
    found = re.findall(
        r'<img[^>]*data-panel="([^"]+)"[^>]*src="data:image/png;base64,([^"]+)"', text
    )
    if not found:  # attributes in the other order
        found = [
            (p, s)
            for s, p in re.findall(
                r'<img[^>]*src="data:image/png;base64,([^"]+)"[^>]*data-panel="([^"]+)"', text
            )
        ]
    return {
        panel: np.asarray(Image.open(io.BytesIO(base64.b64decode(src))).convert("RGB"))
        for panel, src in found
    }


def test_the_report_paints_with_the_colour_map_chosen_after_the_run(
    actviz_window, tmp_path, monkeypatch
):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    win = actviz_window(TinyCNN().eval(), x, LAYERS)
    window = win.window
    win.run_and_wait()
    # The colour map changes after the run (no new run: it is a view setting).
    combo = window.commands.colormap_combo
    combo.setCurrentIndex(combo.findText("turbo"))
    win.settle()
    assert window.session.colormap == "turbo" and window.session.result.spec.colormap != "turbo"
    # File > Export report..., the file picked in the dialog.
    out = tmp_path / "r.html"
    from actviz.ui.sessions import feature as sessions

    monkeypatch.setattr(
        sessions.QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), ""))
    )
    reports = win.sessions.feature
    with win.qtbot.waitSignal(reports.report_written, timeout=60_000):
        reports.report_action.trigger()
    assert window.exports.export_all(tmp_path / "e", wait=True)
    shown = _report_pictures(out)
    for name in LAYERS:
        for kind in ("features", "grad"):
            exported = np.asarray(Image.open(tmp_path / "e" / f"{name}_{kind}.png").convert("RGB"))
            np.testing.assert_array_equal(shown[f"{kind}:{name}"], exported, err_msg=kind + name)
        # The export's pixels are the panel's: turbo, and |gradient| per channel.
        panel = window.host.layer_panels[name]
        for gradient, kind in ((False, "features"), (True, "grad")):
            slot = panel.gradient_slot if gradient else panel.activation_slot
            assert slot.image_canvas.colormap_name() == "turbo"
            m = slot.mosaic
            assert m.normalize == "channel"
            painted = win.shown_pixels(name, gradient=gradient)
            exported = np.asarray(
                Image.open(tmp_path / "e" / f"{name}_{kind}_1x.png").convert("RGB")
            )
            view = window.session.result.layers[name].grad_view if gradient else None
            view = view or window.session.result.layers[name].view
            whole = mosaic(view.data, normalize="channel", symmetric=m.symmetric)
            for c in range(m.first_channel, m.last_channel + 1):
                np.testing.assert_array_equal(
                    tile_pixels(exported, whole, c),
                    tile_pixels(painted, m, c)[..., :3],
                    err_msg=kind,
                )
