"""Parameters and buffers of the module selected in the tree (shape, dtype, norm, mode)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from actviz.ui.tree.model import format_shape


class ModuleDetails(QWidget):
    """Parameters and buffers (shape, dtype, norm) of the selected module, and its mode."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.header = QLabel("Select a module to see its parameters.")
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.header)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["Name", "Kind", "Shape", "dtype", "L2 norm"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)

    def show_node(self, node: Any | None) -> None:
        """Show a :class:`~actviz.core.tree.ModuleNode` (None clears)."""
        self.table.setRowCount(0)
        if node is None:
            self.header.setText("Select a module to see its parameters.")
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
        rows = [("parameter", p) for p in node.parameters] + [("buffer", b) for b in node.buffers]
        self.table.setRowCount(len(rows))
        for r, (kind, info) in enumerate(rows):
            frozen = "" if kind == "buffer" or info.requires_grad else " (frozen)"
            values = [info.name, kind + frozen, format_shape(info.shape) or "scalar", info.dtype,
                      f"{info.norm:.4g}"]  # fmt: skip
            for c, text in enumerate(values):
                self.table.setItem(r, c, QTableWidgetItem(text))

    def row_texts(self) -> list[list[str]]:
        """The table's cells (tests and accessibility)."""
        return [
            [self.table.item(r, c).text() for c in range(self.table.columnCount())]
            for r in range(self.table.rowCount())
        ]


__all__ = ["ModuleDetails"]
