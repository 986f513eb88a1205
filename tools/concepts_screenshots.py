"""The concepts guide's window screenshots (docs/concepts.md), on the bundled demo model.

Generates 80 shape pictures, trains concepts on ``features.block3`` through Data > Train
concepts… (the dialog grabbed when it is done), shows the layer's panel as concepts, opens the
most active concept in the Concept dock (top images, effect), then removes it (the edit runs
again, the prediction's before/after shows). Run with ``QT_QPA_PLATFORM=offscreen``; caches
and settings go to a temporary folder.

Usage: ``python tools/concepts_screenshots.py [OUT_DIR] [--size 1280x720]``
(default ``docs/images``): ``concepts-window-panel.png``, ``concepts-window-removed.png``,
``concepts-window-train.png``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QDockWidget
from screenshots import wait_settled

LAYER = "features.block3"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/images")
    parser.add_argument("--size", default="1280x720")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")

    from actviz.io.models.demo_model import DEMO_CLASSES, generate_image
    from actviz.ui.explore import ensure_app
    from actviz.ui.window.main_window import MainWindow

    shapes = tmp / "shapes"
    shapes.mkdir()
    rng = np.random.default_rng(0)
    for i in range(80):
        name = DEMO_CLASSES[i % len(DEMO_CLASSES)]
        generate_image(name, rng).save(shapes / f"{name}-{i:02d}.png")

    app = ensure_app()
    settings = QSettings(str(tmp / "actviz.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings, auto_run=True)
    width, height = (int(v) for v in args.size.split("x"))
    window.resize(width, height)
    window.show()
    window.load_demo()
    wait_settled(app, lambda: window.result is not None, strict=True)
    window.session.replace_ticked(["features.block2", LAYER])
    finished: list[int] = []
    window.run_finished.connect(lambda: finished.append(1))
    window.run()
    wait_settled(app, lambda: bool(finished), strict=True)
    window.select_layer(LAYER)

    feature = window.features["concepts"]
    dialog = feature.open_train_dialog()
    dialog.layer_combo.setCurrentText(LAYER)
    dialog.n_spin.setValue(128)
    dialog.k_spin.setValue(8)
    dialog.data_edit.setText(str(shapes))
    dialog.out_edit.setText(str(tmp / "shapes-concepts"))
    dialog.train_button.click()
    wait_settled(app, lambda: not feature.training(), timeout_ms=600_000, strict=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dialog.grab().save(str(out / "concepts-window-train.png"))
    print(dialog.message.text())
    dialog.close()

    wait_settled(app, lambda: LAYER in feature.tiles, strict=True)
    window.flush_panel_updates()
    window.reveal_panel(LAYER)
    first = feature.tiles[LAYER].order[0]
    feature.name_concept(LAYER, first, "shape edge")
    feature.open_concept(LAYER, first)
    view = feature.view
    wait_settled(
        app,
        lambda: (
            view.top_label.text().startswith("Its top")
            and view.effect_label.text().startswith("Removing")
        ),
        strict=True,
    )
    window.flush_panel_updates()
    window.grab().save(str(out / "concepts-window-panel.png"))
    print(view.effect_label.text())

    finished.clear()
    view.remove_button.click()
    wait_settled(app, lambda: bool(finished), strict=True)
    window.flush_panel_updates()
    # The Edits dock (View menu) lists the removal, as for any edit.
    for dock in window.findChildren(QDockWidget):
        if dock.windowTitle() == "Edits":
            window.tabifyDockWidget(feature.dock, dock)  # in the Concept dock's place
            dock.show()
            dock.raise_()
    window.reveal_panel(LAYER)
    wait_settled(app, lambda: view.effect_label.text().startswith("Removing"))
    window.grab().save(str(out / "concepts-window-removed.png"))
    print(out)
    window.close()


if __name__ == "__main__":
    main()
