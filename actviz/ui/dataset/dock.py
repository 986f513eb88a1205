"""DatasetDock (passive): the scan's summary and progress, and the per-layer channel table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSignalBlocker, QSize, Signal
from PySide6.QtWidgets import QDockWidget, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from actviz.ui.background_loads import format_eta
from actviz.ui.dataset.table import ChannelTable, LayerFigures
from actviz.ui.panels import style
from actviz.ui.panels.overlay import MiddleElidedComboBox

#: Width the dock asks for (the table's six columns stay readable).
PREFERRED_WIDTH = 330
#: Skipped files named in the dock's note; the rest are counted (all are in its tooltip).
SKIPPED_NAMED = 3


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
        layout = QVBoxLayout(body, spacing=4)
        layout.setContentsMargins(4, 4, 4, 4)
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
        self.message_label = style.caption_label(wrap=True)
        self.message_label.setVisible(False)
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
        self.set_message(
            text,
            error=bool(text),
            tooltip="\n".join([f"{path}: {reason}" for path, reason in skipped] + notes),
        )

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

    def set_layers(self, layers: Sequence[str], current: str | None = None) -> None:
        """The scanned layers to choose from (the table follows the chosen one)."""
        with QSignalBlocker(self.layer_combo):
            self.layer_combo.clear()
            self.layer_combo.addItems(list(layers))
            if current in layers:
                self.layer_combo.setCurrentText(current)

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
        self.set_layers([])
        self.table.set_figures(None)
        self.stop_progress()
        self.set_message("")
        self.hint_label.setText("Click a channel: its top images in the channel view")
