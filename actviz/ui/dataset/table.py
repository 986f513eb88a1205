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
    """Rows = channels of one layer, columns = :data:`COLUMNS`."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.figures: LayerFigures | None = None

    def set_figures(self, figures: LayerFigures | None) -> None:
        self.beginResetModel()
        self.figures = figures
        self.endResetModel()

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
        row = index.row()
        if role == SORT_ROLE:
            value = self._value(key, row)
            # NaN (no entry) compares false both ways; below everything keeps sorting stable.
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
    """The sortable channel table of one layer, mean descending first (``channel_clicked``)."""

    channel_clicked = QtCore.Signal(str, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.table_model = ChannelTableModel(self)
        self.proxy = QtCore.QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.table_model)
        self.proxy.setSortRole(SORT_ROLE)
        self.setModel(self.proxy)
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

    def set_figures(self, figures: LayerFigures | None) -> None:
        """Show ``figures`` (None: empty), keeping the current sort."""
        self.table_model.set_figures(figures)

    @property
    def figures(self) -> LayerFigures | None:
        return self.table_model.figures

    def channel_at(self, row: int) -> int:
        """The channel shown on (sorted) row ``row``."""
        return self.proxy.mapToSource(self.proxy.index(row, 0)).row()

    def row_of(self, channel: int) -> int:
        """The (sorted) row showing ``channel``."""
        return self.proxy.mapFromSource(self.table_model.index(channel, 0)).row()

    def _on_clicked(self, index: QtCore.QModelIndex) -> None:
        f = self.figures
        if f is not None and index.isValid():
            self.channel_clicked.emit(f.layer, self.channel_at(index.row()))


__all__ = ["COLUMNS", "ChannelTable", "ChannelTableModel", "LayerFigures", "layer_figures"]
