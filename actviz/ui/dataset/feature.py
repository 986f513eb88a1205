"""The window's dataset part: Data > Scan a dataset…, the Dataset dock, and a channel's top-k
images under the channel view (a click opens one as the input)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt

from actviz.ui.background_loads import format_eta
from actviz.ui.dataset import dock as dataset_dock
from actviz.ui.dataset.dialog import DEFAULT_K, ScanDialog, ScanSpec
from actviz.ui.dataset.dock import PREFERRED_WIDTH, DatasetDock, TopKGrid, kept, source_name
from actviz.ui.dataset.scans import DatasetScans
from actviz.ui.file_dialogs import open_folder
from actviz.ui.host import FeatureBase, WindowHost, refill_combo
from actviz.ui.panels import style
from actviz.ui.worker import Job

log = logging.getLogger(__name__)

BANNER_SOURCE = "scan"  #: The banner's source for scan messages.
#: Settings keys of the last scan's folder, k and layers.
FOLDER_KEY, K_KEY, LAYERS_KEY = "dataset/folder", "dataset/k", "dataset/layers"
TOP_NAMED = 5  #: Top images named in the dock for a channel without maps to open.


class ChannelOpening:
    """Opens channels of ``scans`` in the channel view, running the layer first when needed
    (on the channel's best image without an input)."""

    def __init__(self, host: Any, scans: Any, dock: Any) -> None:
        self.host, self.session = host, host.session
        self.scans, self.dock = scans, dock
        #: (layer, channel) to open once the run that captures its layer finished.
        self.pending: tuple[str, int] | None = None
        #: A channel's top image is being opened as the input, to run and open the channel.
        self.awaiting_input = False
        host.run_finished.connect(self._on_run_finished)
        host.input_loaded.connect(self._on_input_loaded)
        host.input_load_failed.connect(lambda _text: self.awaiting_input and self.forget())

    def open(self, layer: str, channel: int) -> bool:
        """Open ``channel`` of ``layer`` now (True) or once its layer ran (False)."""
        self.host.show_tab(None)
        self.pending = None
        if self.host.open_channel(layer, channel):
            return True
        if (result := self.session.result) is not None and layer in result.layers:
            # Shown, but not as maps: running again would open nothing either.
            self._say_no_maps(layer, channel)
            return False
        self.pending = (layer, int(channel))
        if not self.session.is_ticked(layer):
            self.session.set_ticked([layer], True)
        if self.session.input is None and self._open_top_image(layer, channel):
            return False  # the run follows the image (see _on_input_loaded)
        if self.host.run() is None:
            self.pending = None
        return False

    def forget(self) -> None:
        """Open nothing when the run or input asked for ends (another model came)."""
        self.pending, self.awaiting_input = None, False

    def _open_top_image(self, layer: str, channel: int) -> bool:
        """No input yet: open the channel's best image (then run); False when there is none."""
        if not self.scans.covers(layer):
            return False
        if not (top := self.scans.scan.top(layer, channel)) or not isinstance(top[0].source, str):
            return False
        self.awaiting_input = True
        return self.host.open_input_source(top[0].source, remember=False)

    def _on_input_loaded(self, _source: str) -> None:
        if self.awaiting_input:
            self.awaiting_input = False
            if self.pending is not None and self.host.run() is None:
                self.pending = None

    def _on_run_finished(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None and not self.host.open_channel(*pending):
            self._say_no_maps(*pending)

    def _say_no_maps(self, layer: str, channel: int) -> None:
        """Say in the dock that ``layer``'s channel cannot open large (maps only)."""
        result = self.session.result
        shape = getattr(result.layers.get(layer) if result is not None else None, "shape", None)
        what = f" (its output is {tuple(shape)})" if shape else ""
        text = f"{layer} ch {channel} has no maps to open large{what}."
        if self.scans.covers(layer) and (top := self.scans.scan.top(layer, channel)[:TOP_NAMED]):
            named = ", ".join(
                f"{source_name(e.source)} ({style.format_value(e.value)})" for e in top
            )
            text += f" Its top images: {named}."
        self.dock.set_message(text)


class DatasetScanUI(FeatureBase, QObject):
    """Scan dialog, Dataset dock and top-k grid of one window."""

    name = "dataset"

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        self.scans = DatasetScans(host, self)
        self.dialog: ScanDialog | None = None
        self._store = host.settings.store
        self._last_folder = str(self._store.value(FOLDER_KEY, "") or "")
        self._last_k = _as_int(self._store.value(K_KEY, DEFAULT_K), DEFAULT_K)
        # Whether the scan under way was asked for (Scan…), not a saved one shown on opening.
        self._asked_scan = False
        #: (layer, channel) the grid shows or waits for.
        self._grid_key: tuple[str, int] | None = None

        self.dock = DatasetDock(host.dialog_parent())
        # Docked on the right, closed until a scan starts (widened when it opens).
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea)
        self.grid = TopKGrid()
        self.grid.setVisible(False)
        self.channel_view = host.channel_view
        self.channel_view.add_section(self.grid)

        tip = "Run the model over a folder of images and find each channel's top images"
        self.scan_action = host.add_action("Data", "Scan a dataset…", self.open_dialog, tip)
        tip = "Show a scan saved in a folder (scan.json): its top images, statistics and atlas"
        host.add_action("Data", "Open a saved scan…", self.open_saved_scan, tip)
        self.dock.scan_clicked.connect(self.open_dialog)
        self.dock.cancel_clicked.connect(self.cancel)
        self.dock.layer_chosen.connect(self._show_layer)
        self.dock.table.channel_clicked.connect(self.open_channel)
        self.grid.tiles.picked.connect(self._on_grid_source_clicked)
        self.channel_view.channel_changed.connect(self._on_channel_changed)
        s = self.scans
        s.scan_started.connect(self._on_scan_started)
        s.scan_progressed.connect(self.dock.show_progress)
        s.scan_finished.connect(self._on_scan_finished)
        s.scan_failed.connect(self._on_scan_failed)
        s.scan_cancelled.connect(self._on_scan_cancelled)
        s.views_ready.connect(self._on_views_ready)
        s.views_failed.connect(self._on_views_failed)
        s.views_cancelled.connect(self._on_views_cancelled)
        self.opening = ChannelOpening(host, self.scans, self.dock)
        self.listen(self.session.model_changed, self._on_model_changed)

    @property
    def scan(self) -> Any:
        """The scan the dock and the grid show (None before one finished)."""
        return self.scans.scan

    def open_saved_scan(self, folder: str | None = None) -> bool:
        """Show the scan saved in ``folder`` (None: ask); False if none or one is running."""
        if self.scans.is_scanning():
            self.host.show_warning("A scan is running: cancel it first.", BANNER_SOURCE)
            return False
        if folder is None:
            if not (folder := open_folder(self.host.dialog_parent(), "Open a saved scan")):
                return False
        from actviz.data.scan_file import open_scan

        try:
            scan = open_scan(folder)
        except (OSError, ValueError, KeyError) as exc:
            self.host.show_warning(f"No saved scan in {folder}: {exc}", BANNER_SOURCE)
            return False
        self.scans.show_saved(scan)
        return True

    def open_dialog(self) -> ScanDialog | None:
        """Show the Scan a dataset dialog (non-modal) and return it; None without a model."""
        if self.session.model is None:
            self.host.show_warning("Open a model first, then scan a dataset.", BANNER_SOURCE)
            return None
        if self._refuse_text_model():
            return None
        if self.dialog is not None:
            self.dialog.raise_()
            return self.dialog
        dialog = ScanDialog(
            self.host.dialog_parent(),
            self._layers(),
            self.session.ticked,
            folder=self._last_folder,
            k=self.scans.spec.k if self.scans.spec else self._last_k,
        )
        dialog.scan_requested.connect(self.start)
        dialog.finished.connect(lambda _code: self._on_dialog_finished(dialog))
        self.dialog = dialog
        dialog.open()
        if self.scans.num_workers != 0:
            # Start the loaders' fork server while the user picks a folder.
            from actviz.data.fork_server import prestart

            prestart()
        return dialog

    def _refuse_text_model(self) -> bool:
        """Say so and return True when the session's model cannot take the scan's images."""
        problem = self.session.input_problem(source="images") if self.session.model else ""
        if problem:
            self.host.show_warning(problem, BANNER_SOURCE)
        return bool(problem)

    def _layers(self) -> list[str]:
        """Every layer of the session's model, in model order (what a scan may scan)."""
        tree = self.session.tree
        return [n.name for n in tree if n.name] if tree else []

    def start(self, spec: ScanSpec) -> Job | None:
        """Scan ``spec`` in the background; returns the scan's job (None: not started)."""
        if self.host.is_closed() or self._refuse_text_model():
            return None
        self._last_folder, self._last_k = spec.folder, spec.k
        self._store.setValue(FOLDER_KEY, spec.folder)
        self._store.setValue(K_KEY, spec.k)
        self._store.setValue(LAYERS_KEY, ",".join(spec.layers))
        return self.scans.start(spec)

    def is_busy(self) -> bool:
        """True while a scan runs or a channel's top images are made (Esc stops both)."""
        return self.scans.is_scanning() or self.scans.views_worker.has_current_job()

    def cancel(self) -> bool:
        """Stop the running scan after its batch (what it did is kept; a new scan resumes) and
        the top images being made."""
        views = self.scans.views_worker.cancel()  # at its next model pass
        if not self.scans.cancel():
            return views
        self.dock.set_cancelling()
        return True

    def open_channel(self, layer: str, channel: int) -> bool:
        """Open ``channel`` of ``layer`` (ticked and run first if needed); True if opened now."""
        return self.opening.open(layer, channel)

    def stop(self) -> None:
        """Stop the scan and views (waited for)."""
        self.scans.shutdown()
        if self.dialog is not None:
            self.dialog.close()

    def _on_scan_started(self, spec: ScanSpec) -> None:
        self._asked_scan, dock, name = True, self.dock, Path(spec.folder).name
        self.host.clear_messages(BANNER_SOURCE)
        # Filled and widened before it shows: the window's centre is laid out once, not for each.
        dock.set_message("")
        dock.set_summary(f"{name}: scanning…", spec.folder)
        dock.start_progress(f"Scanning {name}…")
        self.host.refresh_busy()
        # Widened when it opens, never while shown: the width is then the user's.
        if not dock.isVisible() and dock.width() < PREFERRED_WIDTH and not dock.isFloating():
            self.host.resize_dock(dock, PREFERRED_WIDTH)
        dock.show()
        dock.raise_()

    def _on_scan_finished(self, scan: Any) -> None:
        asked = self._asked_scan
        # A partial scan is a saved one, shown when the model opened.
        partial = "A partial scan, saved when it was cancelled: Scan… the folder to finish it."
        self._scan_ended(scan, partial if dataset_dock.is_partial(scan) else None)
        # A scan asked for shows its end even in a closed dock; a saved one found waits there.
        if asked and not self.dock.isVisible():
            self.dock.show()

    def _scan_ended(self, scan: Any, text: str | None, *, error: bool = False) -> None:
        """A scan ended: ``scan`` shown (None: none), ``text`` under it (None: its own notes)."""
        self._asked_scan = False
        self.host.refresh_busy()  # Esc cancels a scan only while one runs
        self.dock.stop_progress()
        if scan is not None:
            self._show_scan(scan)
        elif error:
            self.dock.set_summary("No dataset scanned")
        if text is not None:
            self.dock.set_message(text, error=error)

    def _show_scan(self, scan: Any) -> None:
        self.dock.show_scan(scan, self.scans.spec)
        layers = tuple(scan.layers)
        # The layer shown stays, else the channel view's, else the first.
        shown = [n for n in (self.dock.current_layer(), self.channel_view.name) if n in layers]
        refill_combo(self.dock.layer_combo, layers, next(iter([*shown, *layers]), None))
        self._show_layer(self.dock.current_layer())
        self._grid_key = None  # The channel open now gets its grid from the new scan.
        if self.channel_view.channel is not None:
            self._on_channel_changed(self.channel_view.name, self.channel_view.channel)

    def _on_scan_failed(self, text: str) -> None:
        self._scan_ended(self.scans.scan, text, error=True)  # the scan shown before stays
        self.host.show_error(text, BANNER_SOURCE)

    def _on_scan_cancelled(self) -> None:
        done, total, _ips = self.scans.progress
        where = f" after {done:,} of {total:,} images" if total else ""
        text = f"Scan cancelled{where}; its work is saved: scanning the same folder again resumes."
        self._scan_ended(self.scans.scan, text)

    def _show_layer(self, layer: str) -> None:
        if (scan := self.scans.scan) is None or not layer or layer not in tuple(scan.layers):
            self.dock.set_figures(None)
            return
        try:
            self.dock.set_figures(dataset_dock.layer_figures(scan, layer))
        except Exception as exc:  # noqa: BLE001 - a layer without figures must not break the dock
            log.exception("no figures for %s", layer)
            self.dock.set_message(f"No channel figures for {layer}: {exc}", error=True)

    def _on_model_changed(self) -> None:
        # A scan of the model before stops with it, and says so.
        stopped = self.scans.spec if self.scans.is_scanning() else None
        self.scans.forget()
        self.dock.clear()
        if stopped is not None:
            self.host.refresh_busy()  # Esc no longer has a scan to stop
            self.dock.set_message(
                f"The scan of {Path(stopped.folder).name} stopped: another model was opened. "
                "The batches scanned are saved for the model before; Scan… scans the folder "
                "with this one."
            )
        self.opening.forget()
        self._grid_key = None
        self.grid.clear()
        self.grid.setVisible(False)
        if self.dialog is not None:  # open on the model before: its layers are this one's now
            self.dialog.set_layers(self._layers(), self.session.ticked)
        self.show_saved()

    def show_saved(self) -> Job | None:
        """Show the last folder's saved scan, running nothing; the job (None: nothing)."""
        layers = tuple(n for n in str(self._store.value(LAYERS_KEY, "") or "").split(",") if n)
        return self._peek(self._last_folder, layers, self._last_k) if self._last_folder else None

    def _peek(self, folder: str, layers: tuple[str, ...], k: int) -> Job | None:
        """Show the saved scan of ``layers`` in ``folder`` (None: those are gone)."""
        tree = self.session.tree
        if not layers or tree is None or any(name not in tree for name in layers):
            return None
        return self.scans.peek(ScanSpec(folder, layers, k)) if Path(folder).is_dir() else None

    def session_part(self) -> dict[str, Any]:
        """The scan shown's cache key and spec, so opening the session shows it again."""
        spec, scan = self.scans.spec, self.scan
        if spec is None or scan is None:
            return {}
        key = getattr(scan, "cache_path", None)
        return {
            "scan_key": str(key) if key else None,
            "dataset": {"folder": spec.folder, "layers": list(spec.layers), "k": int(spec.k)},
        }

    def report_part(self) -> dict[str, Any]:
        """Each scanned layer's top-k contact sheet, made when the report is written."""
        scan, model = self.scan, self.session.loaded_model or self.session.model
        if scan is None or model is None:
            return {}

        def sheets(should_stop: Callable[[], bool], progress: Callable[[str], None]) -> Any:
            from actviz.data.scan_file import contact_sheet

            made, began, n = {}, time.perf_counter(), len(scan.layers)
            for i, layer in enumerate(scan.layers):  # a wide layer's sheet takes seconds
                eta = format_eta((time.perf_counter() - began) * (n - i) / i if i else -1.0)
                progress(f"Report: the scan's top images of {layer} ({i + 1}/{n}, ETA {eta})")
                made[layer] = contact_sheet(model, scan, layer, should_stop=should_stop)
            return made

        return {"scan_sheets": sheets}

    def restore_session_part(self, parts: Any) -> Job | None:
        """Show a session's scan again from its saved arrays, running nothing; the job or None."""
        if not isinstance(saved := parts.get("dataset"), dict):
            return None
        folder, layers = str(saved.get("folder", "")), tuple(saved.get("layers") or ())
        return self._peek(folder, layers, _as_int(saved.get("k"), DEFAULT_K))

    def _on_channel_changed(self, layer: str, channel: int) -> None:
        if channel < 0 or not self.scans.covers(layer):
            self._grid_key = None
            self.grid.setVisible(False)
            return
        key = (layer, int(channel))
        if key == self._grid_key:
            return  # the same channel with a new run's values: the dataset's images stay
        self._grid_key = key
        self._select_in_table(layer, channel)
        self.grid.setVisible(True)
        self.grid.clear()
        text = f"Top {kept(self.scans.scan)} dataset images of ch {channel}: computing…"
        self.grid.set_message(text)
        self.scans.request_views(layer, channel)
        self.host.refresh_busy()  # Esc stops the top images while they are made

    def _select_in_table(self, layer: str, channel: int) -> None:
        """The table follows the channel view: its layer, the channel's row selected."""
        if self.dock.current_layer() != layer:
            refill_combo(self.dock.layer_combo, tuple(self.scans.scan.layers), layer)
            self._show_layer(layer)
        table = self.dock.table
        figures = table.table_model.figures
        if figures is not None and figures.layer == layer and 0 <= channel < figures.channels:
            row = table.row_of(channel)
            table.selectRow(row)
            table.scrollTo(table.model().index(row, 0))

    def _on_views_ready(self, layer: str, channel: int, views: tuple[Any, ...]) -> None:
        self.host.refresh_busy()
        if (layer, channel) != self._grid_key:
            return
        scan, spec = self.scans.scan, self.scans.spec
        folder = Path(spec.folder).name if spec else "the dataset"
        caption = f"Top {len(views)} of {scan.count:,} images in {folder} · click one to open it"
        if gone := sum(bool(getattr(v, "missing", "")) for v in views):
            caption += f" · {gone} gone or changed since the scan (grey)"
        self.grid.set_views(views, caption)

    def _on_views_failed(self, layer: str, channel: int, text: str) -> None:
        self.host.refresh_busy()
        if (layer, channel) == self._grid_key:
            self.grid.set_message(f"Could not make the top images: {text}")

    def _on_views_cancelled(self, layer: str, channel: int) -> None:
        self.host.refresh_busy()
        if (layer, channel) == self._grid_key:
            self._grid_key = None  # the same channel opened again makes them again
            self.grid.set_message(f"Cancelled: open ch {channel} again to make its top images.")

    def _on_grid_source_clicked(self, source: Any) -> None:
        if not isinstance(source, str):
            text = f"Sample {source_name(source)} is not a file to open."
            return self.host.show_warning(text, BANNER_SOURCE)
        self.host.open_input_source(source)

    def _on_dialog_finished(self, dialog: ScanDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()


def _as_int(value: object, default: int) -> int:
    try:
        return max(1, int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default
