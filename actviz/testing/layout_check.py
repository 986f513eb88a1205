"""A layout check of a shown actviz window: :func:`layout_problems` lists what a user would
see cut, clipped or squeezed::

    problems = layout_problems(window)
    assert not problems, "\\n".join(map(str, problems))"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from PySide6 import QtWidgets
from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QAbstractButton, QDockWidget, QLabel, QScrollArea, QWidget

from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.panels.style import ElidedLabel

#: Least on-screen width of a mosaic's tiles (or their maps', if narrower) without pages offered.
MIN_TILE_PX = 32
#: Pixels of slack for rounding between scene and widget coordinates.
SLACK = 1.5
#: The Qt property (True) of a view whose aspect-locked images must fill :data:`MIN_FILL`.
FILL_PROPERTY = "layoutFill"
#: Least share of its canvas (less the colour bar) such an image covers (a square map: ~half).
MIN_FILL = 0.4
#: Maps longer than this many times their width leave bands anyway: not held to MIN_FILL.
MAX_FILL_ASPECT = 3.0
_TEXT_BUTTONS = (
    QtWidgets.QToolButton,
    QtWidgets.QPushButton,
    QtWidgets.QCheckBox,
    QtWidgets.QRadioButton,
)
_ICON_ONLY = Qt.ToolButtonStyle.ToolButtonIconOnly
#: What a check yields: a problem's kind, widget path and detail.
Found = Iterator[tuple[str, str, str]]


@dataclasses.dataclass(frozen=True)
class LayoutProblem:
    """One thing cut off or squeezed: its ``kind`` ("image", "label", "cell", "tiles", "blank", a
    scroll bar...), the ``widget`` path (:func:`widget_path`) and the ``detail`` with sizes."""

    kind: str
    widget: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.widget}: {self.detail}"


def widget_path(widget: QWidget, depth: int = 4) -> str:
    """``widget`` and a few named ancestors, e.g. ``editsDock > QLabel 'features.block1…'``."""
    parts = [_name(widget)]
    parent = widget.parentWidget()
    while parent is not None and len(parts) < depth:
        name = parent.objectName()
        layer = getattr(parent, "name", None)
        if isinstance(parent, QDockWidget):
            parts.append(name or parent.windowTitle() or "dock")
            break
        kind = type(parent).__name__
        if isinstance(layer, str) and kind.endswith("Panel"):
            parts.append(f"{kind} {layer!r}")
        elif name and not name.startswith("qt_"):
            parts.append(name)
        elif kind.endswith(("Panel", "View")) and not kind.startswith("Q"):
            parts.append(kind)
        parent = parent.parentWidget()
    return " < ".join(parts)


def _name(widget: QWidget) -> str:
    text = widget.text() if isinstance(widget, (QLabel, QAbstractButton)) else ""
    name = widget.objectName()
    out = type(widget).__name__
    if name and not name.startswith("qt_"):
        out += f" #{name}"
    if text:
        out += f" {text[:60]!r}"
    return out


def _showing(widget: QWidget) -> bool:
    return widget.isVisible() and widget.width() > 0 and widget.height() > 0


def layout_problems(window: QWidget) -> list[LayoutProblem]:
    """Everything cut off, clipped or squeezed among a shown, settled ``window``'s widgets."""
    checks = (_canvases, _labels, _buttons, _scroll_bars, _cells, _tiles, _blanks)
    return [LayoutProblem(*found) for check in checks for found in check(window)]


def _inside(inner: QRectF, outer: QRectF) -> bool:
    return outer.adjusted(-SLACK, -SLACK, SLACK, SLACK).contains(inner)


def _rect_text(r: QRectF | QRect) -> str:
    r = QRectF(r)
    return f"({r.left():.0f},{r.top():.0f})-({r.right():.0f},{r.bottom():.0f})"


def _canvases(window: QWidget) -> Found:
    for canvas in window.findChildren(ImageCanvas):
        if not _showing(canvas) or canvas._shape is None:
            continue
        where = widget_path(canvas)
        canvas.ensure_scene()  # off screen, its scene follows at the paint that shows it
        box = QRectF(canvas.rect())
        scene = canvas.ci.geometry().size().toSize()
        if abs(scene.width() - canvas.width()) > 1 or abs(scene.height() - canvas.height()) > 1:
            size = f"{canvas.width()}x{canvas.height()}"
            yield "scene", where, f"scene {scene.width()}x{scene.height()} in a {size} canvas"
        height, width = canvas._shape[:2]
        drawn = [("image", canvas.view.mapViewToScene(QRectF(0, 0, width, height)).boundingRect())]
        if (bar := canvas.colorbar) is not None and bar.isVisible():
            drawn.append(("colour bar", bar.sceneBoundingRect()))
        for kind, rect in drawn:
            rect = QRectF(canvas.mapFromScene(rect).boundingRect())
            if not _inside(rect, box):
                outside = f"{kind} at {_rect_text(rect)} outside the canvas {_rect_text(box)}"
                yield kind, where, outside
        if clipped := _clipped_by(canvas):
            yield "clipped", where, clipped


def _clipped_by(widget: QWidget) -> str:
    """How ``widget`` is cut by an ancestor or its scroll area's viewport ("" when whole)."""
    parent = None if widget.isWindow() else widget.parentWidget()
    while parent is not None and not parent.isWindow():
        rect = QRectF(QRect(widget.mapTo(parent, widget.rect().topLeft()), widget.size()))
        area = parent.parentWidget()
        if isinstance(area, QtWidgets.QAbstractScrollArea) and area.viewport() is parent:
            box = QRectF(parent.rect())
            if rect.left() < box.left() - SLACK or rect.right() > box.right() + SLACK:
                viewport = f"the viewport {_rect_text(box)} of {_name(area)}"
                return f"{_rect_text(rect)} sideways outside {viewport}"
            return ""
        if not _inside(rect, QRectF(parent.rect())):
            outer = f"{_name(parent)} {_rect_text(parent.rect())}"
            return f"{_rect_text(rect)} outside its parent {outer}"
        parent = parent.parentWidget()
    return ""


def _labels(window: QWidget) -> Found:
    for label in window.findChildren(QLabel):
        if label.text() and _showing(label) and (cut := _label_cut(label)):
            yield "label", widget_path(label), cut


def _label_cut(label: QLabel) -> str:
    """How ``label``'s text does not fit ("" when it does)."""
    text = label.text()
    room = label.contentsRect().width() - 2 * label.margin()
    if isinstance(label, ElidedLabel):
        if (shown := label.shown_text()) == text or shown.split() == text.split():
            return ""  # (runs of spaces closed up: nothing of the text is lost)
        # The tooltip is set at the paint: a label scrolled out of view has none yet.
        painted = not label.visibleRegion().isEmpty()
        if painted and not label.toolTip():
            label.repaint()
        # A tooltip of the owner's own (a layer panel's title shows the layer's name) counts.
        if "…" not in shown:
            return f"shortened to {shown!r} without an ellipsis"
        untipped = painted and not label.toolTip()
        return f"shortened to {shown!r} without a tooltip" if untipped else ""
    fmt, rich = label.textFormat(), Qt.TextFormat.RichText
    if fmt == rich or (fmt == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(text)):
        width = room if label.wordWrap() else -1  # as QLabel lays rich text out
        doc = QTextDocument(documentMargin=0, defaultFont=label.font(), textWidth=width)
        doc.setHtml(text)
        needed_w, needed_h = doc.idealWidth(), doc.size().height()
        if not label.wordWrap() and needed_w > room + SLACK:
            return f"needs {needed_w:.0f} px, has {room} px"
        if needed_h > label.contentsRect().height() + SLACK + 2:
            return f"needs {needed_h:.0f} px of height, has {label.contentsRect().height()}"
        return ""
    if label.wordWrap():
        if (needed := label.heightForWidth(label.width())) > label.height() + SLACK:
            return f"wrapped text needs {needed} px of height, has {label.height()}"
        return ""
    needed = max(label.fontMetrics().horizontalAdvance(line) for line in text.split("\n"))
    cut = needed > room + SLACK
    return f"text needs {needed} px, has {room} px (cut, no ellipsis)" if cut else ""


def _buttons(window: QWidget) -> Found:
    for button in window.findChildren(QAbstractButton):
        if not button.text() or not _showing(button) or not isinstance(button, _TEXT_BUTTONS):
            continue
        if isinstance(button, QtWidgets.QToolButton) and button.toolButtonStyle() == _ICON_ONLY:
            continue
        if (needed := button.sizeHint().width()) > button.width() + SLACK:
            yield "button", widget_path(button), f"needs {needed} px, has {button.width()} px"


def _scroll_bars(window: QWidget) -> Found:
    """A dock's content, a list or table in a dock, or a tab's page scrolling sideways."""
    for area in window.findChildren(QtWidgets.QAbstractScrollArea):
        bar = area.horizontalScrollBar()
        if not _showing(area) or not bar.isVisible() or bar.maximum() <= 0:
            continue
        dock = area.parentWidget()
        while dock is not None and not isinstance(dock, QDockWidget):
            dock = dock.parentWidget()
        if dock is not None:
            if _showing(dock):
                # A wide list or tree is told apart: the user can resize its columns.
                kind = "dock scroll bar" if isinstance(area, QScrollArea) else "view scroll bar"
                what = f"({bar.maximum()} px to scroll) in a {dock.width()} px wide dock"
                yield kind, widget_path(area), f"a horizontal scroll bar {what}"
        elif isinstance(area, QScrollArea) and area.widgetResizable():
            wide = f"content {area.widget().width()} px wide in a {area.viewport().width()} px wide"
            out = f"{bar.maximum()} px out of view"
            yield "page scroll bar", widget_path(area), f"{wide} page ({out})"


def _cells(window: QWidget) -> Found:
    """Table cells in view drawn shortened without a tooltip saying them whole."""
    for table in window.findChildren(QtWidgets.QTableView):
        if not _showing(table) or table.model() is None:
            continue
        model, metrics = table.model(), table.fontMetrics()
        viewport = table.viewport().rect()
        style = table.style()
        margin = 2 * (style.pixelMetric(style.PixelMetric.PM_FocusFrameHMargin, None, table) + 1)
        cols = [c for c in range(model.columnCount()) if not table.isColumnHidden(c)]
        for row in (r for r in range(min(model.rowCount(), 200)) if not table.isRowHidden(r)):
            for col in cols:
                index = model.index(row, col)
                rect = table.visualRect(index)
                if not rect.intersects(viewport) or table.columnSpan(row, col) > 1:
                    continue
                text = index.data(Qt.ItemDataRole.DisplayRole)
                if not isinstance(text, str) or not text.strip():
                    continue
                room, needed = rect.width() - margin, metrics.horizontalAdvance(text)
                if needed > room + SLACK and not index.data(Qt.ItemDataRole.ToolTipRole):
                    detail = f"{text[:40]!r} needs {needed} px, its column has {room} px"
                    yield "cell", widget_path(table), f"{detail} (shortened, no tooltip)"


def _tiles(window: QWidget) -> Found:
    """Mosaics with tiles under :data:`MIN_TILE_PX` showing larger maps, with no page control."""
    host = getattr(window, "host", None)  # the explorer window's: its layer panels
    panels: dict[str, Any] = (host.layer_panels if host is not None else {}) or {}
    for name, panel in panels.items():
        if not isinstance(panel, LayerPanel) or not _showing(panel):
            continue
        slot = panel.activation_slot
        canvas, mosaic = slot.image_canvas, slot.mosaic
        if mosaic is None or canvas is None or not _showing(canvas):
            continue
        tile = canvas.grid.tile_screen_px()
        # The map's width in its own pixels (a downsampled mosaic's tile covers `scale` each).
        map_px = mosaic.tile_w * mosaic.scale
        shrunk = tile + SLACK < map_px
        if 0 < tile < MIN_TILE_PX and shrunk and not panel.page_bar.isVisible():
            detail = f"tiles {tile:.0f} px wide on screen (< {MIN_TILE_PX}) for {map_px} px wide"
            yield "tiles", f"LayerPanel {name!r}", f"{detail} maps, and no page control"


def _blanks(window: QWidget) -> Found:
    """Images in a fill view laid across its shorter side, each under :data:`MIN_FILL` of it."""
    for view in (window, *window.findChildren(QWidget)):
        if view.property(FILL_PROPERTY) is not True or not _showing(view):
            continue
        canvases = []
        for canvas in view.findChildren(ImageCanvas):
            shape = canvas._shape
            if not _showing(canvas) or shape is None or not canvas._lock_aspect:
                continue
            height, width = shape[:2]
            if max(height, width) <= MAX_FILL_ASPECT * max(min(height, width), 1):
                canvases.append(canvas)
        if len(canvases) < 2:
            continue
        tops = [c.mapTo(view, c.rect().topLeft()) for c in canvases]
        beside = max(p.y() for p in tops) - min(p.y() for p in tops) < canvases[0].height() / 2
        if beside != (view.height() > view.width()):
            continue  # laid along the view's longer side
        across = "side by side in a view taller than wide"
        if not beside:
            across = "one above the other in a view wider than tall"
        for canvas in canvases:
            _left, top, _right, bottom = canvas.ci.getContentsMargins()
            room_w, room_h = canvas.image_area_width(), canvas.height() - top - bottom
            image = canvas.image_rect_on_screen()
            if room_w <= 0 or room_h <= 0 or image.isEmpty():
                continue
            if (cover := image.width() * image.height() / (room_w * room_h)) < MIN_FILL:
                wide = room_w - image.width() > room_h - image.height()
                bands = "beside" if wide else "above and below"
                size = f"{image.width():.0f}x{image.height():.0f}"
                share = f"{cover:.0%} of its {room_w}x{room_h:.0f} px canvas (< {MIN_FILL:.0%})"
                laid = f"the images {across} ({view.width()}x{view.height()})"
                detail = f"image {size} px covers {share}: blank bands {bands} it, {laid}"
                yield "blank", widget_path(canvas), detail
