"""The Atlas tab beyond the map: a lasso drawn with the mouse selects the dots inside its
shape, a saved session brings the map back (layer, method, colouring, selection) in a fresh
window, File > Export report holds the map, and the map's image moves on a pan (splatted again
only for a new zoom) with the same pixels a fresh splat gives.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, QSettings, Qt
from PySide6.QtGui import QImage

import actviz
from actviz.data.atlas_image import class_colours
from actviz.data.atlas_map import points_in_polygon
from actviz.ui.atlas.view import RasterDots
from tests.ui.atlas.atlas_windows import LAYER, scanned_demo

LEFT = Qt.MouseButton.LeftButton


def lasso(qtbot, view, shape: np.ndarray) -> None:
    """A left-button drag along ``shape`` (view coordinates), back to its start."""
    port = view.plot.viewport()

    def at(p):
        q = view.plot.mapFromScene(view.box.mapViewToScene(QPointF(*p)))
        return QPoint(round(q.x()), round(q.y()))

    points = [at(p) for p in shape]
    qtbot.mousePress(port, LEFT, pos=points[0])
    for p in [*points[1:], points[0]]:
        # pyqtgraph's scene drops moves closer than 10 ms apart (its mouse rate limit).
        qtbot.wait(15)
        qtbot.mouseMove(port, p)
    qtbot.mouseRelease(port, LEFT, pos=points[0])


def test_lasso_session_and_report(qtbot, actviz_window, tmp_path):
    win, feature = scanned_demo(actviz_window, tmp_path)
    window = win.window
    atlas, view = feature.atlas, feature.view
    window.host.show_tab(view)
    win.settle()

    # A lasso around one class's dots: a diamond a little larger than the cluster.
    view.lasso_button.setChecked(True)
    assert view.box.mode == "lasso"
    view.select_button.setChecked(True)  # one tool at a time
    assert view.box.mode == "rect" and not view.lasso_button.isChecked()
    view.lasso_button.setChecked(True)
    assert view.box.mode == "lasso" and not view.select_button.isChecked()
    cluster = np.flatnonzero(np.asarray(atlas.labels) == 1)
    xy = atlas.coords[cluster]
    centre = (xy.min(axis=0) + xy.max(axis=0)) / 2
    px, py = view.box.viewPixelSize()
    half = (xy.max(axis=0) - xy.min(axis=0)) / 2 + np.array([6 * px, 6 * py])
    # A diamond holds a box of half-size r when its radius is 2r; eight vertices.
    angles = np.linspace(0, 2 * np.pi, 8, endpoint=False)
    shape = centre + 2 * half * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    with qtbot.waitSignal(view.lasso_selected, timeout=30_000) as drawn:
        lasso(qtbot, view, shape)
    got = drawn.args[0]
    assert got.shape[1] == 2 and len(got) >= 8
    inside = np.flatnonzero(points_in_polygon(atlas.coords, got))
    assert set(cluster) <= set(inside)
    assert list(feature.selection) == list(inside)
    assert view.selection_strip.count() == len(inside)
    names = atlas.embeddings.class_names
    per_class = np.bincount(np.asarray(atlas.labels)[inside], minlength=2)
    counted = ", ".join(
        f"{names[c]} {per_class[c]}" for c in np.argsort(-per_class, kind="stable") if per_class[c]
    )
    assert view.selection_title.text() == f"Selection: {len(inside)} of 10 images · {counted}"
    assert len(inside) < 10 and feature.separating == atlas.separating(inside, 10)
    # The selection's rims: one orange square under each selected dot.
    assert view.selected_dots.count() == len(inside)
    np.testing.assert_array_equal(view.selected_dots.xy, atlas.coords[inside])

    # Coloured by prediction; the session keeps the map as shown.
    view.colour_combo.setCurrentText("Prediction")
    part = feature.session_part()["atlas"]
    assert part["layer"] == LAYER and part["method"] == "pca" and part["colour"] == "Prediction"
    assert part["selection"] == [int(i) for i in atlas.embeddings.indices[inside]]
    with qtbot.waitSignal(win.window.input_loaded, timeout=30_000):
        window.files.open_input_source(feature.source(int(cluster[0])), remember=False)
    win.run_and_wait()
    win.wait_idle()

    # The report holds the map with its caption.
    sessions = win.sessions.feature
    report = tmp_path / "atlas.html"
    assert sessions.export_report(report, wait=True)
    text = report.read_text()
    assert f"Atlas of {LAYER}: 10 images (PCA), coloured by prediction" in text
    assert f"{len(inside)} selected" in text

    path = tmp_path / "atlas.actviz"
    assert sessions.save_session(path, wait=True)
    assert actviz.session.load(path).settings["atlas"]["selection"] == part["selection"]

    # A fresh window: the scan comes back from its saved arrays, then the map as it was.
    other = actviz_window(settings=QSettings(str(tmp_path / "b.ini"), QSettings.Format.IniFormat))
    again = other.atlas.feature
    again.view.colour_combo.setCurrentText("Channel")  # to be put back
    assert other.sessions.feature.open_session(path)
    qtbot.waitUntil(lambda: again.atlas is not None and len(again.selection) > 0, timeout=60_000)
    other.wait_idle()
    assert again.atlas.layer == LAYER and again.view.layer_combo.currentText() == LAYER
    assert again.view.method_combo.currentText() == "PCA"
    assert again.view.colour_combo.currentText() == "Prediction"
    assert list(again.selection) == list(inside)
    assert again.view.selection_strip.count() == len(inside)
    np.testing.assert_allclose(again.atlas.coords, atlas.coords, atol=1e-12)
    assert again._restoring is None  # used once


def test_a_restore_waits_for_its_scan_and_another_scan_drops_it(qtbot, actviz_window, tmp_path):
    win, feature = scanned_demo(actviz_window, tmp_path)
    window = win.window
    scan = window.session.scan
    saved = {
        "layer": "fc",
        "method": "pca",
        "colour": "Correct",
        "channel": 1,
        "selection": [int(i) for i in scan.embeddings("fc").indices[:3]],
        "scan_key": str(scan.cache_path),
        "images": 10,
    }
    # The scan shown is the saved one: the map is rebuilt as saved at once.
    with qtbot.waitSignal(feature.fitted, timeout=30_000):
        feature.restore_session_part({"atlas": saved})
    assert feature.atlas.layer == "fc" and list(feature.selection) == [0, 1, 2]
    assert feature.view.colour_combo.currentText() == "Correct"
    assert feature.view.channel_spin.value() == 1
    # Another scan's map is not touched by a saved map of a different scan.
    feature.restore_session_part({"atlas": {**saved, "images": 99, "layer": LAYER}})
    assert feature._restoring is not None
    window.session.set_scan(None)
    assert feature._restoring is not None  # no scan: still waiting
    window.session.set_scan(scan)  # not the saved one (99 images): dropped
    assert feature._restoring is None
    # Nothing saved, or something else: nothing to restore.
    feature.restore_session_part({})
    feature.restore_session_part({"atlas": {"layer": 3}})
    assert feature._restoring is None


def test_a_pan_moves_the_maps_image_with_the_pixels_of_a_fresh_splat(qtbot):
    rng = np.random.default_rng(0)
    labels = np.arange(3000) % 10
    xy = rng.normal(0, 5, (10, 2))[labels] + rng.normal(0, 1, (3000, 2))
    rgb = class_colours(10)[labels]
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    widget.resize(400, 300)
    for axis in ("left", "bottom"):  # as the Atlas tab shows it: only the dots change
        widget.getPlotItem().hideAxis(axis)
    dots = RasterDots()
    dots.set_data(xy, rgb)
    widget.addItem(dots)
    widget.show()
    qtbot.waitExposed(widget)
    vb = widget.getPlotItem().getViewBox()
    vb.scaleBy((0.5, 0.5))  # zoomed in: a pan brings dots in and out of view

    def grab() -> np.ndarray:
        image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB888)
        rows = np.array(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
        return rows[:, : 3 * image.width()].copy()

    before = grab()
    first = dots.renders
    assert first >= 1
    # Whole device pixels: the moved image and a fresh splat put every dot on the same pixel.
    px, py = vb.viewPixelSize()
    for step in range(3):
        vb.translateBy(x=37 * px, y=-23 * py)
        moved = grab()
        assert dots.renders == first, step  # moved, not splatted again
        dots.set_data(xy, rgb)  # a new image, splatted for this view
        fresh = grab()
        assert dots.renders == first + 1
        first = dots.renders
        np.testing.assert_array_equal(moved, fresh)
        assert not np.array_equal(moved, before)
    # A new zoom splats again, the view only (a wheel may turn on); once the view rests it
    # is splatted again with room around it, and a pan within that room only moves it.
    vb.scaleBy((0.5, 0.5))
    zoomed = grab()
    assert dots.renders == first + 1
    qtbot.waitUntil(lambda: dots.renders == first + 2, timeout=30_000)
    np.testing.assert_array_equal(grab(), zoomed)
    vb.translateBy(x=60 * px * 0.5, y=0)
    grab()
    assert dots.renders == first + 2
    first = dots.renders
    # No dots: nothing painted, nothing splatted.
    dots.set_data(np.zeros((0, 2)), np.zeros((0, 3), np.uint8))
    grab()
    assert dots.renders == first and dots.count() == 0
