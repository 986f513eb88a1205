"""Token heat maps: the attention map has a colour bar spanning it, reading its levels."""

from __future__ import annotations

import numpy as np
from PySide6 import QtGui
from PySide6.QtCore import QCoreApplication

from actviz.display.attention import AttentionMaps
from actviz.ui.panels.colorbar import lut
from actviz.ui.tokens.feature import AttentionPanel

TOKENS = ["The", "cat", "sat", "on", "the", "mat"]


def _attention_maps() -> AttentionMaps:
    probs = np.random.default_rng(0).random((1, 2, 6, 6)).astype(np.float32)
    probs /= probs.sum(-1, keepdims=True)
    return AttentionMaps(("h.0.attn", "h.1.attn"), {"h.0.attn": probs, "h.1.attn": probs[:, ::-1]})


def test_the_attention_map_has_a_colour_bar_spanning_it(qtbot):
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 360)
    panel.show()
    qtbot.waitExposed(panel)
    bar = panel.canvas.colorbar
    assert bar is not None and not bar.isVisible()  # nothing to read before a map
    maps = _attention_maps()
    panel.set_attention(maps, TOKENS)
    panel.head_combo.setCurrentIndex(2)  # head 1 (0: the mean)
    for _ in range(5):
        QCoreApplication.processEvents()
    shown = panel.canvas.heat
    assert np.allclose(shown, maps.heads("h.0.attn")[1])
    assert bar.isVisible()
    assert bar.levels() == (0.0, float(shown.max()))
    # The strip's colours are the map's: the same colour map, low at the bottom.
    image = bar.strip._image
    strip = np.array(
        [QtGui.QColor.fromRgba(image.pixel(0, y)).getRgb() for y in range(image.height())],
        dtype=np.uint8,
    )
    assert np.array_equal(strip[::-1], lut(panel.canvas.colormap_name)[:, :4])
    # It spans the map's height and lies inside the canvas, beside the map.
    view = panel.canvas.plot.vb.sceneBoundingRect()
    rect = bar.strip.sceneBoundingRect()
    assert abs(rect.top() - view.top()) <= 1 and abs(rect.bottom() - view.bottom()) <= 1
    assert rect.left() >= view.right() and rect.right() <= panel.canvas.width()
    axis = bar.axis.sceneBoundingRect()
    assert axis.right() <= panel.canvas.width() + 0.5
    panel.clear()
    assert not bar.isVisible()


def test_a_canvas_off_screen_lays_out_its_plots_when_painted_or_read(qtbot):
    # A window resize resized every token panel's canvases, on screen or not (~0.7 ms of
    # pyqtgraph layout each, 64 ms with 25 GPT-2 panels): off screen, the plots follow the
    # size when the canvas is next painted or a cell's place is read.
    from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget

    from actviz.ui.tokens.token_panel import LabelledHeatCanvas

    scroll = QScrollArea()
    qtbot.addWidget(scroll)
    scroll.setWidgetResizable(True)
    column = QWidget()
    layout = QVBoxLayout(column)
    canvases = [LabelledHeatCanvas(x_label="feature", bars_label="norm") for _ in range(4)]
    heat = np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32)
    for canvas in canvases:
        canvas.setMinimumHeight(300)
        canvas.set_heat(heat, TOKENS, bars=np.abs(heat).sum(1))
        layout.addWidget(canvas)
    scroll.setWidget(column)
    scroll.resize(400, 320)
    scroll.show()
    qtbot.waitExposed(scroll)
    for _ in range(5):
        QCoreApplication.processEvents()
    first, last = canvases[0], canvases[-1]
    scroll.resize(520, 320)  # wider: every canvas is resized
    for _ in range(3):
        QCoreApplication.processEvents()
    assert first.width() == last.width() > 400
    # On screen: laid out at once. Below the fold: not yet (the plot keeps its old width).
    assert not first._layout_stale
    assert first.ci.geometry().width() == first.width()
    assert last._layout_stale and last.ci.geometry().width() < last.width()
    # Reading a cell's place lays it out first: the centre of a cell is that cell.
    point = last.cell_centre(4, 5)
    assert not last._layout_stale and last.ci.geometry().width() == last.width()
    assert last.cell_at(last.mapToScene(point)) == (4, 5)
    # Scrolled to, the next one lays out when painted.
    middle = canvases[2]
    assert middle._layout_stale
    scroll.ensureWidgetVisible(middle)
    qtbot.waitUntil(lambda: not middle._layout_stale, timeout=30_000)
    assert middle.ci.geometry().width() == middle.width()
