"""Token heat maps: the attention map has a colour bar spanning it, reading its levels."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QCoreApplication

from actviz.display.attention import AttentionMaps
from actviz.ui.panels.colormap_views import lut
from actviz.ui.tokens.attention_panel import AttentionPanel

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
    panel.set_head(1)
    for _ in range(5):
        QCoreApplication.processEvents()
    shown = panel.shown_map()
    assert np.allclose(shown, maps.heads("h.0.attn")[1])
    assert bar.isVisible()
    assert bar.levels() == (0.0, float(shown.max()))
    # The strip's colours are the map's: the same colour map, low at the bottom.
    strip = bar.strip._buffer[:, 0, :]
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
