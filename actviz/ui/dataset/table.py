"""ChannelTable: a scanned layer's channels, sortable by mean, std, fraction > 0 and best value;
dead channels (never above zero) on a red row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style

_Qt = QtCore.Qt
#: Role holding a cell's number for sorting (NaN sorts last either way round).
SORT_ROLE = _Qt.ItemDataRole.UserRole + 1


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
    best = np.full(mean.shape, np.nan)
    for channel in range(mean.shape[0]):
        top = scan.top(layer, channel)
        if top:
            best[channel] = float(top[0].value)
    dead = np.zeros(mean.shape, dtype=bool)
    dead_index = np.asarray(scan.dead(layer))
    if dead_index.dtype == bool:
        dead = dead_index.copy()
    else:
        dead[dead_index.astype(int)] = True
    return LayerFigures(
        layer,
        mean,
        np.asarray(stats.std, dtype=np.float64),
        np.asarray(stats.frac_positive, dtype=np.float64),
        best,
        dead,
    )


COLUMNS = (
    ("channel", "ch", "channel index"),
    ("mean", "mean", "mean activation over the scanned images"),
    ("std", "std", "standard deviation over the scanned images"),
    ("frac_positive", "> 0", "fraction of images where the channel is above zero"),
    ("best", "best", "largest per-image maximum (the top image's value)"),
    ("dead", "dead", "never above zero on the scanned data"),
)


class ChannelTableModel(QtCore.QAbstractTableModel):
    """Rows = channels of one layer, columns = :data:`COLUMNS`, sorted here with numpy.

    The model sorts itself (``sort``: one ``argsort``) instead of sitting behind a
    ``QSortFilterProxyModel``: the proxy asks :meth:`data` once per comparison, some 20,000
    Python calls for a 1,000-channel layer, which held the GUI thread 150 ms when a scan's
    table filled (issue #37). Row ``r`` shows channel ``order[r]``.
    """

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.figures: LayerFigures | None = None
        self.order = np.zeros(0, dtype=np.int64)
        self.sort_column = 1
        self.sort_order = _Qt.SortOrder.DescendingOrder

    def set_figures(self, figures: LayerFigures | None) -> None:
        self.beginResetModel()
        self.figures = figures
        self.order = self._sorted(self.sort_column, self.sort_order)
        self.endResetModel()

    def sort(self, column: int, order: Any = _Qt.SortOrder.AscendingOrder) -> None:
        """Sort the rows by ``column`` (NaN as below everything), stable."""
        if not 0 <= column < len(COLUMNS):
            return
        self.layoutAboutToBeChanged.emit()
        # Persistent indexes (the selection) follow their channel to its new row.
        before = self.persistentIndexList()
        channels = [self.order[i.row()] if i.isValid() else -1 for i in before]
        self.sort_column, self.sort_order = column, order
        self.order = self._sorted(column, order)
        rows = np.empty_like(self.order)
        rows[self.order] = np.arange(self.order.shape[0])
        self.changePersistentIndexList(
            before,
            [
                self.index(int(rows[c]), i.column()) if c >= 0 else QtCore.QModelIndex()
                for i, c in zip(before, channels, strict=True)
            ],
        )
        self.layoutChanged.emit()

    def _sorted(self, column: int, order: Any) -> np.ndarray:
        f = self.figures
        if f is None:
            return np.zeros(0, dtype=np.int64)
        key = COLUMNS[column][0]
        n = f.channels
        values = np.arange(n, dtype=np.float64) if key == "channel" else getattr(f, key)
        values = np.where(np.isnan(values), -np.inf, np.asarray(values, dtype=np.float64))
        if order == _Qt.SortOrder.DescendingOrder:
            # Stable descending: ties keep channel order, as the proxy's sort did.
            return np.argsort(-values, kind="stable").astype(np.int64)
        return np.argsort(values, kind="stable").astype(np.int64)

    def channel_at(self, row: int) -> int:
        """The channel shown on row ``row``."""
        return int(self.order[row])

    def row_of(self, channel: int) -> int:
        """The row showing ``channel`` (-1: none)."""
        hits = np.flatnonzero(self.order == channel)
        return int(hits[0]) if hits.size else -1

    def rowCount(self, parent: Any = QtCore.QModelIndex()) -> int:  # noqa: N802, B008
        if parent.isValid() or self.figures is None:
            return 0
        return self.figures.channels

    def columnCount(self, parent: Any = QtCore.QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Any, role: int = _Qt.ItemDataRole.DisplayRole
    ) -> Any:  # noqa: N802
        if orientation != _Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        if role == _Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][1]
        if role == _Qt.ItemDataRole.ToolTipRole:
            return COLUMNS[section][2]
        return None

    def _value(self, key: str, row: int) -> float:
        f = self.figures
        assert f is not None
        return float(row) if key == "channel" else float(getattr(f, key)[row])

    def data(self, index: QtCore.QModelIndex, role: int = _Qt.ItemDataRole.DisplayRole) -> Any:
        f = self.figures
        if f is None or not index.isValid():
            return None
        key = COLUMNS[index.column()][0]
        row = int(self.order[index.row()])
        if role == SORT_ROLE:
            value = self._value(key, row)
            return -np.inf if np.isnan(value) else value
        if role == _Qt.ItemDataRole.DisplayRole:
            if key == "channel":
                return str(row)
            if key == "dead":
                return "dead" if f.dead[row] else ""
            value = self._value(key, row)
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
    """The sortable channel table of one layer, mean descending first (``channel_clicked``).

    One model for the table's life, refilled per layer; it sorts itself (no proxy).
    """

    channel_clicked = QtCore.Signal(str, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.table_model = ChannelTableModel(self)
        self.setModel(self.table_model)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(36)
        self.sortByColumn(1, _Qt.SortOrder.DescendingOrder)
        self.clicked.connect(self._on_clicked)

    @property
    def proxy(self) -> ChannelTableModel:
        """The model the view shows (sorted rows); kept under the proxy's old name."""
        return self.table_model

    def set_figures(self, figures: LayerFigures | None) -> None:
        """Show ``figures`` (None: empty), keeping the current sort."""
        self.table_model.set_figures(figures)

    @property
    def figures(self) -> LayerFigures | None:
        return self.table_model.figures

    def channel_at(self, row: int) -> int:
        """The channel shown on (sorted) row ``row``."""
        return self.table_model.channel_at(row)

    def row_of(self, channel: int) -> int:
        """The (sorted) row showing ``channel``."""
        return self.table_model.row_of(channel)

    def _on_clicked(self, index: QtCore.QModelIndex) -> None:
        f = self.figures
        if f is not None and index.isValid():
            self.channel_clicked.emit(f.layer, self.channel_at(index.row()))


__all__ = ["COLUMNS", "ChannelTable", "ChannelTableModel", "LayerFigures", "layer_figures"]
