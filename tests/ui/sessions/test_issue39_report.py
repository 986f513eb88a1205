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
from PySide6.QtCore import Qt

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
    from PySide6.QtWidgets import QFileDialog

    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), ""))
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


def test_esc_stops_a_report_being_written_and_its_steps_show_an_eta(
    actviz_window, tmp_path, monkeypatch
):
    """A report walks the layers with "Report: conv1 (1/3, ETA 0:01)"; Esc stops it between
    two of them (it went on to the end, 14 s for ResNet-18's leaves), and nothing is written."""
    import time

    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog

    from actviz.io.export import report as report_module

    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS)
    window = win.window
    win.run_and_wait()
    real = report_module.write_result_report

    def slow(result, path, *, progress, **kwargs):
        def each(done, total, what):  # a page of a large model
            time.sleep(0.3)
            progress(done, total, what)

        return real(result, path, progress=each, **kwargs)

    monkeypatch.setattr(report_module, "write_result_report", slow)
    out = tmp_path / "r.html"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), ""))
    )
    win.sessions.feature.report_action.trigger()  # File > Export report...
    win.qtbot.waitUntil(lambda: "Report: conv1 (1/" in win.status_text(), timeout=30_000)
    assert re.search(r"\(1/\d, ETA 0:0\d\)", win.status_text()), win.status_text()
    win.qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert win.wait_idle(5_000)
    assert not out.exists()
    assert "The report was cancelled." in win.status_text()


def test_a_run_asked_for_while_the_report_is_written_waits_for_it(actviz_window, tmp_path):
    """A report is kept on the capture worker: Ctrl+R meanwhile neither drops it nor is lost
    (the report is written from the result shown when it was asked for, then the run shows)."""
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    win = actviz_window(TinyCNN().eval(), x, LAYERS)
    window = win.window
    first = win.run_and_wait()
    reports = win.sessions.feature
    written: list[str] = []
    reports.report_written.connect(written.append)
    out = tmp_path / "r.html"
    assert reports.export_report(out)
    with win.expect_run():
        win.qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    win.qtbot.waitUntil(lambda: written == [str(out)], timeout=60_000)
    assert window.session.result is not first and not reports.reports.is_busy()
    assert "conv2" in out.read_text() and win.wait_idle()
