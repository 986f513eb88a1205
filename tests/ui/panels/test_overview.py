"""The Overview reads: gradient-flow labels, class names, statistics, histogram (issue 12, 6)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torchvision
from PySide6 import QtCore
from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QImage, QPainter

from actviz.core.capture import capture
from actviz.display.stats import layer_stats
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.panels.plot_panel import GradFlowPanel, _short
from actviz.ui.panels.prediction import PredictionPanel
from actviz.ui.panels.stats_table import COLUMNS, StatsTable
from actviz.ui.window.result_display import default_selected_layer
from tests.ui.qt_helpers import show_widget

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()

OWL = "great grey owl, great gray owl, Strix nebulosa"


def _resnet_layer_names() -> list[str]:
    """ResNet-18's modules two levels deep, in execution order (20 names)."""
    model = torchvision.models.resnet18(weights=None)
    names = [n for n, _ in model.named_modules() if n and n.count(".") <= 1]
    names.insert(4, "layer0.stem")  # longer dotted names among them
    names.append("classifier.projection_head")
    return names


def _scene_label_rects(panel: GradFlowPanel) -> list[tuple[object, str]]:
    """The bottom axis's tick labels as drawn: (rect in scene coordinates, text)."""
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        _axis, _ticks, texts = panel.axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(panel.axis.mapRectToScene(rect), text) for rect, _flags, text in texts]


@pytest.mark.parametrize("width", [280, 420, 900])
def test_gradient_flow_labels_never_overlap(qtbot, width):
    names = _resnet_layer_names()
    assert len(names) == 20
    panel = show_widget(qtbot, GradFlowPanel(), width, 260)
    panel.set_norms(names, np.logspace(-4, 0, len(names)))
    QCoreApplication.processEvents()
    labels = _scene_label_rects(panel)
    assert len(labels) >= 3  # some bars are named at every width
    for (a, _), (b, _) in itertools.combinations(labels, 2):
        assert not a.intersects(b), (a, b)
    shorts = [_short(n) for n in names]
    for rect, text in labels:
        # Under its own bar, and its bar's name (elided at worst, keeping its number).
        index = round(panel.plot.vb.mapSceneToView(rect.center()).x())
        full = shorts[index]
        head, _, tail = text.partition("…")
        assert text == full or (head and full.startswith(head) and full.endswith(tail)), (
            text,
            full,
        )
    step = panel.axis.step
    # Zooming in names more bars, still without overlaps.
    before = step
    panel.plot.setXRange(-0.6, 5.4, padding=0)
    QCoreApplication.processEvents()
    zoomed = _scene_label_rects(panel)
    assert panel.axis.step <= before
    for (a, _), (b, _) in itertools.combinations(zoomed, 2):
        assert not a.intersects(b)
    # Every bar keeps its full name in the hover read-out.
    assert panel.hover_text(7.0).startswith(f"7: {names[7]}")


def test_gradient_flow_names_every_bar_when_they_fit(qtbot):
    panel = show_widget(qtbot, GradFlowPanel(), 700, 260)
    panel.set_norms(["conv1", "layer1", "fc"], np.array([0.1, 0.2, 0.3]))
    QCoreApplication.processEvents()
    assert [text for _, text in _scene_label_rects(panel)] == ["conv1", "layer1", "fc"]
    assert panel.axis.step == 1


def test_gradient_flow_names_each_of_the_demos_five_bars_at_its_window_width(qtbot):
    # 269 px: the Overview's gradient-flow panel in a 1280x720 window with the demo open.
    names = ["features.block1", "features.block2", "features.block3", "features.block4", "fc"]
    panel = show_widget(qtbot, GradFlowPanel(), 269, 297)
    panel.set_norms(names, np.array([1.2, 1.1, 2.4, 0.27, 1.0]))
    QCoreApplication.processEvents()
    labels = _scene_label_rects(panel)
    texts = [text for _, text in labels]
    assert len(texts) == 5 and panel.axis.step == 1
    # Each keeps the number that tells it from its neighbours, even when cut short.
    assert [t[-1] for t in texts[:4]] == ["1", "2", "3", "4"] and texts[4] == "fc"
    assert all(t.startswith("bl") for t in texts[:4])
    for (a, _), (b, _) in itertools.combinations(labels, 2):
        assert not a.intersects(b)


def _value_label_rects(panel: GradFlowPanel) -> list[tuple[object, str]]:
    """The value axis's labels as drawn: (rect in scene coordinates, text), blanks left out."""
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        _axis, _ticks, texts = panel.value_axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(panel.value_axis.mapRectToScene(r), t) for r, _f, t in texts if t]


@pytest.mark.parametrize("height", [180, 297, 480])
@pytest.mark.parametrize("span", ["empty", "one decade", "six decades"])
def test_gradient_flow_value_labels_never_overlap_or_stick_out(qtbot, height, span):
    panel = show_widget(qtbot, GradFlowPanel(), 269, height)
    if span == "one decade":
        panel.set_norms(list("abcde"), np.array([0.3, 0.5, 0.9, 1.5, 2.0]))
    elif span == "six decades":
        panel.set_norms(list("abcde"), np.logspace(-6, 0, 5))
    QCoreApplication.processEvents()
    labels = _value_label_rects(panel)
    assert len(labels) >= 2
    for (a, ta), (b, tb) in itertools.combinations(labels, 2):
        assert not a.intersects(b), (ta, tb)
    # Whole decades only, in one notation, and none cut by the edge above the plot.
    assert all(
        t in {"1e-7", "1e-6", "1e-5", "1e-4", "0.001", "0.01", "0.1", "1", "10"} for _, t in labels
    ), labels
    top = panel.value_axis.mapRectToScene(panel.value_axis.boundingRect()).top()
    view_top = panel.plot.vb.mapRectToScene(panel.plot.vb.boundingRect()).top()
    assert all(rect.top() >= min(top, view_top) - 0.5 for rect, _ in labels)


def test_long_class_names_elide_with_the_full_name_as_tooltip(qtbot):
    panel = show_widget(qtbot, PredictionPanel(), 240, 220)
    panel.set_predictions([(24, OWL, 0.61), (1, "goldfish", 0.2)])
    QCoreApplication.processEvents()
    owl, fish = panel._rows[0].label, panel._rows[1].label
    assert owl.text() == OWL
    shown = owl.shown_text()
    assert shown != OWL and shown.endswith("…") and OWL.startswith(shown[:-1])
    assert len(shown) >= 12  # the name gets the row's width, not a sliver beside the bar
    assert OWL in owl.toolTip()
    assert fish.shown_text() == "goldfish"
    # Wide enough, the whole name shows.
    panel.resize(700, 220)
    QCoreApplication.processEvents()
    assert owl.shown_text() == OWL


@pytest.fixture
def conv_rows():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 3)
    )
    model_names = {"0": "features.block_with_a_long_name.conv", "1": "relu", "2": "head"}
    cap = capture(model, torch.randn(1, 3, 8, 8), layers=["0", "1", "2"])
    return [dict(layer_stats(cap[n]), name=model_names[n]) for n in cap.names]


def test_statistics_table_columns_and_a_frozen_name_column(qtbot, conv_rows):
    table = show_widget(qtbot, StatsTable(), 320, 220)
    table.set_rows(conv_rows)
    QCoreApplication.processEvents()
    horizontal = QtCore.Qt.Orientation.Horizontal
    headers = [table.model.headerData(i, horizontal) for i in range(table.model.columnCount())]
    assert headers[:9] == ["layer", "shape", "mean", "std", "min", "max", "zero frac", "NaN", "Inf"]
    assert [c.key for c in COLUMNS][:7] == [
        "name",
        "shape",
        "mean",
        "std",
        "min",
        "max",
        "zero_frac",
    ]
    view, frozen = table.view, table.name_view
    bar = view.horizontalScrollBar()
    assert bar.maximum() > 0  # the numbers do not fit: they scroll
    bar.setValue(bar.maximum())
    QCoreApplication.processEvents()
    assert view.columnViewportPosition(0) < 0  # the main view's name column scrolled away
    assert frozen.isVisible() and frozen.geometry().left() <= view.frameWidth()
    assert frozen.width() == view.columnWidth(0) > 0
    # ... and the frozen one still shows every name, row for row.
    for row, expected in enumerate(table.names()):
        rect = frozen.visualRect(table.model.index(row, 0))
        assert rect.isValid() and frozen.viewport().rect().contains(rect.center())
        assert table.model.index(row, 0).data() == expected
    # One selection for both views; sorting by the frozen header sorts the table.
    table.select_layer("relu")
    assert frozen.selectionModel() is view.selectionModel()
    frozen.sortByColumn(0, QtCore.Qt.SortOrder.AscendingOrder)
    assert table.names() == sorted(r["name"] for r in conv_rows)
    assert view.horizontalHeader().sortIndicatorSection() == 0


def test_histogram_defaults_to_the_last_spatial_layer_and_has_a_selector(
    qtbot, actviz_window, resnet
):
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    layers = ["layer1", "layer2", "layer3", "layer4", "avgpool", "fc"]
    win = actviz_window(resnet, x, layers)
    window = win.window
    win.run_and_wait(flush=False)
    qtbot.waitUntil(lambda: not window.display.display_pending(), timeout=RUN_TIMEOUT_MS)
    panel = window.centre.histogram_panel
    # layer4 is (1, 512, 2, 2); avgpool's 1x1 maps and fc's logits make poor histograms.
    assert default_selected_layer(window.session.result) == "layer4"
    assert window.display.selected_layer == "layer4"
    assert panel.current_layer() == "layer4"
    assert panel.title().startswith("layer4")
    assert panel.counts.sum() == 512 * 2 * 2
    combo = panel.layer_combo
    assert [combo.itemText(i) for i in range(combo.count())] == list(window.session.result.layers)
    with qtbot.waitSignal(panel.layer_changed):
        combo.textActivated.emit("layer2")  # what choosing the item sends
    assert panel.current_layer() == "layer2" and window.display.selected_layer == "layer2"
    assert panel.counts.sum() == 128 * 8 * 8
    # A new result keeps the user's choice.
    win.run_and_wait(flush=False)
    qtbot.waitUntil(lambda: not window.display.display_pending(), timeout=RUN_TIMEOUT_MS)
    assert panel.current_layer() == "layer2" and panel.counts.sum() == 128 * 8 * 8


def test_the_statistics_table_measures_its_names_only_when_shown_and_changed(qtbot, monkeypatch):
    # Measuring a column asks the model for every cell; live frames arrive many times a second
    # while the table is often on a hidden tab (this cost ~14 ms of GUI time per frame).
    from actviz.ui.panels.stats_table import StatsTable

    table = StatsTable()
    qtbot.addWidget(table)
    fits = []
    real = StatsTable.fit_name_column
    monkeypatch.setattr(StatsTable, "fit_name_column", lambda self: fits.append(1) or real(self))
    rows = [{"name": f"layer{i}", "shape": (1, 8, 4, 4), "mean": 0.5} for i in range(20)]
    table.set_rows(rows)  # hidden: not measured
    assert fits == []
    table.show()
    qtbot.waitExposed(table)
    assert fits == [1]  # shown: measured once
    for _ in range(3):
        table.set_rows([dict(r, mean=0.1) for r in rows])  # a new frame, same names
    assert fits == [1]
    table.set_rows(rows[:5])  # other names: measured again
    assert fits == [1, 1] and table.names() == [f"layer{i}" for i in range(5)]
