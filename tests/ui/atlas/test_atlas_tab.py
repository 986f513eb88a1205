"""The Atlas tab in the real window: a folder scanned through Data > Scan a dataset maps onto
the tab; hovering a dot names its image, clicking it opens it as the input (the marker moves
there), and a dragged rectangle lists the channels that set the selection apart.

The folder is two classes of tiny plain-coloured PNGs (named like two of the demo's classes)
written in tmp_path; the model is the bundled demo.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt

from actviz.data.atlas_map import project, query_vector, separating_channels
from actviz.io.models.demo_model import DEMO_CLASSES
from actviz.ui.atlas.feature import classifier_layer
from actviz.ui.atlas.view import EMPTY_TEXT, colouring, model_labels
from tests.ui.atlas.atlas_windows import LAYER, TIMEOUT_MS, scan_into_atlas, write_classes
from tests.ui.tiny_models import TinyCNN

LEFT = Qt.MouseButton.LeftButton


def test_the_atlas_maps_a_scan_hover_click_and_select(qtbot, actviz_window, tmp_path):
    win = actviz_window()
    window = win.window
    atlas_ui = win.atlas.feature
    assert atlas_ui.view.empty_label.text() == EMPTY_TEXT and atlas_ui.atlas is None
    assert window.files.open_model_source("demo", wait=True)
    assert LAYER in window.session.ticked
    folder = tmp_path / "images"
    write_classes(folder)
    scan_into_atlas(win, folder)
    scan = window.session.scan
    assert scan is win.dataset.scan and scan.count == 10
    assert set(scan.embedding_layers) == {LAYER, "fc"}
    atlas = atlas_ui.atlas
    # The feature maps the layer before the classifier, with predictions from the classifier.
    assert (atlas.layer, atlas_ui.logits) == (LAYER, "fc")
    assert classifier_layer(scan, window.session.categories) == "fc"
    view = atlas_ui.view
    assert view.stack.currentIndex() == 1 and view.layer_combo.currentText() == LAYER
    expected = project(scan.embeddings(LAYER).vectors, method="pca").coords
    assert np.allclose(view.coords, expected, atol=1e-5)
    assert view.dots.count() == 10
    # Coloured by class: one legend entry per class folder, five images each.
    assert [(name, count) for name, _rgb, count in view_legend(atlas_ui)] == [
        (DEMO_CLASSES[0], 5),
        (DEMO_CLASSES[1], 5),
    ]
    window.host.show_tab(view)
    win.settle()

    # Hover: the pointer over a dot names its image.
    row = 7
    pos = view.widget_pos_of(row)
    qtbot.mouseMove(view.plot.viewport(), pos)
    qtbot.waitUntil(lambda: atlas_ui.hover_text != "", timeout=30_000)
    source = atlas_ui.source(row)
    assert source == str(scan.embeddings(LAYER).sources[row])
    assert source.split("/")[-1] in atlas_ui.hover_text and "class:" in atlas_ui.hover_text
    assert view.row_at(view.box.mapSceneToView(view.plot.mapToScene(pos))) == row

    # Click: it becomes the input, and once it ran the marker sits on its dot.
    assert view.marker_position() is None  # nothing ran yet: no input on the map
    with qtbot.waitSignal(window.input_loaded, timeout=TIMEOUT_MS) as opened:
        qtbot.mouseClick(view.plot.viewport(), LEFT, pos=pos)
    assert opened.args == [source] and window.session.input.source == source
    with qtbot.waitSignal(window.run_finished, timeout=TIMEOUT_MS):
        window.runs.run()
    qtbot.waitUntil(lambda: view.marker_position() is not None, timeout=30_000)
    # float16 embeddings against the run's float32 capture: the same place to ~1e-2.
    assert np.allclose(view.marker_position(), atlas.coords[row], atol=2e-2)
    capture = window.session.result.capture
    assert np.allclose(view.marker_position(), atlas.place(capture)[:2], atol=1e-6)
    # Its nearest image in the dataset is itself.
    assert atlas_ui.nearest[0].source == source and atlas_ui.nearest[0].similarity > 0.999
    assert view.nearest_strip.count() == 8
    assert query_vector(capture, LAYER).shape == (scan.channels(LAYER),)

    # Select: a rectangle around one class's dots lists the channels that set it apart.
    labels = np.asarray(atlas.labels)
    cluster = np.flatnonzero(labels == 0)
    xy = atlas.coords[cluster]
    px, py = view.box.viewPixelSize()
    # A few pixels around the cluster: the drag lands on whole pixels.
    rect = QRectF(
        QPointF(xy[:, 0].min() - 4 * px, xy[:, 1].min() - 4 * py),
        QPointF(xy[:, 0].max() + 4 * px, xy[:, 1].max() + 4 * py),
    )
    inside = view.rows_in(rect)
    view.select_button.setChecked(True)
    assert set(cluster) <= set(inside)
    with qtbot.waitSignal(view.rect_selected, timeout=30_000) as dragged:
        drag(qtbot, view, rect)
    assert list(atlas_ui.selection) == list(view.rows_in(dragged.args[0]))
    assert list(atlas_ui.selection) == list(inside)
    want = separating_channels(scan.embeddings(LAYER).vectors, inside, 10)
    assert atlas_ui.separating == want and len(want) == 10
    assert view.channel_list.count() == 10
    assert view.selection_strip.count() == len(inside)
    assert view.channel_list.item(0).text().startswith(f"ch {want[0].channel}:")
    # Clicking a channel opens its channel view.
    first = view.channel_list.item(0)
    qtbot.mouseClick(
        view.channel_list.viewport(), LEFT, pos=view.channel_list.visualItemRect(first).center()
    )
    cv = window.host.channel_view
    assert (cv.name, cv.channel) == (LAYER, want[0].channel)

    # Coloured by one channel's mean: a colour bar from its lowest to its highest image.
    view.colour_combo.setCurrentText("Channel")
    view.channel_spin.setValue(want[0].channel)
    values = atlas.channel(want[0].channel)
    assert not view.colour_bar.isHidden()
    assert (view.bar_low.text(), view.bar_high.text()) == (
        f"{values.min():.3g}",
        f"{values.max():.3g}",
    )

    # A hidden tab places no result; it catches up on the last one when shown.
    other = next(r for r in range(10) if r != row and atlas.labels[r] != atlas.labels[row])
    window.host.show_tab(window.centre.tabs.widget(0))
    assert window.host.current_tab() is not view
    with qtbot.waitSignal(window.input_loaded, timeout=TIMEOUT_MS):
        window.files.open_input_source(atlas_ui.source(other), remember=False)
    with qtbot.waitSignal(window.run_finished, timeout=TIMEOUT_MS):
        window.runs.run()
    assert np.allclose(view.marker_position(), atlas.coords[row], atol=2e-2)
    window.host.show_tab(view)
    assert np.allclose(view.marker_position(), atlas.coords[other], atol=2e-2)
    assert atlas_ui.nearest[0].source == atlas_ui.source(other)

    # Another model: the scan goes, and the tab says to scan again.
    win.set_model(TinyCNN().eval(), layers=["conv1"])
    assert window.session.scan is None and atlas_ui.atlas is None
    assert view.stack.currentIndex() == 0 and view.empty_label.text() == EMPTY_TEXT


def view_legend(feature):
    emb = feature.atlas.embeddings
    return colouring("Class", len(emb), labels=emb.labels, class_names=emb.class_names).legend


def drag(qtbot, view, rect: QRectF) -> None:
    """A left-button drag across ``rect`` (view coordinates) on the map."""
    a = view.plot.mapFromScene(view.box.mapViewToScene(rect.topLeft()))
    b = view.plot.mapFromScene(view.box.mapViewToScene(rect.bottomRight()))
    port = view.plot.viewport()
    qtbot.mousePress(port, LEFT, pos=a)
    for t in (0.25, 0.5, 0.75, 1.0):
        p = QPoint(round(a.x() + t * (b.x() - a.x())), round(a.y() + t * (b.y() - a.y())))
        qtbot.mouseMove(port, p)
    qtbot.mouseRelease(port, LEFT, pos=b)


def test_colours_by_prediction_correctness_and_channel():
    labels = np.array([0, 1, -1, 1])
    # The folder's classes matched to the model's by name.
    truth = model_labels(labels, ["cat", "dog"], ["dog", "bird", "cat"])
    assert list(truth) == [2, 0, -1, 0]
    c = colouring(
        "Correct",
        4,
        labels=labels,
        class_names=["cat", "dog"],
        predictions=np.array([2, 1, 0, 0]),
        categories=["dog", "bird", "cat"],
    )
    assert list(c.index) == [0, 1, 2, 0]
    assert [(name, n) for name, _rgb, n in c.legend] == [
        ("correct", 2),
        ("wrong", 1),
        ("class unknown to the model", 1),
    ]
    ch = colouring("Channel", 3, channel_values=np.array([1.0, 3.0, 2.0]))
    assert ch.scale == (1.0, 3.0) and list(ch.index) == [0, 63, 32]
    assert tuple(ch.rgb()[0]) != tuple(ch.rgb()[1])
    none = colouring("Prediction", 3)
    assert none.note and list(none.index) == [0, 0, 0]
