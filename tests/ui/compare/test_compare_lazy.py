"""Difference panels of a comparison are painted as they come into view, in the real window on
a random-init ResNet-18: those in view at once, the others when scrolled to, resized into
view or shown with the tab; a panel never shows another comparison's differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from actviz.core.compare import compare
from tests.helpers import frame

TIMEOUT_MS = 60_000
#: Enough layers that the last ones are well below the difference area at 1280x720.
LAYERS = [
    "conv1",
    "bn1",
    "relu",
    "maxpool",
    "layer1.0.conv1",
    "layer1.0",
    "layer1.1",
    "layer1",
    "layer2.0",
    "layer2",
    "layer3",
    "fc",
]


def _pinned_window(actviz_window, resnet, seeds=(1,)):
    """A window on ResNet-18 with a pin per seed, then run on seed 99 (run A)."""
    win = actviz_window(resnet, None, LAYERS)
    window = win.window
    pins = []
    for seed in seeds:
        win.set_input(frame(seed, 32))
        win.run_and_wait(TIMEOUT_MS)
        pins.append(window.pins_ui.pin_result())
    win.set_input(frame(99, 32))
    win.run_and_wait(TIMEOUT_MS)
    return win, pins


def _compare_with(win, pin) -> None:
    win.compare.compare_with_pin(pin, TIMEOUT_MS)
    win.compare.wait_diff_panels(5000)


def _scroll_down_until(qtbot, view, condition) -> None:
    """Scroll the difference area down a page at a time, as a user would, until
    ``condition()`` holds."""
    bar = view.diffs.verticalScrollBar()
    while not condition():
        assert bar.value() < bar.maximum(), "scrolled to the end"
        bar.setValue(bar.value() + bar.pageStep())
        qtbot.wait(10)


def _difference(cap_a, cap_b, name: str) -> np.ndarray:
    return (cap_a[name].tensor - cap_b[name].tensor)[0].numpy()


def _assert_panels_show(ctrl, cap_a, cap_b) -> list[str]:
    """Every painted panel shows A - B of these captures; the others show nothing (or are not
    made yet). Returns the painted panels' names."""
    unpainted = set(ctrl.painter.waiting())
    painted = []
    for name in ctrl.view.diffs.order():
        panel = ctrl.view.diffs.panels.get(name)
        if panel is None:
            assert name in unpainted, f"{name} was painted without a panel"
            continue
        shown = panel.activation_slot.view
        if name in unpainted:
            assert shown is None, f"{name} waits to be painted but shows data"
            assert panel.gradient_slot.view is None
            continue
        assert shown is not None, f"{name} was painted with nothing"
        np.testing.assert_allclose(
            np.asarray(shown.data).reshape(-1), _difference(cap_a, cap_b, name).reshape(-1)
        )
        painted.append(name)
    return painted


def _compared(qtbot, actviz_window, resnet):
    """:func:`_pinned_window` with one pin, then run A compared with it: the window, the pin, the
    Compare feature, its view and the two captures."""
    win, (pin,) = _pinned_window(actviz_window, resnet)
    ctrl = win.compare.feature
    _compare_with(win, pin)
    return win, pin, ctrl, ctrl.view, win.window.session.result.capture, pin.result.capture


def test_a_panel_scrolled_into_view_shows_the_comparison(qtbot, actviz_window, resnet):
    win, pin, ctrl, view, cap_a, cap_b = _compared(qtbot, actviz_window, resnet)
    expected = compare(cap_a, cap_b)
    assert view.diffs.order() == LAYERS
    painted = _assert_panels_show(ctrl, cap_a, cap_b)
    # The first panels (the first divergence, conv1, scrolled to) are painted; the deep
    # ones, far below the area, are not yet (nor made).
    assert painted and painted[0] == "conv1" and view.diffs.panels["conv1"].is_selected()
    assert "layer3" in ctrl.painter.waiting() and "layer3" not in view.diffs.panels
    assert len(painted) < len(LAYERS)

    _scroll_down_until(qtbot, view, lambda: "layer3" in view.diffs.panels)
    panel = view.diffs.panels["layer3"]
    view.diffs.ensureWidgetVisible(panel)
    qtbot.waitUntil(lambda: "layer3" not in ctrl.painter.waiting(), timeout=30_000)
    shown = panel.activation_slot.view.data
    diff = _difference(cap_a, cap_b, "layer3")
    np.testing.assert_allclose(shown, diff)
    np.testing.assert_allclose(panel.gradient_slot.view.data, np.abs(diff))
    # The figures core.compare gives for that layer are those of what is shown.
    layer3 = next(d for d in expected.layers if d.name == "layer3")
    assert float(np.abs(shown).max()) == pytest.approx(layer3.max_abs, rel=1e-5)
    b = cap_b["layer3"].tensor.double().reshape(-1).numpy()  # rel L2 is |A - B| / |B|
    assert np.linalg.norm(shown) / np.linalg.norm(b) == pytest.approx(layer3.rel_l2, rel=1e-4)
    assert panel.activation_slot.mosaic is not None and panel.activation_slot.mosaic.symmetric
    assert not panel.visibleRegion().isEmpty()
    _assert_panels_show(ctrl, cap_a, cap_b)

    # Scrolled to the end: every panel on the way there has been painted, right.
    bar = view.diffs.verticalScrollBar()
    bar.setValue(bar.maximum())
    qtbot.waitUntil(lambda: "fc" not in ctrl.painter.waiting(), timeout=30_000)
    assert len(_assert_panels_show(ctrl, cap_a, cap_b)) > len(painted)

    win.delete()  # closes cleanly with panels still waiting (the fixture checks leftovers)


def test_a_second_comparison_leaves_no_panel_of_the_first(qtbot, actviz_window, resnet):
    win, (first, second) = _pinned_window(actviz_window, resnet, seeds=(1, 2))
    window = win.window
    ctrl = win.compare.feature
    view = ctrl.view
    _compare_with(win, first)
    cap_a = window.session.result.capture
    bar = view.diffs.verticalScrollBar()
    bar.setValue(bar.maximum())  # the deep panels painted with the first comparison
    qtbot.waitUntil(lambda: "layer3" not in ctrl.painter.waiting(), timeout=30_000)
    panels = dict(view.diffs.panels)
    bar.setValue(0)

    _compare_with(win, second)
    cap_b = second.result.capture
    # The same panels, kept: those in view show the second comparison, the others nothing.
    assert view.diffs.panels == panels
    assert "layer3" in ctrl.painter.waiting()
    assert view.diffs.panels["layer3"].activation_slot.view is None
    assert view.diffs.panels["layer3"].title_label.text().startswith("layer3 · ")
    painted = _assert_panels_show(ctrl, cap_a, cap_b)
    assert "conv1" in painted
    with pytest.raises(AssertionError):  # (the two comparisons differ where it is checked)
        np.testing.assert_allclose(
            _difference(cap_a, first.result.capture, "conv1"), _difference(cap_a, cap_b, "conv1")
        )

    _scroll_down_until(qtbot, view, lambda: "layer3" not in ctrl.painter.waiting())
    np.testing.assert_allclose(
        view.diffs.panels["layer3"].activation_slot.view.data,
        _difference(cap_a, cap_b, "layer3"),
    )
    _assert_panels_show(ctrl, cap_a, cap_b)


def test_panels_resized_or_shown_into_view_are_painted(qtbot, actviz_window, resnet):
    win, (pin,) = _pinned_window(actviz_window, resnet)
    window = win.window
    ctrl = win.compare.feature
    view = ctrl.view
    # Compared while the Layers tab is shown: nothing is painted until the tab is.
    ctrl.view.set_source("pin")
    window.host.show_tab(None)
    with qtbot.waitSignal(ctrl.compare_finished, timeout=TIMEOUT_MS):
        assert ctrl.compare()
    assert ctrl.painter.pending() and ctrl.painter.waiting() == LAYERS
    cap_a, cap_b = window.session.result.capture, pin.result.capture
    _assert_panels_show(ctrl, cap_a, cap_b)
    window.host.show_tab(ctrl.page)
    qtbot.waitUntil(lambda: not ctrl.painter.pending(), timeout=30_000)
    before = _assert_panels_show(ctrl, cap_a, cap_b)
    assert before and len(before) < len(LAYERS)

    # A taller window and area (the splitter dragged up): the panels that came into view are
    # painted. (A wider one makes the painted panels taller: their mosaics fill the width.)
    win.resize(1280, 1400)
    view.splitter.setSizes([200, 2000])
    qtbot.waitUntil(lambda: not ctrl.painter.pending(), timeout=30_000)
    after = _assert_panels_show(ctrl, cap_a, cap_b)
    assert len(after) > len(before)
    # Wide enough for two columns: the panels go side by side, those now in view painted.
    win.resize(2200, 1400)
    qtbot.waitUntil(lambda: not ctrl.painter.pending(), timeout=30_000)
    conv1, bn1 = view.diffs.panels["conv1"], view.diffs.panels["bn1"]
    assert conv1.y() == bn1.y() and conv1.x() < bn1.x()
    assert len(_assert_panels_show(ctrl, cap_a, cap_b)) >= len(after)
    # Every panel at once (what a report or a test reading them all asks for).
    ctrl.painter.paint_all()
    assert ctrl.painter.waiting() == []
    assert _assert_panels_show(ctrl, cap_a, cap_b) == LAYERS

    # Another model: the comparison and its panels go, none waits.
    torch.manual_seed(1)
    import torchvision

    win.set_model(torchvision.models.resnet18(weights=None).eval(), ["conv1", "layer1"])
    assert view.diffs.panels == {} and ctrl.painter.waiting() == []
    assert not ctrl.painter.pending()


def test_panels_in_view_are_painted_a_few_a_turn(qtbot, actviz_window, resnet, monkeypatch):
    """A pass paints the panels in view for ``PAINT_BUDGET_S`` at most (the first always); the
    rest follow on the next turns: a tall view of new panels (each builds its canvases) does
    not hold the window in one turn, and every panel ends painted with its difference."""
    from actviz.ui.compare import diff_painter

    monkeypatch.setattr(diff_painter, "PAINT_BUDGET_S", 0.0)
    win, (pin,) = _pinned_window(actviz_window, resnet)
    window = win.window
    ctrl = win.compare.feature
    view = ctrl.view
    win.resize(1280, 1400)
    view.splitter.setSizes([200, 2000])
    ctrl.view.set_source("pin")
    window.host.show_tab(None)
    with qtbot.waitSignal(ctrl.compare_finished, timeout=TIMEOUT_MS):
        assert ctrl.compare()
    painter = ctrl.painter
    passes: list[int] = []
    each = painter._paint_each

    def counted(margin, most=None):
        before = len(painter.unpainted)
        try:
            return each(margin, most)
        finally:
            if margin == 0:  # (a pass over the panels in view)
                passes.append(before - len(painter.unpainted))

    monkeypatch.setattr(painter, "_paint_each", counted)
    window.host.show_tab(ctrl.page)
    qtbot.waitUntil(lambda: not painter.pending(), timeout=30_000)
    painted = _assert_panels_show(ctrl, window.session.result.capture, pin.result.capture)
    assert len(painted) >= 3, painted
    # The panels in view one a pass (the budget spent by the first), over several passes;
    # those near the view come one a pass after them.
    assert passes and max(passes) == 1 and passes.count(1) >= 2, passes


def test_new_widths_repage_the_panels_a_few_a_turn(qtbot, actviz_window, resnet, monkeypatch):
    """A narrower area re-pages every painted panel; as many in one turn held the window
    (a stress run's 157 ms "View > Model"): one a pass past the budget, each on the page size
    its last width asks for, still showing its difference."""
    from actviz.display.mosaic import MIN_PAGE_CHANNELS, page_channels_for
    from actviz.ui.compare import diff_painter

    win, pin, ctrl, view, cap_a, cap_b = _compared(qtbot, actviz_window, resnet)
    painter = ctrl.painter
    win.resize(1280, 1400)
    view.splitter.setSizes([200, 2000])
    qtbot.waitUntil(lambda: not painter.pending(), timeout=30_000)
    painter.paint_all()
    qtbot.waitUntil(lambda: not painter._new_widths, timeout=30_000)
    monkeypatch.setattr(diff_painter, "PAINT_BUDGET_S", 0.0)
    last: dict[str, int] = {}
    view.mosaic_width_changed.connect(lambda name, width: last.__setitem__(name, width))
    calls: list[int] = []
    paint = painter.paint

    def counted(name):
        calls[-1] += 1
        paint(name)

    apply = painter._apply_widths

    def traced():
        calls.append(0)
        apply()

    monkeypatch.setattr(painter, "paint", counted)
    # (The deferred call holds the bound method: its timer is pointed at the traced one.)
    painter._widths_soon._timer.timeout.disconnect()
    painter._widths_soon._timer.timeout.connect(traced)
    win.resize(760, 1400)
    qtbot.waitUntil(lambda: bool(calls), timeout=30_000)
    win.compare.wait_diff_panels(30_000)  # the driver's wait covers the re-paging turns
    assert not painter._new_widths
    assert max(calls) == 1 and calls.count(1) >= 2, calls
    repaged = 0
    for name, width in last.items():
        layer = painter.outcome.differences[name]
        if layer.view is None or layer.view.kind != "maps":
            continue
        total, height, tile_w = layer.view.data.shape
        want = page_channels_for(total, height, tile_w, width, min_channels=MIN_PAGE_CHANNELS)
        assert painter.page_sizes[name] == want, name
        repaged += 1
    assert repaged >= 2
    _assert_panels_show(ctrl, cap_a, cap_b)


def test_passes_in_one_turn_share_its_budget(qtbot, actviz_window, resnet, monkeypatch):
    """Two scrolls in one turn (a wheel's steps arrive together) paint one panel between them,
    not one each: with a budget a pass, two passes in a turn held Compare's first turns for
    twice the budget (94-110 ms with a pin on ResNet-18). The rest follow, right."""
    from actviz.ui.compare import diff_painter

    win, pin, ctrl, view, cap_a, cap_b = _compared(qtbot, actviz_window, resnet)
    painter = ctrl.painter
    qtbot.wait(50)  # the turns of the first paint are over
    monkeypatch.setattr(diff_painter, "PAINT_BUDGET_S", 0.0)
    bar = view.diffs.verticalScrollBar()
    waiting = len(painter.waiting())
    for name in ("layer1.0", "layer2"):  # each scroll paints what it brings into view, at once
        bar.setValue(view.diffs.cells[name].y())
    assert waiting - len(painter.waiting()) == 1
    qtbot.waitUntil(lambda: not painter.pending(), timeout=30_000)
    in_view = view.diffs.near_view(set(view.diffs.order()), 0)
    assert in_view and not set(in_view) & set(painter.waiting())
    _assert_panels_show(ctrl, cap_a, cap_b)


def test_panels_painted_during_live_frames_show_the_comparison(qtbot, actviz_window, resnet):
    from actviz.ui.compare.feature import STALE_NOTE

    win, pin, ctrl, view, cap_a, cap_b = _compared(qtbot, actviz_window, resnet)
    window = win.window
    # Live mode on (an occlusion patch): frames of another input replace the latest run.
    win.live.occlude(TIMEOUT_MS)
    assert window.session.result.capture is not cap_a
    assert view.message().startswith(STALE_NOTE)
    window.host.show_tab(ctrl.page)
    # Panels painted now show the comparison made, not the live frame.
    _scroll_down_until(qtbot, view, lambda: "layer3" not in ctrl.painter.waiting())
    _assert_panels_show(ctrl, cap_a, cap_b)
    # Live mode off again: still that comparison.
    win.live.dock.close()
    win.wait_idle()
    view.diffs.verticalScrollBar().setValue(view.diffs.verticalScrollBar().maximum())
    qtbot.waitUntil(lambda: not ctrl.painter.pending(), timeout=30_000)
    _assert_panels_show(ctrl, cap_a, cap_b)


def _text_inside(chart) -> bool:
    vb = chart.plot.vb
    return vb.sceneBoundingRect().contains(chart.divergence_text.sceneBoundingRect())


#: 35 layers, as many as a ResNet-18's blocks and convolutions.
CHART_NAMES = (
    ["conv1", "bn1"]
    + [f"layer{i}.{j}.conv{k}" for i in range(1, 5) for j in range(4) for k in (1, 2)]
    + ["fc"]
)


@pytest.mark.parametrize("where", [0, 9, 17, 26, len(CHART_NAMES) - 1])
def test_the_first_divergence_text_stays_inside_a_narrow_chart(qtbot, where):
    from PySide6.QtCore import QCoreApplication

    from actviz.ui.compare.chart import SimilarityChart

    chart = SimilarityChart()
    qtbot.addWidget(chart)
    n = len(CHART_NAMES)
    cosine, rel = np.linspace(1.0, 0.4, n), np.linspace(0.0, 0.7, n)
    chart.set_values(CHART_NAMES, cosine, rel, rel, divergence=where, tol=1e-4)
    full = f"first divergence: {CHART_NAMES[where]}"
    for width in (chart.minimumSizeHint().width(), 260, 420, 900):
        chart.resize(width, 240)
        chart.show()
        qtbot.waitExposed(chart)
        for _ in range(3):
            QCoreApplication.processEvents()
        text = chart.divergence_text
        shown = text.textItem.toPlainText()
        assert text.isVisible() and shown, (width, where)
        assert _text_inside(chart), (width, where, shown)
        if width == 900:  # room for the whole text on one side or the other
            assert shown == full
        else:  # the whole text, the layer's name, or its name cut in the middle
            name = CHART_NAMES[where]
            cut = "…" in shown and (shown[0], shown[-1]) == (name[0], name[-1])
            assert shown in (full, name) or cut, shown
    # Panned so that the line is out of view: no name left floating at the edge.
    low = where + 3 if where < n - 6 else 0
    chart.plot.setXRange(low, low + 3, padding=0)
    QCoreApplication.processEvents()
    assert not chart.divergence_text.isVisible()


def test_the_first_divergence_text_fits_the_compare_tab_at_1024x640(qtbot, actviz_window, resnet):
    win = actviz_window(resnet, None, LAYERS, size=(1024, 640))
    window = win.window
    win.set_input(frame(1, 32))
    win.run_and_wait(TIMEOUT_MS)
    pin = window.pins_ui.pin_result()
    win.set_input(frame(2, 32))
    win.run_and_wait(TIMEOUT_MS)
    _compare_with(win, pin)
    chart = win.compare.view.chart
    view = win.compare.view
    win.settle()
    assert chart.divergence == 0 and chart.divergence_text.isVisible()
    assert _text_inside(chart)
    # The splitter dragged so that the chart is as narrow as it goes.
    view.top_splitter.setSizes([1, 5000])
    win.settle()
    assert chart.width() <= chart.minimumSizeHint().width() + 2
    assert chart.divergence_text.isVisible() and _text_inside(chart)


def test_settling_the_difference_area_lays_out_only_the_area(qtbot):
    """Reading the area's geometry lays out the area, not every widget of the app waiting for
    its turn (a layout of the whole window took 127 ms in a stress run)."""
    from PySide6 import QtCore, QtWidgets

    from actviz.ui.compare.view import DifferenceArea

    area, elsewhere = DifferenceArea(), QtWidgets.QWidget()
    box = QtWidgets.QVBoxLayout(elsewhere)
    qtbot.addWidget(area)
    qtbot.addWidget(elsewhere)
    area.resize(600, 400)
    area.show()
    elsewhere.show()
    area.layout_panels(["a", "b", "c"])
    qtbot.waitUntil(lambda: area.cells["c"].y() > 0)
    seen: list[int] = []

    class Count(QtCore.QObject):
        def eventFilter(self, _obj, event):  # noqa: N802 - Qt name
            if event.type() == QtCore.QEvent.Type.LayoutRequest:
                seen.append(1)
            return False

    counter = Count()
    elsewhere.installEventFilter(counter)
    box.addWidget(QtWidgets.QLabel("waits for its turn"))  # posts a LayoutRequest
    area.panel("b").set_minimum_panel_height(700)  # the area's own change
    area.settle()
    assert area.cells["c"].y() >= area.cells["b"].y() + 700  # the area is laid out now
    assert not seen  # the other widget's request still waits
    qtbot.waitUntil(lambda: bool(seen))
    elsewhere.removeEventFilter(counter)
