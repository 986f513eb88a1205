"""A scan the Atlas tab maps: two classes of tiny PNGs and the bundled demo, for the atlas tests
and the layout tests that show the tab."""

from __future__ import annotations

import numpy as np
from PIL import Image

from actviz.io.models.demo_model import DEMO_CLASSES
from actviz.ui.dataset.dialog import ScanSpec

TIMEOUT_MS = 30_000
LAYER = "features.block2"


def write_classes(folder, per_class: int = 5) -> list[str]:
    """Two class folders of 24x24 PNGs: bright reddish ones and dark bluish ones."""
    rng = np.random.default_rng(0)
    names = list(DEMO_CLASSES[:2])
    for c, (name, base) in enumerate(zip(names, ((230, 40, 40), (20, 30, 120)), strict=True)):
        (folder / name).mkdir(parents=True)
        for i in range(per_class):
            noise = rng.integers(-20, 20, (24, 24, 3))
            pixels = np.clip(np.array(base) + noise + 4 * i * (1 - 2 * c), 0, 255)
            Image.fromarray(pixels.astype(np.uint8)).save(folder / name / f"{name}{i}.png")
    return names


def scan_into_atlas(win, folder):
    """Scan ``folder`` at LAYER and fc (in process) and wait until the atlas maps it; returns
    the atlas feature."""
    win.dataset.in_process()  # no loader processes for ten tiny images
    return win.atlas.scan_and_map(ScanSpec(str(folder), (LAYER, "fc"), 3, batch_size=4), TIMEOUT_MS)


def scanned_demo(actviz_window, tmp_path):
    """A window on the demo with the ten class images of :func:`write_classes` scanned and
    mapped; returns the driver and the atlas feature."""
    win = actviz_window()
    assert win.window.files.open_model_source("demo", wait=True)
    folder = tmp_path / "images"
    write_classes(folder)
    return win, scan_into_atlas(win, folder)
