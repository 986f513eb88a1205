"""A layout check of a shown actviz window: is everything on screen readable and whole?

:func:`layout_problems` lists what a user would see cut::

    problems = layout_problems(window)
    assert not problems, "\\n".join(map(str, problems))
"""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QCheckBox,
    QDockWidget,
    QLabel,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QTableView,
    QToolButton,
    QWidget,
)

#: Tiles of a layer's mosaic must be at least this wide on screen (or as wide as the maps
#: they show, when those are narrower), or pages must be offered.
MIN_TILE_PX = 32
#: Pixels of slack for rounding between scene and widget coordinates.
SLACK = 1.5
#: The Qt property (set True) of a view whose images should fill it: each aspect-locked image
#: in it must cover at least :data:`MIN_FILL` of the room its canvas gives it.
FILL_PROPERTY = "layoutFill"
#: Share of its canvas (less the colour bar) an image in a view to be filled covers at least.
#: A square map in the better of two arrangements of a square view covers about half.
MIN_FILL = 0.4
#: Maps longer than this many times their width are not held to :data:`MIN_FILL`: they leave
#: bands in any arrangement.
MAX_FILL_ASPECT = 3.0

__all__ = [
    "FILL_PROPERTY",
    "MIN_FILL",
    "MIN_TILE_PX",
    "LayoutProblem",
    "layout_problems",
    "widget_path",
]


@dataclasses.dataclass(frozen=True)
class LayoutProblem:
    """One thing cut off or squeezed: its ``kind`` ("image", "label", "cell", "tiles", "blank", a
    scroll bar...), the ``widget`` path (:func:`widget_path`) and the ``detail`` with sizes.
    """

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
    problems: list[LayoutProblem] = []
    problems += _canvas_problems(window)
    problems += _label_problems(window)
    problems += _button_problems(window)
    problems += _dock_problems(window)
    problems += _page_problems(window)
    problems += _cell_problems(window)
    problems += _tile_problems(window)
    problems += _blank_problems(window)
    return problems


# ---------------------------------------------------------------------- images, colour bars
def _inside(inner: QRectF, outer: QRectF) -> bool:
    return (
        inner.left() >= outer.left() - SLACK
        and inner.top() >= outer.top() - SLACK
        and inner.right() <= outer.right() + SLACK
        and inner.bottom() <= outer.bottom() + SLACK
    )


def _rect_text(r: QRectF | QRect) -> str:
    r = QRectF(r)
    return f"({r.left():.0f},{r.top():.0f})-({r.right():.0f},{r.bottom():.0f})"


def _canvas_problems(window: QWidget) -> list[LayoutProblem]:
    from actviz.ui.panels.canvas import ImageCanvas

    out = []
    for canvas in window.findChildren(ImageCanvas):
        if not _showing(canvas) or canvas._shape is None:
            continue
        where = widget_path(canvas)
        canvas.ensure_scene()  # off screen, its scene follows at the paint that shows it
        box = QRectF(canvas.rect())
        scene = canvas.ci.geometry().size().toSize()
        if abs(scene.width() - canvas.width()) > 1 or abs(scene.height() - canvas.height()) > 1:
            out.append(
                LayoutProblem(
                    "scene",
                    where,
                    f"scene {scene.width()}x{scene.height()} in a "
                    f"{canvas.width()}x{canvas.height()} canvas",
                )
            )
        height, width = canvas._shape[:2]
        image = canvas.view.mapViewToScene(QRectF(0, 0, width, height)).boundingRect()
        image = QRectF(canvas.mapFromScene(image).boundingRect())
        if not _inside(image, box):
            out.append(
                LayoutProblem(
                    "image",
                    where,
                    f"image at {_rect_text(image)} outside the canvas {_rect_text(box)}",
                )
            )
        bar = canvas.colorbar
        if bar is not None and bar.isVisible():
            rect = QRectF(canvas.mapFromScene(bar.sceneBoundingRect()).boundingRect())
            if not _inside(rect, box):
                out.append(
                    LayoutProblem(
                        "colour bar",
                        where,
                        f"colour bar at {_rect_text(rect)} outside the canvas {_rect_text(box)}",
                    )
                )
        clipped = _clipped_by(canvas)
        if clipped:
            out.append(LayoutProblem("clipped", where, clipped))
    return out


def _clipped_by(widget: QWidget) -> str:
    """How ``widget`` is cut by an ancestor or its scroll area's viewport ("" when whole)."""
    child: QWidget = widget
    parent = widget.parentWidget()
    while parent is not None and not parent.isWindow():
        rect = QRectF(QRect(widget.mapTo(parent, widget.rect().topLeft()), widget.size()))
        area = parent.parentWidget()
        if isinstance(area, QAbstractScrollArea) and area.viewport() is parent:
            box = QRectF(parent.rect())
            if rect.left() < box.left() - SLACK or rect.right() > box.right() + SLACK:
                return (
                    f"{_rect_text(rect)} sideways outside the viewport {_rect_text(box)} of "
                    f"{_name(area)}"
                )
            return ""
        if not isinstance(child, QWidget) or child.isWindow():
            return ""
        if not _inside(rect, QRectF(parent.rect())):
            return (
                f"{_rect_text(rect)} outside its parent {_name(parent)} {_rect_text(parent.rect())}"
            )
        child, parent = parent, parent.parentWidget()
    return ""


# ---------------------------------------------------------------------- labels, buttons
def _is_rich(label: QLabel) -> bool:
    fmt = label.textFormat()
    if fmt == Qt.TextFormat.RichText:
        return True
    return fmt == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(label.text())


def _label_problems(window: QWidget) -> list[LayoutProblem]:
    from actviz.ui.panels.style import ElidedLabel

    out = []
    for label in window.findChildren(QLabel):
        text = label.text()
        if not text or not _showing(label) or label.pixmap() is not None and not text:
            continue
        where = widget_path(label)
        room = label.contentsRect().width() - 2 * label.margin()
        if isinstance(label, ElidedLabel):
            shown = label.shown_text()
            if shown == text:
                continue
            # The tooltip is set as the shortened text is painted: one scrolled out of view
            # is not painted yet, and gets it when it is.
            painted = not label.visibleRegion().isEmpty()
            if painted and not label.toolTip():
                label.repaint()
            # A tooltip of the owner's own (a layer panel's title shows the layer's name) counts.
            if "…" not in shown or (painted and not label.toolTip()):
                out.append(
                    LayoutProblem(
                        "label",
                        where,
                        f"shortened to {shown!r} without "
                        + ("an ellipsis" if "…" not in shown else "a tooltip"),
                    )
                )
            continue
        if _is_rich(label):
            doc = QTextDocument()
            doc.setDocumentMargin(0)  # as QLabel lays rich text out
            doc.setDefaultFont(label.font())
            doc.setHtml(text)
            if label.wordWrap():
                doc.setTextWidth(room)
            needed_w, needed_h = doc.idealWidth(), doc.size().height()
            fits_w = label.wordWrap() or needed_w <= room + SLACK
            if not fits_w:
                out.append(LayoutProblem("label", where, f"needs {needed_w:.0f} px, has {room} px"))
            elif needed_h > label.contentsRect().height() + SLACK + 2:
                out.append(
                    LayoutProblem(
                        "label",
                        where,
                        f"needs {needed_h:.0f} px of height, has {label.contentsRect().height()}",
                    )
                )
            continue
        metrics = label.fontMetrics()
        if label.wordWrap():
            needed = label.heightForWidth(label.width())
            if needed > label.height() + SLACK:
                out.append(
                    LayoutProblem(
                        "label",
                        where,
                        f"wrapped text needs {needed} px of height, has {label.height()}",
                    )
                )
            continue
        needed = max(metrics.horizontalAdvance(line) for line in text.split("\n"))
        if needed > room + SLACK:
            out.append(
                LayoutProblem(
                    "label", where, f"text needs {needed} px, has {room} px (cut, no ellipsis)"
                )
            )
    return out


def _button_problems(window: QWidget) -> list[LayoutProblem]:
    out = []
    for button in window.findChildren(QAbstractButton):
        if not button.text() or not _showing(button):
            continue
        if isinstance(button, QToolButton):
            if button.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly:
                continue
        elif not isinstance(button, (QPushButton, QCheckBox, QRadioButton)):
            continue
        needed = button.sizeHint().width()
        if needed > button.width() + SLACK:
            out.append(
                LayoutProblem(
                    "button",
                    widget_path(button),
                    f"needs {needed} px, has {button.width()} px",
                )
            )
    return out


# ---------------------------------------------------------------------- docks, mosaics
def _dock_problems(window: QWidget) -> list[LayoutProblem]:
    out = []
    for dock in window.findChildren(QDockWidget):
        if not _showing(dock):
            continue
        for area in dock.findChildren(QAbstractScrollArea):
            bar = area.horizontalScrollBar()
            if _showing(area) and bar.isVisible() and bar.maximum() > 0:
                what = (
                    f"a horizontal scroll bar ({bar.maximum()} px to scroll) in a "
                    f"{dock.width()} px wide dock"
                )
                # A list or a tree wider than its dock is reported apart from the dock's own
                # content scrolling sideways: its columns can be resized by the user.
                kind = "dock scroll bar" if isinstance(area, QScrollArea) else "view scroll bar"
                out.append(LayoutProblem(kind, widget_path(area), what))
    return out


def _cell_problems(window: QWidget) -> list[LayoutProblem]:
    """Table cells in view drawn shortened without a tooltip saying them whole."""
    out = []
    for table in window.findChildren(QTableView):
        if not _showing(table) or table.model() is None:
            continue
        model, metrics = table.model(), table.fontMetrics()
        viewport = table.viewport().rect()
        for row in range(min(model.rowCount(), 200)):
            if table.isRowHidden(row):
                continue
            for col in range(model.columnCount()):
                if table.isColumnHidden(col):
                    continue
                index = model.index(row, col)
                rect = table.visualRect(index)
                if not rect.intersects(viewport) or table.columnSpan(row, col) > 1:
                    continue
                text = index.data(Qt.ItemDataRole.DisplayRole)
                if not isinstance(text, str) or not text.strip():
                    continue
                room = rect.width() - 2 * (
                    table.style().pixelMetric(
                        table.style().PixelMetric.PM_FocusFrameHMargin, None, table
                    )
                    + 1
                )
                needed = metrics.horizontalAdvance(text)
                if needed > room + SLACK and not index.data(Qt.ItemDataRole.ToolTipRole):
                    out.append(
                        LayoutProblem(
                            "cell",
                            widget_path(table),
                            f"{text[:40]!r} needs {needed} px, its column has {room} px "
                            "(shortened, no tooltip)",
                        )
                    )
    return out


def _page_problems(window: QWidget) -> list[LayoutProblem]:
    """A tab's page scrolling sideways (what lies right of its viewport is cut)."""
    out = []
    for area in window.findChildren(QScrollArea):
        if not _showing(area) or not area.widgetResizable() or _in_dock(area):
            continue
        bar = area.horizontalScrollBar()
        if bar.isVisible() and bar.maximum() > 0:
            out.append(
                LayoutProblem(
                    "page scroll bar",
                    widget_path(area),
                    f"content {area.widget().width()} px wide in a "
                    f"{area.viewport().width()} px wide page ({bar.maximum()} px out of view)",
                )
            )
    return out


def _in_dock(widget: QWidget) -> bool:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QDockWidget):
            return True
        parent = parent.parentWidget()
    return False


def _tile_problems(window: QWidget) -> list[LayoutProblem]:
    """Mosaics with tiles under :data:`MIN_TILE_PX` showing larger maps, with no page control."""
    from actviz.ui.panels.feature_map import LayerPanel

    out = []
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
            out.append(
                LayoutProblem(
                    "tiles",
                    f"LayerPanel {name!r}",
                    f"tiles {tile:.0f} px wide on screen (< {MIN_TILE_PX}) for {map_px} px wide "
                    "maps, and no page control",
                )
            )
    return out


def _blank_problems(window: QWidget) -> list[LayoutProblem]:
    """Images in a fill view laid across its shorter side, each under :data:`MIN_FILL` of it."""
    from actviz.ui.panels.canvas import ImageCanvas

    views = [w for w in window.findChildren(QWidget) if w.property(FILL_PROPERTY) is True]
    if window.property(FILL_PROPERTY) is True:
        views.append(window)
    out = []
    for view in views:
        if not _showing(view):
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
        tall = view.height() > view.width()
        if beside != tall:
            continue  # laid along the view's longer side
        across = (
            "side by side in a view taller than wide"
            if beside
            else "one above the other in a view wider than tall"
        )
        for canvas in canvases:
            _left, top, _right, bottom = canvas.ci.getContentsMargins()
            room_w = canvas.image_area_width()
            room_h = canvas.height() - top - bottom
            image = canvas.image_rect_on_screen()
            if room_w <= 0 or room_h <= 0 or image.isEmpty():
                continue
            cover = image.width() * image.height() / (room_w * room_h)
            if cover < MIN_FILL:
                bands = (
                    "beside"
                    if room_w - image.width() > room_h - image.height()
                    else "above and below"
                )
                out.append(
                    LayoutProblem(
                        "blank",
                        widget_path(canvas),
                        f"image {image.width():.0f}x{image.height():.0f} px covers "
                        f"{cover:.0%} of its {room_w}x{room_h:.0f} px canvas (< {MIN_FILL:.0%}): "
                        f"blank bands {bands} it, the images {across} "
                        f"({view.width()}x{view.height()})",
                    )
                )
    return out
