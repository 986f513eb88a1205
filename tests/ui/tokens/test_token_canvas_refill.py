"""A token canvas refilled with a new result keeps what did not change: its axes' drawn
pictures when the token labels are the same, and its norm bars' item (issue #37: showing a
pinned result again repainted every token canvas's axes, 130 ms of GUI thread)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication

from actviz.ui.tokens.token_panel import LabelledHeatCanvas

TOKENS = ["The", "cat", "sat", "on", "the", "mat"]


def _paint(canvas: LabelledHeatCanvas) -> None:
    canvas.viewport().repaint()
    QCoreApplication.processEvents()


def test_same_labels_keep_the_axes_and_the_bars_item(qtbot, monkeypatch):
    canvas = LabelledHeatCanvas(x_label="feature", bars_label="norm")
    qtbot.addWidget(canvas)
    canvas.resize(420, 300)
    canvas.show()
    qtbot.waitExposed(canvas)
    rng = np.random.default_rng(0)
    heat = rng.normal(size=(6, 16)).astype(np.float32)
    canvas.set_heat(heat, TOKENS, bars=np.linalg.norm(heat, axis=1))
    _paint(canvas)
    bars = canvas.bars
    assert bars is not None
    drawn = []
    original = pg.AxisItem.generateDrawSpecs

    def counted(self, painter):
        drawn.append(self.orientation)
        return original(self, painter)

    monkeypatch.setattr(pg.AxisItem, "generateDrawSpecs", counted)
    other = rng.normal(size=(6, 16)).astype(np.float32)
    canvas.set_heat(other, TOKENS, bars=np.linalg.norm(heat, axis=1))
    _paint(canvas)
    assert drawn == []  # the same tokens and bar scale: no axis drawn anew
    assert canvas.bars is bars  # refilled, not replaced
    np.testing.assert_allclose(bars.opts["width"], np.linalg.norm(heat, axis=1), rtol=1e-6)
    assert np.array_equal(canvas.image.image, other)
    # Other tokens: the token axis is drawn anew, with their labels.
    canvas.set_heat(other, [t.upper() for t in TOKENS], bars=np.linalg.norm(other, axis=1))
    _paint(canvas)
    assert "left" in drawn
    labels = [text for _, text in canvas.plot.getAxis("left")._tickLevels[0]]
    assert labels and all(text.isupper() for text in labels)
    np.testing.assert_allclose(bars.opts["width"], np.linalg.norm(other, axis=1), rtol=1e-6)
    # No bars: the item goes; bars again: one item.
    canvas.set_heat(other, TOKENS)
    assert canvas.bars is None and bars not in canvas.bars_plot.vb.addedItems
    canvas.set_heat(other, TOKENS, bars=np.ones(6))
    assert sum(isinstance(i, pg.BarGraphItem) for i in canvas.bars_plot.vb.addedItems) == 1


def test_a_token_canvas_builds_no_menu_it_would_drop(qtbot, monkeypatch):
    """Its plots have no context menus: none is built only to be thrown away (a token
    panel's two canvases are built on the GUI thread, a tenth of each was the menus)."""
    import importlib

    view_box_module = importlib.import_module("pyqtgraph.graphicsItems.ViewBox.ViewBox")
    made = []
    original = view_box_module.ViewBoxMenu

    def counted(*args, **kwargs):
        made.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(view_box_module, "ViewBoxMenu", counted)
    canvas = LabelledHeatCanvas(x_label="feature", bars_label="norm")
    qtbot.addWidget(canvas)
    assert made == []
    assert canvas.plot.vb.menu is None and canvas.bars_plot.vb.menu is None
    assert not hasattr(canvas.plot, "ctrlMenu")  # no PlotItem options form either
