"""Parameters and buffers of the module selected in the tree (shape, dtype, norm, mode)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from actviz.ui.panels import style
from actviz.ui.tree.model import format_shape

#: A column of the details table is never shortened below this width.
MIN_COLUMN_PX = 36


def _shrink_to(wanted: list[int], room: int, floor: int) -> list[int]:
    """Widths of columns wanting ``wanted`` pixels in ``room``, the widest shortened first."""
    widths = list(wanted)
    excess = sum(widths) - room
    while excess > 0:
        widest = max(range(len(widths)), key=lambda c: widths[c])
        others = [w for c, w in enumerate(widths) if c != widest]
        target = max(floor, max(others, default=floor), widths[widest] - excess)
        if target >= widths[widest]:  # every column at the floor or equal: shorten evenly
            step = max(1, excess // len(widths))
            shrinkable = [c for c in range(len(widths)) if widths[c] > floor]
            if not shrinkable:
                break
            for c in shrinkable:
                cut = min(step, widths[c] - floor, excess)
                widths[c] -= cut
                excess -= cut
            continue
        excess -= widths[widest] - target
        widths[widest] = target
    return widths


class ModuleDetails(QWidget):
    """Parameters and buffers (shape, dtype, norm) of the selected module, and its mode."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = style.bare_box(self, vertical=True)
        self.header = QLabel("Select a module to see its parameters.")
        self.header.setWordWrap(True)
        # At the top of the pane also when the table under it is hidden.
        self.header.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.header)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["Name", "Kind", "Shape", "dtype", "L2 norm"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # Columns fit the table's width (fit_columns); a shortened cell has its text as tooltip.
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setMinimumSectionSize(MIN_COLUMN_PX)
        header.setStretchLastSection(False)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.table.viewport().installEventFilter(self)  # its width: columns follow it
        layout.addWidget(self.table, 1)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self.fit_columns()
        return super().eventFilter(watched, event)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self._fit_header()

    def _fit_header(self) -> None:
        # A wrapped label's height at its width, or a short pane cuts the summary's last line.
        needed = self.header.heightForWidth(max(1, self.header.width()))
        if needed > 0 and needed != self.header.minimumHeight():
            self.header.setMinimumHeight(needed)

    def fit_columns(self) -> None:
        """Give each column its contents' width, shortening the widest (never scroll sideways)."""
        table = self.table
        header = table.horizontalHeader()
        room = table.viewport().width()
        count = table.columnCount()
        if room <= 0 or count == 0:
            return
        wanted = [max(table.sizeHintForColumn(c), header.sectionSizeHint(c)) for c in range(count)]
        widths = _shrink_to(wanted, room, MIN_COLUMN_PX)
        widths[-1] = max(MIN_COLUMN_PX, room - sum(widths[:-1]))
        for c, width in enumerate(widths):
            header.resizeSection(c, width)

    def show_node(self, node: Any | None) -> None:
        """Show a :class:`~actviz.core.tree.ModuleNode` (None clears)."""
        self.table.setRowCount(0)
        if node is None:
            self.header.setText("Select a module to see its parameters.")
            self.table.setVisible(False)
            return
        mode = "train mode" if node.training else "eval mode"
        lines = [
            f"<b>{node.name or '(model)'}</b> · {node.type_name} · {mode}",
            f"{node.own_params:,} own parameters · {node.total_params:,} in total",
        ]
        if node.output_shape is not None:
            calls = f" · called {node.calls}×" if node.calls > 1 else ""
            lines.append(f"output {format_shape(node.output_shape)}{calls}")
        if node.extra_repr:
            lines.append(f"<span style='color:#5f6368'>{node.extra_repr}</span>")
        self.header.setText("<br>".join(lines))
        self._fit_header()
        rows = [("parameter", p) for p in node.parameters] + [("buffer", b) for b in node.buffers]
        # No parameters of its own: no empty table under the summary.
        self.table.setVisible(bool(rows))
        self.table.setRowCount(len(rows))
        for r, (kind, info) in enumerate(rows):
            frozen = "" if kind == "buffer" or info.requires_grad else " (frozen)"
            values = [info.name, kind + frozen, format_shape(info.shape) or "scalar", info.dtype,
                      f"{info.norm:.4g}"]  # fmt: skip
            for c, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                self.table.setItem(r, c, item)
        self.fit_columns()

    def row_texts(self) -> list[list[str]]:
        """The table's cells (tests and accessibility)."""
        return [
            [self.table.item(r, c).text() for c in range(self.table.columnCount())]
            for r in range(self.table.rowCount())
        ]
