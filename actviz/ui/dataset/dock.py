"""The dataset feature's passive widgets: DatasetDock (the scan's summary, progress, channel
table) and TopKGrid (a channel's top-k images, cropped around the maximum, heat overlaid)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import QMargins, QSize, Qt, Signal
from PySide6.QtWidgets import QDockWidget, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from actviz.display.colormaps import OVERLAY_CMAP, colorize
from actviz.ui.background_loads import format_eta
from actviz.ui.host import refill_combo
from actviz.ui.panels import style
from actviz.ui.panels.overlay import MiddleElidedComboBox

PREFERRED_WIDTH = 330  #: Width the dock asks for (the table's six columns stay readable).
#: Skipped files named in the dock's note; the rest are counted (all are in its tooltip).
SKIPPED_NAMED = 3
#: The channel table's columns: (figure, header, header tooltip).
COLUMNS = (
    ("channel", "ch", "channel index"),
    ("mean", "mean", "mean activation over the scanned images"),
    ("std", "std", "standard deviation over the scanned images"),
    ("frac_positive", "> 0", "fraction of images where the channel is above zero"),
    ("best", "best", "largest per-image maximum (the top image's value)"),
    ("dead", "dead", "never above zero on the scanned data"),
)
#: Side of a tile on screen (pixels) in a tall window, and in a small one.
TILE_PX, SMALL_TILE_PX = 88, 72
#: Opacity of the heat where strongest (fading with the value, the picture shows elsewhere).
HEAT_ALPHA = 0.6
#: Rows of tiles shown without scrolling: one in a window less tall than this, else two.
TWO_ROWS_MIN_WINDOW_HEIGHT = 900


def progress_text(done: int, total: int, images_per_s: float, eta: float) -> str:
    """``"120 / 2,000 images · 85.3 images/s · ETA 0:22"``."""
    rate = f"{images_per_s:.1f} images/s" if images_per_s > 0 else "starting…"
    return f"{done:,} / {total:,} images · {rate} · ETA {format_eta(eta)}"


def is_partial(scan: Any) -> bool:
    """Whether ``scan`` covers only part of its data (it was cancelled)."""
    return int(scan.count) + len(scan.skipped) < len(scan.sources)


def kept(scan: Any) -> int:
    """Images kept per channel: the scan's k, or all when it scanned fewer."""
    return min(int(scan.k), int(scan.count))


def skipped_text(skipped: tuple[tuple[str, str], ...]) -> str:
    """``"Skipped 3 unreadable files: a.png, b.jpg (cannot identify image file); c.txt (...)"``."""
    named = skipped[:SKIPPED_NAMED]
    groups: dict[str, list[str]] = {}
    for path, reason in named:
        name = Path(path).name
        text = str(reason)
        for who in (path, name):
            for quoted in (f"'{who}'", f'"{who}"', who):
                text = text.replace(quoted, "")
        text = " ".join(text.split()).strip(" :,") or "unreadable"
        groups.setdefault(text, []).append(name)
    listed = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in groups.items())
    more = len(skipped) - len(named)
    rest = f" and {more} more" if more > 0 else ""
    files = "file" if len(skipped) == 1 else "files"
    return f"Skipped {len(skipped)} unreadable {files}: {listed}{rest}."


class DatasetDock(QDockWidget):
    """What was scanned, the scan's progress and Cancel, channels by mean."""

    scan_clicked = Signal()
    cancel_clicked = Signal()
    layer_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Dataset", parent, objectName="datasetDock")
        body = QWidget()
        layout = QVBoxLayout(body, spacing=4, contentsMargins=QMargins(4, 4, 4, 4))
        top = QHBoxLayout()
        self.summary_label = style.title_label("No dataset scanned", point_size=9)
        self.scan_button = QPushButton("Scan…")
        self.scan_button.setToolTip("Scan a folder of images (Data > Scan a dataset…)")
        self.scan_button.clicked.connect(self.scan_clicked)
        top.addWidget(self.summary_label, 1)
        top.addWidget(self.scan_button)
        layout.addLayout(top)
        self.progress_box = QWidget(visible=False)
        row = style.bare_box(self.progress_box, spacing=1, vertical=True)
        bar_row = QHBoxLayout()
        self.progress_bar = style.ProgressBar(maximum=0, textVisible=False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the scan after its batch; scanning again resumes")
        self.cancel_button.clicked.connect(self.cancel_clicked)
        bar_row.addWidget(self.progress_bar, 1)
        bar_row.addWidget(self.cancel_button)
        row.addLayout(bar_row)
        # Wrapped, so a long rate line never widens the dock (that re-lays the panels out).
        self.rate_label = style.caption_label(wrap=True)
        row.addWidget(self.rate_label)
        layout.addWidget(self.progress_box)
        self.message_label = style.caption_label(wrap=True, visible=False)
        layout.addWidget(self.message_label)
        layer_row = QHBoxLayout()
        layer_row.addWidget(QLabel("Layer"))
        # Long names shortened in the middle, whole on hover; never widening the dock.
        self.layer_combo = MiddleElidedComboBox()
        style.fit_combo(self.layer_combo, 10)
        self.layer_combo.currentTextChanged.connect(
            lambda name: name and self.layer_chosen.emit(name)
        )
        layer_row.addWidget(self.layer_combo, 1)
        layout.addLayout(layer_row)
        self.table = ChannelTable()
        self.table.setToolTip(
            "Channels by mean activation over the scanned images; dead ones (never above "
            "zero) in red. Click a row to open the channel and its top images."
        )
        layout.addWidget(self.table, 1)
        self.hint_label = style.caption_label("Click a channel: its top images in the channel view")
        layout.addWidget(self.hint_label)
        self.setWidget(body)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt name
        return super().sizeHint().expandedTo(QSize(PREFERRED_WIDTH, 0))  # opens at it, kept

    def set_summary(self, text: str, tooltip: str = "") -> None:
        self.summary_label.setText(text)
        self.summary_label.setToolTip(tooltip or text)

    def show_scan(self, scan: Any, spec: Any) -> None:
        """The summary of ``scan`` (of ``spec``, None: unknown) and its notes."""
        folder = Path(spec.folder).name if spec else "dataset"
        saved = " (saved result)" if getattr(scan, "from_cache", False) else ""
        saved = " (partial)" if is_partial(scan) else saved
        self.set_summary(
            f"{folder}: {scan.count:,} image{'' if scan.count == 1 else 's'} · top {kept(scan)}"
            f"{saved}",
            f"{spec.folder if spec else ''}\n{scan.count} images, layers {', '.join(scan.layers)}"
            + (f"\ncache: {scan.cache_path}" if getattr(scan, "cache_path", None) else ""),
        )
        skipped = tuple(getattr(scan, "skipped", ()) or ())
        notes = list(getattr(scan, "warnings", ()) or ())
        # In the dock, not the banner: the scan itself succeeded.
        text = " ".join(([skipped_text(skipped)] if skipped else []) + notes)
        tip = "\n".join([f"{path}: {reason}" for path, reason in skipped] + notes)
        self.set_message(text, error=bool(text), tooltip=tip)

    def show_progress(self, done: int, total: int, images_per_s: float, eta: float) -> None:
        """Show the running scan's progress (a busy bar until the total is known)."""
        self.progress_box.setVisible(True)
        self.progress_bar.setRange(0, max(total, 0))  # 0: a busy bar
        if total > 0:
            self.progress_bar.setValue(min(done, total))
        self.rate_label.setText(progress_text(done, total, images_per_s, eta))

    def start_progress(self, text: str) -> None:
        """A scan began: busy bar, Cancel enabled, ``text`` under it."""
        self.show_progress(0, 0, 0.0, 0.0)
        self.cancel_button.setEnabled(True)
        self.rate_label.setText(text)

    def stop_progress(self) -> None:
        self.progress_box.setVisible(False)

    def set_cancelling(self) -> None:
        self.cancel_button.setEnabled(False)
        self.rate_label.setText("Cancelling after this batch…")

    def set_message(self, text: str, *, error: bool = False, tooltip: str = "") -> None:
        """A note under the summary (skipped files, failure); "" hides it."""
        self.message_label.setText(text)
        self.message_label.setToolTip(tooltip)
        self.message_label.setStyleSheet(f"color: {style.BAR_BAD if error else style.MUTED_TEXT}")
        self.message_label.setVisible(bool(text))

    def current_layer(self) -> str:
        return self.layer_combo.currentText()

    def set_figures(self, figures: LayerFigures | None) -> None:
        self.table.set_figures(figures)
        if figures is not None:
            dead = int(figures.dead.sum())
            text = f"{figures.channels} channels, {dead} dead · click one: its top images"
            self.hint_label.setText(text)

    def clear(self) -> None:
        """No scan (the model changed)."""
        self.set_summary("No dataset scanned")
        refill_combo(self.layer_combo, [])
        self.table.set_figures(None)
        self.stop_progress()
        self.set_message("")
        self.hint_label.setText("Click a channel: its top images in the channel view")


@dataclass(frozen=True)
class LayerFigures:
    """What the table shows of one layer: per-channel arrays, all of shape (C,)."""

    layer: str
    mean: np.ndarray
    std: np.ndarray
    frac_positive: np.ndarray
    best: np.ndarray
    dead: np.ndarray

    @property
    def channels(self) -> int:
        return int(self.mean.shape[0])


def layer_figures(scan: Any, layer: str) -> LayerFigures:
    """The per-channel figures of ``layer`` in ``scan`` (``best``: NaN without a top entry)."""
    stats = scan.stats(layer)
    mean = np.asarray(stats.mean, dtype=np.float64)
    tops = (scan.top(layer, channel) for channel in range(mean.shape[0]))
    best = np.array([float(top[0].value) if top else np.nan for top in tops], dtype=np.float64)
    dead = np.array(scan.dead(layer))
    if dead.dtype != bool:  # the dead channels' indices
        dead = np.isin(np.arange(mean.shape[0]), dead)
    std, frac = (np.asarray(v, dtype=np.float64) for v in (stats.std, stats.frac_positive))
    return LayerFigures(layer, mean, std, frac, best, dead)


class ChannelTableModel(QtCore.QAbstractTableModel):
    """Rows: one layer's channels (row ``r``: ``order[r]``); columns: :data:`COLUMNS`. Sorted by
    one ``argsort`` (a ``QSortFilterProxyModel`` calls :meth:`data` per comparison)."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.figures: LayerFigures | None = None
        self.order = np.zeros(0, dtype=np.int64)
        self.sort_column, self.sort_order = 1, Qt.SortOrder.DescendingOrder

    def set_figures(self, figures: LayerFigures | None) -> None:
        self.beginResetModel()
        self.figures = figures
        self.order = self._sorted(self.sort_column, self.sort_order)
        self.endResetModel()

    def sort(self, column: int, order: Any = Qt.SortOrder.AscendingOrder) -> None:
        """Sort the rows by ``column`` (NaN as below everything), stable."""
        self.layoutAboutToBeChanged.emit()
        before = self.persistentIndexList()  # the selection follows its channels
        cells = [(int(self.order[i.row()]), i.column()) for i in before]
        self.sort_column, self.sort_order = column, order
        self.order = self._sorted(column, order)
        self.changePersistentIndexList(before, [self.index(self.row_of(c), k) for c, k in cells])
        self.layoutChanged.emit()

    def _sorted(self, column: int, order: Any) -> np.ndarray:
        f, key = self.figures, COLUMNS[max(column, 0)][0]
        if f is None:
            return np.zeros(0, dtype=np.int64)
        values = np.arange(f.channels) if key == "channel" else getattr(f, key)
        values = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=-np.inf)
        sign = -1.0 if order == Qt.SortOrder.DescendingOrder else 1.0  # ties: channel order
        return np.argsort(sign * values, kind="stable")

    def row_of(self, channel: int) -> int:
        return int(np.flatnonzero(self.order == channel)[0])

    def rowCount(self, parent: Any = QtCore.QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() or self.figures is None else self.figures.channels

    def columnCount(self, parent: Any = QtCore.QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Any, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:  # noqa: N802
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        part = {Qt.ItemDataRole.DisplayRole: 1, Qt.ItemDataRole.ToolTipRole: 2}.get(role)
        return None if part is None else COLUMNS[section][part]

    def data(self, index: QtCore.QModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if (f := self.figures) is None or not index.isValid():
            return None
        key = COLUMNS[index.column()][0]
        row = int(self.order[index.row()])
        if role == Qt.ItemDataRole.DisplayRole:
            if key == "channel":
                return str(row)
            if key == "dead":
                return "dead" if f.dead[row] else ""
            value = float(getattr(f, key)[row])
            if key == "frac_positive":
                return f"{100 * value:.0f} %"
            return "—" if np.isnan(value) else style.format_value(value)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.BackgroundRole and f.dead[row]:
            return QtGui.QBrush(QtGui.QColor(style.ROW_BAD_BACKGROUND))
        if role == Qt.ItemDataRole.ToolTipRole and f.dead[row]:
            return f"channel {row} never fired (never above zero) on the scanned images"
        return None


class ChannelTable(QtWidgets.QTableView):
    """The sortable channel table of one layer, mean descending first (``channel_clicked``)."""

    channel_clicked = QtCore.Signal(str, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.table_model = ChannelTableModel(self)
        self.setModel(self.table_model)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(36)
        self.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.clicked.connect(self._on_clicked)

    def set_figures(self, figures: LayerFigures | None) -> None:
        """Show ``figures`` (None: empty), keeping the current sort."""
        self.table_model.set_figures(figures)

    def channel_at(self, row: int) -> int:
        """The channel shown on (sorted) row ``row``."""
        return int(self.table_model.order[row])

    def row_of(self, channel: int) -> int:
        """The (sorted) row showing ``channel``."""
        return self.table_model.row_of(channel)

    def _on_clicked(self, index: QtCore.QModelIndex) -> None:
        if (f := self.table_model.figures) is not None and index.isValid():
            self.channel_clicked.emit(f.layer, self.channel_at(index.row()))


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
        policy = QtWidgets.QSizePolicy.Policy
        self.tiles.setSizePolicy(policy.Preferred, policy.Fixed)
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
        self.set_views(())

    def _fit_height(self) -> None:
        """Tiles sized for the window; the rows they need shown (one, two in a tall window)."""
        window = self.window()
        tall = window is not None and window.height() >= TWO_ROWS_MIN_WINDOW_HEIGHT
        side = TILE_PX if tall else SMALL_TILE_PX
        if side != self._tile_px:
            self._tile_px = side
            self.tiles.setIconSize(QtCore.QSize(side, side))
            line = self.tiles.fontMetrics().height()
            # The grid holds the gaps (no spacing): rows fit the height exactly.
            self.tiles.setGridSize(QtCore.QSize(side + 12, side + 2 * line + 10))
        grid = self.tiles.gridSize()
        per_row = max(1, (self.tiles.viewport().width() or self.width()) // max(1, grid.width()))
        rows = min(max(1, -(-self.tiles.count() // per_row)), 2 if tall else 1)
        height = rows * grid.height() + 2 * self.tiles.frameWidth()
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
