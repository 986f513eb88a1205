"""Rendering: one layer panel's mosaic update (setImage + paint), for large layers.

Each case builds two different mosaics of the same shape and alternates them, so every update
really re-renders. The time is ``LayerPanel.set_activation`` plus one ``processEvents`` that
delivers the scene update and paints the canvas: everything the GUI thread does for one layer
of one frame. (``QWidget.repaint`` alone is not enough: a QGraphicsView paints its scene
changes on the next event-loop pass.) The mosaics carry their colour-table indices, as the
window's and live mode's worker send them (:func:`actviz.display.mosaic.mosaic` makes them).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from actviz.bench.ui_bench import delete_widgets, ensure_qt_app

#: (channels, height, width, how the mosaic is built, counted in the p95 target?)
CASES: tuple[tuple[int, int, int, str, bool], ...] = (
    (2048, 14, 14, "all channels", True),  # ~540x850 px: 2048 channels at ~700x700
    (256, 43, 43, "all channels", True),  # ~700x700 px
    (1, 700, 700, "all channels", True),
    (4096, 14, 14, "live limits", False),  # capped and downsampled as live mode does
    (1, 1024, 1024, "live limits", False),
    (4096, 14, 14, "window limits", False),  # as display.prepare's exact variant builds it
    (1, 1024, 1024, "window limits", False),
)


@dataclass
class RenderRow:
    name: str
    image_shape: tuple[int, int]
    p50_ms: float
    p95_ms: float
    max_ms: float
    target: bool

    def row(self) -> str:
        shape = f"{self.image_shape[0]}x{self.image_shape[1]}"
        mark = "" if self.target else "  (not in target)"
        return (
            f"{self.name:<34} {shape:>10} {self.p50_ms:8.1f} {self.p95_ms:8.1f} "
            f"{self.max_ms:8.1f}{mark}"
        )


def _mosaics(c: int, h: int, w: int, how: str, seed: int) -> tuple:
    from actviz.display.layer_views import LayerView
    from actviz.display.mosaic import MAX_MOSAIC_CHANNELS, MAX_MOSAIC_PIXELS, mosaic

    rng = np.random.default_rng(seed)
    data = rng.standard_normal((c, h, w), dtype=np.float32)
    view = LayerView("maps", data, (1, c, h, w), f"{c} channels of {h}x{w}")
    if how == "live limits":  # the fast variant
        m = mosaic(data, max_channels=MAX_MOSAIC_CHANNELS, max_pixels=MAX_MOSAIC_PIXELS)
    elif how == "window limits":
        m = mosaic(data, max_channels=MAX_MOSAIC_CHANNELS)
    else:
        m = mosaic(data)
    return view, m


def run(repeats: int = 30, panel_size: tuple[int, int] = (900, 700)) -> dict:
    """Time mosaic updates of one LayerPanel; returns rows and ``render_p95_ms``.

    Parameters
    ----------
    repeats
        Updates per case (after two warm-up updates).
    panel_size
        Size of the panel widget in pixels.
    """
    app = ensure_qt_app()
    from actviz.ui.panels.feature_map import LayerPanel

    rows: list[RenderRow] = []
    panel = LayerPanel("bench.layer", module_type="Conv2d")
    panel.set_gradients_visible(False)
    panel.resize(*panel_size)
    panel.show()
    app.processEvents()
    try:
        for c, h, w, how, target in CASES:
            pair = [_mosaics(c, h, w, how, seed) for seed in (0, 1)]
            times: list[float] = []
            for i in range(repeats + 2):
                view, mosaic = pair[i % 2]
                t0 = time.perf_counter()
                panel.set_activation(view, mosaic)
                app.processEvents()
                dt = time.perf_counter() - t0
                if i >= 2:
                    times.append(dt)
            times.sort()
            p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
            rows.append(
                RenderRow(
                    f"{c} ch of {h}x{w} ({how})",
                    tuple(pair[0][1].image.shape),
                    statistics.median(times) * 1e3,
                    p95 * 1e3,
                    times[-1] * 1e3,
                    target,
                )
            )
    finally:
        delete_widgets(panel)
    in_target = [r.p95_ms for r in rows if r.target]
    return {
        "rows": rows,
        "render_p95_ms": max(in_target),
        "render_max_any_ms": max(r.max_ms for r in rows),
    }


def print_table(results: dict) -> None:
    print(
        f"{'render: set_activation + paint':<34} {'mosaic px':>10} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}"
    )
    for r in results["rows"]:
        print(r.row())
