"""The HTML report in a real browser engine (Qt WebEngine, offscreen): its first panel's pixels
appear on the rendered page, exactly.

Qt WebEngine comes with PySide6-Addons (``pip install actviz[report]``, at the installed
PySide6-Essentials version); without it the test is skipped. The page is rendered in a child
process: WebEngine must be set up before a QApplication exists, and the suite's own Qt tests
make one first.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import actviz
from actviz.io.export.report import write_report

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("PySide6.QtWebEngineWidgets") is None,
    reason="Qt WebEngine not installed (pip install 'actviz[report]')",
)

# Loads the page, waits for it to paint, saves a grab of the view (argv: html, png, w, h).
_RENDER = r"""
import sys
from PySide6.QtWebEngineWidgets import QWebEngineView  # before the QApplication
from PySide6.QtCore import QEventLoop, QTimer, QUrl
from PySide6.QtWidgets import QApplication

html, png, w, h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
app = QApplication([])
view = QWebEngineView()
view.resize(w, h)
loop = QEventLoop()
done = []
view.loadFinished.connect(lambda ok: (done.append(ok), loop.quit()))
view.load(QUrl.fromLocalFile(html))
view.show()
QTimer.singleShot(30000, loop.quit)
loop.exec()
if done != [True]:
    sys.exit(f"page did not load: {done}")
QTimer.singleShot(1200, loop.quit)  # painting follows loadFinished
loop.exec()
view.grab().toImage().save(png)
view.close()
"""


def render(html_path, png_path, size=(1200, 1000), timeout=120):
    env = dict(os.environ)
    env["QT_QPA_PLATFORM"] = "offscreen"
    env["QTWEBENGINE_CHROMIUM_FLAGS"] = "--no-sandbox --disable-gpu"
    subprocess.run(
        [sys.executable, "-c", _RENDER, str(html_path), str(png_path), *map(str, size)],
        check=True,
        env=env,
        timeout=timeout,
        capture_output=True,
    )
    return np.asarray(Image.open(png_path).convert("RGB"))


def find(shot: np.ndarray, panel: np.ndarray) -> tuple[int, int] | None:
    """Top-left of an exact copy of ``panel`` in ``shot``, or None."""
    h, w = panel.shape[:2]
    region = shot[: shot.shape[0] - h + 1, : shot.shape[1] - w + 1]
    for y, x in np.argwhere(np.all(region == panel[0, 0], axis=-1)):
        if np.array_equal(shot[y : y + h, x : x + w], panel):
            return int(y), int(x)
    return None


def test_first_panel_appears_in_the_rendered_page(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 3),
    )
    x = torch.rand(1, 3, 40, 40)
    cap = actviz.capture(model, x, ["0", "1", "4"])
    image = (x[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
    info = write_report(cap, tmp_path / "report.html", image=image, model=model, model_name="tiny")
    print(f"report: {info.nbytes / 1024:.0f} KiB, {len(info.panels)} pictures")
    assert info.panels[0][0] == "input"
    shot = render(info.path, tmp_path / "shot.png")
    where = find(shot, image)
    assert where is not None, "the input panel's pixels are not on the rendered page"
    # below the header and the model summary, inside the main column (not the contents list)
    assert where[0] > 100 and where[1] > 200
    # the page is painted, not blank: the header's dark band and white section boxes
    assert shot[10, 600].tolist() == [0x20, 0x30, 0x3C]
    assert (shot == 255).all(axis=-1).mean() > 0.2
