"""Help > Plugins: every plugin found, its status and contributions, and a tick to disable it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from actviz.workspace.plugin_registry import PluginRecord, PluginRegistry

COLUMNS = ("Enabled", "Plugin", "Version", "Contributes", "Status")


def status_text(record: PluginRecord, disabled: set[str]) -> str:
    """What the Status column says."""
    if record.status == "active":
        return "disabled at next start" if record.name in disabled else "loaded"
    if record.status == "disabled":
        return "enabled at next start" if record.name not in disabled else "disabled"
    if record.status == "refused":
        return "refused: " + record.error
    return record.error or record.status


class PluginsDialog(QDialog):
    """The plugins of ``registry``; ``set_enabled(record, on)`` when a tick changes."""

    def __init__(
        self,
        registry: PluginRegistry,
        disabled: Callable[[], set[str]],
        set_enabled: Callable[[PluginRecord, bool], None],
        parent: QWidget | None = None,
        *,
        note: str = "",
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Plugins — actviz")
        self.registry = registry
        self._disabled = disabled
        self._set_enabled = set_enabled
        layout = QVBoxLayout(self)
        self.note = QLabel(
            note
            or "Plugins are Python packages with an \u201cactviz.plugins\u201d entry point "
            "(pip install them). Untick one to disable it; it stays off at the next start."
        )
        self.note.setWordWrap(True)
        self._note = self.note.text()
        layout.addWidget(self.note)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        layout.addWidget(self.table, 1)
        layout.addWidget(QLabel("Details"))
        self.details = QPlainTextEdit(readOnly=True)
        self.details.setPlaceholderText("The traceback of a plugin that failed.")
        layout.addWidget(self.details, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.table.itemChanged.connect(self._on_item_changed)
        self.table.currentCellChanged.connect(lambda row, *_: self._show_details(row))
        self.resize(760, 420)
        self.refresh()

    def refresh(self) -> None:
        """List the registry's plugins as they are now."""
        disabled = self._disabled()
        records = self.registry.records
        # An empty table alone reads as "still loading" or "broken": say there are none.
        none = (
            "\n\nNo plugin is installed. A plugin is a small package: docs/plugins.md in actviz's "
            "repository goes from an empty folder to a view in the window in three files."
        )
        self.note.setText(self._note + ("" if records else none))
        self.table.blockSignals(True)
        self.table.setRowCount(len(records))
        for row, record in enumerate(records):
            tick = QTableWidgetItem()
            tick.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
            on = record.name not in disabled
            tick.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
            self.table.setItem(row, 0, tick)
            cells = (record.name, record.version, record.contributions_text())
            for col, text in enumerate((*cells, status_text(record, disabled)), start=1):
                item = QTableWidgetItem(text)
                item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
                item.setToolTip(text)
                self.table.setItem(row, col, item)
        self.table.blockSignals(False)
        self.table.resizeColumnsToContents()
        self._show_details(self.table.currentRow())

    def row_texts(self) -> list[tuple[str, ...]]:
        """Each row's cells (the tick as "on" / "off"), for tests and scripts."""
        rows = []
        for row in range(self.table.rowCount()):
            tick = self.table.item(row, 0).checkState() == Qt.CheckState.Checked
            rows.append(
                ("on" if tick else "off",)
                + tuple(self.table.item(row, c).text() for c in range(1, len(COLUMNS)))
            )
        return rows

    def set_ticked(self, row: int, on: bool) -> None:
        """Tick or untick row ``row`` as a click does."""
        state = Qt.CheckState.Checked if on else Qt.CheckState.Unchecked
        self.table.item(row, 0).setCheckState(state)

    def _show_details(self, row: int) -> None:
        records = self.registry.records
        if 0 <= row < len(records):
            record = records[row]
            self.details.setPlainText(record.details or record.error)
        else:
            failed = [r for r in records if r.details]
            self.details.setPlainText("\n\n".join(f"{r.name}:\n{r.details}" for r in failed))

    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if item.column() != 0:
            return
        record = self.registry.records[item.row()]
        self._set_enabled(record, item.checkState() == Qt.CheckState.Checked)
        self.refresh()
