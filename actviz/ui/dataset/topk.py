"""TopKGrid: a channel's top-k dataset images, cropped around the maximum, heat overlaid."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.colormaps import OVERLAY_CMAP, colorize
from actviz.ui.panels import style

#: Side of a tile on screen (pixels) in a tall window, and in a small one.
TILE_PX = 88
SMALL_TILE_PX = 72
#: Opacity of the heat where strongest (fading with the value, the picture shows elsewhere).
HEAT_ALPHA = 0.6
#: Rows of tiles shown without scrolling: one in a window less tall than this, else two.
TWO_ROWS_MIN_WINDOW_HEIGHT = 900


def source_name(source: str | int) -> str:
    """How a tile names its image: the file name, or ``#12`` for a sample index."""
    return f"#{int(source)}" if isinstance(source, (int, np.integer)) else Path(str(source)).name


def tile_pictures(views: Sequence[Any]) -> list[np.ndarray]:
    """Each ``TopView``'s ``(S, S, 3)`` crop with its heat blended over it."""
    out = []
    for view in views:
        heat = np.nan_to_num(np.asarray(view.heat, dtype=np.float32), nan=0.0)
        peak = float(heat.max()) if heat.size else 0.0
        heat = np.clip(heat / peak, 0.0, 1.0) if peak > 0 else np.zeros_like(heat)
        base = np.asarray(view.image, dtype=np.float32)[..., :3]
        alpha = (HEAT_ALPHA * heat)[..., None]
        blend = (1 - alpha) * base + alpha * colorize(heat, OVERLAY_CMAP).astype(np.float32)
        out.append(np.clip(blend + 0.5, 0, 255).astype(np.uint8))
    return out


class TopKGrid(QtWidgets.QWidget):
    """A channel's top-k tiles under a caption (``tiles.picked``: path or sample index)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self, spacing=1, contentsMargins=QtCore.QMargins(0, 2, 0, 0))
        # One line cut with "…": it must not widen the channel view.
        self.caption = style.caption_text(lines=1)
        layout.addWidget(self.caption)
        self.tiles = style.ThumbList(TILE_PX)
        self.tiles.setUniformItemSizes(True)
        self.tiles.setWordWrap(True)
        self.tiles.setToolTip("Click an image to open it as the input")
        font = self.tiles.font()
        font.setPointSize(style.LABEL_POINT_SIZE)
        self.tiles.setFont(font)
        # The images above keep the height: the tiles take the rows they need, one or two.
        self.tiles.setSizePolicy(
            QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Fixed
        )
        self.tiles.setVerticalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        layout.addWidget(self.tiles)
        #: The views shown (the engine's TopView objects), in tile order.
        self.views: tuple[Any, ...] = ()
        self._tile_px = 0
        self.clear()

    def set_message(self, text: str) -> None:
        """Show ``text`` on the caption line (the tiles stay)."""
        self.caption.setText(text)

    def set_views(self, views: Sequence[Any], caption: str = "") -> None:
        """Show ``views`` (best first) as tiles captioned with value and image name."""
        self.views = tuple(views)
        self.tiles.clear()
        for view, picture in zip(self.views, tile_pictures(self.views), strict=True):
            entry, value = view.entry, style.format_value(view.entry.value)
            at = entry.location
            where = "" if at is None else f" at (y={at[0]}, x={at[1]})"
            # Grey: its file is gone or changed since the scan; nothing to open.
            missing = getattr(view, "missing", "")
            item = self.tiles.add(
                entry.source,
                f"{value}\n{source_name(entry.source)}",
                f"{entry.source}\nmax {value}{where}\n" + (missing or "click: open as input"),
                style.rgb_pixmap(picture, TILE_PX, smooth=False),
                bool(missing),
            )
            item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignHCenter)
        self.caption.setText(caption)
        self._fit_height()

    def clear(self) -> None:
        """No tiles."""
        self.views = ()
        self.tiles.clear()
        self.caption.setText("")
        self._fit_height()

    def _tall(self) -> bool:
        window = self.window()
        return window is not None and window.height() >= TWO_ROWS_MIN_WINDOW_HEIGHT

    def rows_shown(self) -> int:
        """Rows of tiles shown without scrolling (one, or two in a tall window)."""
        grid = self.tiles.gridSize()
        per_row = max(1, (self.tiles.viewport().width() or self.width()) // max(1, grid.width()))
        return min(max(1, -(-self.tiles.count() // per_row)), 2 if self._tall() else 1)

    def _fit_height(self) -> None:
        side = TILE_PX if self._tall() else SMALL_TILE_PX
        if side != self._tile_px:
            self._tile_px = side
            self.tiles.setIconSize(QtCore.QSize(side, side))
            line = self.tiles.fontMetrics().height()
            # The grid holds the gaps (no spacing): rows fit the height exactly.
            self.tiles.setGridSize(QtCore.QSize(side + 12, side + 2 * line + 10))
        height = self.rows_shown() * self.tiles.gridSize().height() + 2 * self.tiles.frameWidth()
        if self.tiles.height() != height:
            self.tiles.setFixedHeight(height)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self._fit_height()

    def captions(self) -> list[str]:
        """The tiles' texts, in order (``"0.532\\nimg_3.png"``)."""
        return [self.tiles.item(i).text() for i in range(self.tiles.count())]

    def sources(self) -> list[str | int]:
        """The tiles' sources, in order."""
        return self.tiles.keys()
