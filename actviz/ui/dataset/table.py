"""ChannelTable: a scanned layer's channels, sortable; dead channels (never > 0) on red rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style

_Qt = QtCore.Qt


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


COLUMNS = (
    ("channel", "ch", "channel index"),
    ("mean", "mean", "mean activation over the scanned images"),
    ("std", "std", "standard deviation over the scanned images"),
    ("frac_positive", "> 0", "fraction of images where the channel is above zero"),
    ("best", "best", "largest per-image maximum (the top image's value)"),
    ("dead", "dead", "never above zero on the scanned data"),
)


class ChannelTableModel(QtCore.QAbstractTableModel):
    """Rows: one layer's channels (row ``r``: ``order[r]``); columns: :data:`COLUMNS`. Sorted by
    one ``argsort`` (a ``QSortFilterProxyModel`` calls :meth:`data` per comparison)."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.figures: LayerFigures | None = None
        self.order = np.zeros(0, dtype=np.int64)
        self.sort_column, self.sort_order = 1, _Qt.SortOrder.DescendingOrder

    def set_figures(self, figures: LayerFigures | None) -> None:
        self.beginResetModel()
        self.figures = figures
        self.order = self._sorted(self.sort_column, self.sort_order)
        self.endResetModel()

    def sort(self, column: int, order: Any = _Qt.SortOrder.AscendingOrder) -> None:
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
        sign = -1.0 if order == _Qt.SortOrder.DescendingOrder else 1.0  # ties: channel order
        return np.argsort(sign * values, kind="stable")

    def row_of(self, channel: int) -> int:
        """The row showing ``channel``."""
        return int(np.flatnonzero(self.order == channel)[0])

    def rowCount(self, parent: Any = QtCore.QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() or self.figures is None else self.figures.channels

    def columnCount(self, parent: Any = QtCore.QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Any, role: int = _Qt.ItemDataRole.DisplayRole
    ) -> Any:  # noqa: N802
        if orientation != _Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        part = {_Qt.ItemDataRole.DisplayRole: 1, _Qt.ItemDataRole.ToolTipRole: 2}.get(role)
        return None if part is None else COLUMNS[section][part]

    def data(self, index: QtCore.QModelIndex, role: int = _Qt.ItemDataRole.DisplayRole) -> Any:
        f = self.figures
        if f is None or not index.isValid():
            return None
        key = COLUMNS[index.column()][0]
        row = int(self.order[index.row()])
        if role == _Qt.ItemDataRole.DisplayRole:
            if key == "channel":
                return str(row)
            if key == "dead":
                return "dead" if f.dead[row] else ""
            value = float(getattr(f, key)[row])
            if key == "frac_positive":
                return f"{100 * value:.0f} %"
            return "—" if np.isnan(value) else style.format_value(value)
        if role == _Qt.ItemDataRole.TextAlignmentRole:
            return int(_Qt.AlignmentFlag.AlignRight | _Qt.AlignmentFlag.AlignVCenter)
        if role == _Qt.ItemDataRole.BackgroundRole and f.dead[row]:
            return QtGui.QBrush(QtGui.QColor(style.ROW_BAD_BACKGROUND))
        if role == _Qt.ItemDataRole.ToolTipRole and f.dead[row]:
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
        self.sortByColumn(1, _Qt.SortOrder.DescendingOrder)
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
        f = self.table_model.figures
        if f is not None and index.isValid():
            self.channel_clicked.emit(f.layer, self.channel_at(index.row()))
