"""Data > Scan a dataset in the real window: dialog, progress, cancel and resume, the channel
table with dead channels, and the channel's top-k grid (clicking a tile opens the image).

The folder is 16 tiny PNGs written in tmp_path; the model is the bundled demo (its own
preprocessing, as a single run) or a tiny CNN with a channel made dead on purpose.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from PySide6.QtCore import Qt
from torch import nn

from actviz.data import scan as engine_scan
from actviz.display.colormaps import OVERLAY_CMAP, colorize
from actviz.testing import assert_no_hooks
from actviz.ui.dataset import scans as scans_module
from actviz.ui.dataset.dialog import ScanSpec
from actviz.ui.dataset.dock import (
    HEAT_ALPHA,
    format_eta,
    progress_text,
    skipped_text,
    tile_pictures,
)
from actviz.ui.dataset.scans import eta_seconds, model_bytes
from tests.ui.dataset.scan_folders import IMAGES, TIMEOUT_MS, Gate, write_folder

LEFT = Qt.MouseButton.LeftButton
LAYER = "features.block2"
BATCH = 4


def _progress(win) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    win.dataset.scans.scan_progressed.connect(
        lambda done, total, _ips, _eta: seen.append((done, total))
    )
    return seen


def _demo_window(actviz_window):
    """A window on the demo model (opened and run), scanning in process."""
    win = actviz_window()
    win.dataset.in_process()  # no loader processes for 16 tiny images
    assert win.window.files.open_model_source("demo", wait=True)
    return win


def _click_row(qtbot, table, row: int) -> None:
    index = table.table_model.index(row, 0)
    table.scrollTo(index)
    qtbot.mouseClick(table.viewport(), LEFT, pos=table.visualRect(index).center())


def test_dialog_scans_a_folder_with_progress_and_the_table_lists_channels(
    qtbot, actviz_window, tmp_path
):
    win = _demo_window(actviz_window)
    window = win.window
    folder = tmp_path / "images"
    write_folder(folder, broken=True)
    win.dataset.feature.scan_action.trigger()
    dialog = win.dataset.feature.dialog
    assert dialog is not None and dialog.isVisible()
    # The window's ticked layers come first, checked.
    ticked = window.session.ticked
    assert dialog.checked_layers() == [n for n in dialog.checked_layers() if n in ticked]
    assert set(dialog.checked_layers()) == set(ticked)
    # Nothing chosen: said in the dialog, which stays open.
    qtbot.mouseClick(dialog.scan_button, LEFT)
    assert dialog.isVisible() and "folder" in dialog.message_label.text()
    dialog.folder_edit.setText(str(folder))
    dialog.set_checked([LAYER])
    dialog.k_spin.setValue(4)
    dialog.batch_spin.setValue(BATCH)
    seen = _progress(win)
    with qtbot.waitSignal(win.dataset.scans.scan_finished, timeout=TIMEOUT_MS) as done:
        qtbot.mouseClick(dialog.scan_button, LEFT)
    scan = done.args[0]
    assert win.dataset.feature.dialog is None  # closed (and deleted) once the scan started
    # One report per batch of 4 readable images (the unreadable file counts as done too).
    assert seen and all(total == IMAGES + 1 for _, total in seen)
    assert seen[-1][0] == IMAGES + 1 and len(seen) >= IMAGES // BATCH
    assert (scan.layers, scan.k, scan.count, scan.from_cache) == ((LAYER,), 4, IMAGES, False)
    # The same result as the engine on the demo (its own preprocessing), without the window.
    direct = engine_scan("demo", folder, [LAYER], k=4, cache=False, num_workers=0)
    for channel in (0, 5, 31):
        assert [(e.source, e.location) for e in scan.top(LAYER, channel)] == [
            (e.source, e.location) for e in direct.top(LAYER, channel)
        ]
    dock = win.dataset.dock
    assert dock.isVisible() and not dock.progress_box.isVisible()
    assert f"{IMAGES} images" in dock.summary_label.text()
    assert dock.message_label.text().startswith("Skipped 1 unreadable file: broken.png")
    # Channels by mean activation, largest first.
    table = dock.table
    stats = scan.stats(LAYER)
    assert table.table_model.rowCount() == stats.mean.shape[0] == 32
    order = [table.channel_at(r) for r in range(table.table_model.rowCount())]
    assert sorted(order) == list(range(32)) and np.all(np.diff(stats.mean[order]) <= 0)
    first = table.table_model.index(0, 1).data()
    assert first == f"{stats.mean[order[0]]:.3f}"
    # Sorting by the best value (the top image's) puts the largest maximum first.
    table.sortByColumn(4, Qt.SortOrder.DescendingOrder)
    best = table.channel_at(0)
    assert scan.top(LAYER, best)[0].value == max(scan.top(LAYER, c)[0].value for c in range(32))
    # The same folder again: the saved result, no forward pass.
    again = win.dataset.scan_and_wait(ScanSpec(str(folder), (LAYER,), 4, BATCH), TIMEOUT_MS)
    assert again.from_cache and "saved result" in dock.summary_label.text()
    assert_no_hooks(window.session.model)
    # Opening the model again (a restart, too: the folder is in the settings) shows the saved
    # result at once, running nothing.
    seen.clear()
    with qtbot.waitSignal(win.dataset.scans.scan_finished, timeout=TIMEOUT_MS) as saved:
        assert window.files.open_model_source("demo", wait=True)
    assert saved.args[0].from_cache and saved.args[0].count == IMAGES and seen == []
    assert "saved result" in dock.summary_label.text() and table.table_model.rowCount() == 32
    # The next dialog (also after a restart: the window's settings) offers the same folder.
    assert window.settings.store.value("dataset/folder") == str(folder)
    dialog = win.dataset.open_dialog()
    assert (dialog.folder_edit.text(), dialog.k_spin.value()) == (str(folder), 4)
    dialog.reject()
    # View > Reset window layout closes the dock (on the right, where it first opens).
    window.commands.reset_layout_action.trigger()
    assert not dock.isVisible()
    assert window.dockWidgetArea(dock) == Qt.DockWidgetArea.RightDockWidgetArea


def _gated_folder(window, tmp_path):
    """A folder of images and a :class:`Gate` on the window's model (remove the handle)."""
    folder = tmp_path / "images"
    write_folder(folder)
    gate = Gate(window.session.model)
    return folder, gate, window.session.model.register_forward_pre_hook(gate)


def test_escape_stops_a_scan_too(qtbot, actviz_window, tmp_path):
    win = _demo_window(actviz_window)
    window = win.window
    folder, gate, handle = _gated_folder(window, tmp_path)
    seen = _progress(win)
    try:
        assert not window.commands.cancel_action.isEnabled()  # nothing to cancel yet
        win.dataset.start(ScanSpec(str(folder), (LAYER,), 3, BATCH))
        qtbot.waitUntil(gate.entered.is_set, timeout=TIMEOUT_MS)
        # Only a scan runs: the window's busy bar stays hidden, but Esc is live.
        assert window.commands.cancel_action.isEnabled() and not window.is_busy()
        assert window.commands.cancel_action.shortcut().toString() == "Esc"
        with qtbot.waitSignal(win.dataset.scans.scan_cancelled, timeout=TIMEOUT_MS):
            window.activateWindow()
            qtbot.keyClick(window, Qt.Key.Key_Escape)
            assert win.dataset.dock.rate_label.text() == "Cancelling after this batch…"
            gate.active = False
            gate.open.set()
        assert seen == [(4, 16)]
        assert win.dataset.scan.count == 4
        qtbot.waitUntil(lambda: not window.commands.cancel_action.isEnabled(), timeout=TIMEOUT_MS)
    finally:
        gate.open.set()
        handle.remove()


def test_cancel_stops_the_scan_and_a_later_scan_resumes(qtbot, actviz_window, tmp_path):
    win = _demo_window(actviz_window)
    window = win.window
    folder, gate, handle = _gated_folder(window, tmp_path)
    spec = ScanSpec(str(folder), (LAYER,), 3, BATCH)
    seen = _progress(win)
    dock = win.dataset.dock
    try:
        win.dataset.start(spec)
        # The first batch waits at the gate; the window is not blocked meanwhile: it runs
        # captures on its own model (the scan has a copy, so their hooks never mix).
        qtbot.waitUntil(gate.entered.is_set, timeout=TIMEOUT_MS)
        assert win.dataset.scans.is_scanning() and dock.progress_box.isVisible()
        assert dock.rate_label.text() == "Scanning images…"
        assert dock.summary_label.text() == "images: scanning…"
        window.script.set_input(torch.rand(1, 3, 64, 64))
        with qtbot.waitSignal(window.run_finished, timeout=TIMEOUT_MS):
            assert window.runs.run() is not None
        assert set(window.session.result.layers) == set(window.session.ticked)
        assert win.dataset.scans.is_scanning() and seen == []
        with qtbot.waitSignal(win.dataset.scans.scan_cancelled, timeout=TIMEOUT_MS):
            qtbot.mouseClick(dock.cancel_button, LEFT)
            assert dock.rate_label.text() == "Cancelling after this batch…"
            gate.active = False
            gate.open.set()
        assert seen == [(4, 16)]  # stopped after the batch it was in
        assert not dock.progress_box.isVisible()
        partial = win.dataset.scan
        assert partial.count == 4 and "partial" in dock.summary_label.text()
        assert "cancelled after 4 of 16" in dock.message_label.text()
        # Opening the model again shows the saved partial scan at once (nothing is run).
        with qtbot.waitSignal(win.dataset.scans.scan_finished, timeout=TIMEOUT_MS) as saved:
            assert window.files.open_model_source("demo", wait=True)
        assert saved.args[0].count == 4 and seen == [(4, 16)]
        assert "partial" in dock.summary_label.text() and "finish" in dock.message_label.text()
        # Scanning again resumes at image 5.
        seen.clear()
        resumed = win.dataset.scan_and_wait(spec, TIMEOUT_MS)
    finally:
        handle.remove()
    assert seen == [(8, 16), (12, 16), (16, 16)]
    whole = engine_scan("demo", folder, [LAYER], k=3, cache=False, num_workers=0)
    assert resumed.count == whole.count == IMAGES
    for channel in range(0, 32, 7):
        got, want = resumed.top(LAYER, channel), whole.top(LAYER, channel)
        assert [(e.index, e.location) for e in got] == [(e.index, e.location) for e in want]
        np.testing.assert_allclose([e.value for e in got], [e.value for e in want], rtol=1e-5)
    np.testing.assert_allclose(resumed.stats(LAYER).mean, whole.stats(LAYER).mean, rtol=1e-5)


class DeadNet(nn.Module):
    """conv (4 ch) -> relu -> pool -> fc; channel 2's bias keeps it below zero everywhere."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 3)
        with torch.no_grad():
            self.conv.bias[2] = -100.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.relu(self.conv(x))).flatten(1))


def test_table_marks_the_dead_channel_and_a_row_opens_it(
    qtbot, actviz_window, tmp_path, monkeypatch
):
    win = actviz_window()
    window = win.window
    win.dataset.in_process()  # no loader processes for 16 tiny images
    folder = tmp_path / "images"
    write_folder(folder)
    window.script.set_model(DeadNet().eval(), layers=["relu"])
    window.script.set_input(torch.rand(1, 3, 24, 24))
    scan = win.dataset.scan_and_wait(ScanSpec(str(folder), ("relu",), 3, 8), TIMEOUT_MS)
    assert list(scan.dead("relu")) == [2]
    table = win.dataset.dock.table
    model = table.table_model
    dead_column = 5
    # The model's rows are the table's (sorted): each channel's row is row_of(channel).
    marks = [model.index(table.row_of(c), dead_column).data() for c in range(4)]
    assert marks == ["", "", "dead", ""]
    assert model.index(table.row_of(2), 1).data(Qt.ItemDataRole.BackgroundRole) is not None
    assert model.index(table.row_of(1), 1).data(Qt.ItemDataRole.BackgroundRole) is None
    assert model.index(table.row_of(2), 3).data() == "0 %"
    assert "1 dead" in win.dataset.dock.hint_label.text()
    # A row opens its channel: the layer is run first (nothing was run yet).
    row = table.row_of(2)
    with qtbot.waitSignal(window.run_finished, timeout=TIMEOUT_MS):
        _click_row(qtbot, table, row)
    qtbot.waitUntil(lambda: window.centre.channel_view.channel == 2, timeout=TIMEOUT_MS)
    assert window.centre.channel_view.name == "relu" and window.centre.channel_box.isVisible()
    # A folder without images: said in one line (banner and dock); the scan shown stays.
    empty = tmp_path / "empty"
    empty.mkdir()
    with qtbot.waitSignal(win.dataset.scans.scan_failed, timeout=TIMEOUT_MS) as failed:
        win.dataset.start(ScanSpec(str(empty), ("relu",), 3, 8))
    text = failed.args[0]
    assert text.startswith("Scan failed: ") and "no images" in text and "\n" not in text
    assert ("error", text) in window.centre.banner.messages()
    assert win.dataset.dock.message_label.text() == text
    assert win.dataset.scan is scan and not win.dataset.dock.progress_box.isVisible()
    assert win.dataset.dock.summary_label.text() == "images: 16 images · top 3"
    # Another model: the scan belongs to the old one and is forgotten.
    window.script.set_model(DeadNet().eval(), layers=["relu"])
    assert win.dataset.scan is None and table.table_model.rowCount() == 0
    assert win.dataset.dock.summary_label.text() == "No dataset scanned"
    # A model too big to copy unasked: its saved scan is not looked up when it opens.
    assert model_bytes(window.session.model) == (4 * 3 * 9 + 4 + 3 * 4 + 3) * 4
    monkeypatch.setattr(scans_module, "PEEK_COPY_LIMIT", 500)
    assert win.dataset.scans.peek(ScanSpec(str(folder), ("relu",), 3)) is None


def _scanned_demo(actviz_window, tmp_path):
    """The demo window with a top-5 scan of :data:`LAYER` and its liveliest channel."""
    win = _demo_window(actviz_window)
    folder = tmp_path / "images"
    write_folder(folder)
    scan = win.dataset.scan_and_wait(ScanSpec(str(folder), (LAYER,), 5, 8), TIMEOUT_MS)
    return win, scan, int(np.argmax(scan.stats(LAYER).std))


def test_channel_view_shows_the_top_k_grid_and_a_tile_opens_its_image(
    qtbot, actviz_window, tmp_path
):
    win, scan, channel = _scanned_demo(actviz_window, tmp_path)
    window = win.window
    grid = win.dataset.feature.grid
    # No input is open: the table's row opens the channel's best image, runs the layer and
    # opens the channel; then its top-k arrive.
    assert window.session.input is None
    table = win.dataset.dock.table
    with qtbot.waitSignal(win.dataset.scans.views_ready, timeout=TIMEOUT_MS) as ready:
        _click_row(qtbot, table, table.row_of(channel))
    assert ready.args[:2] == [LAYER, channel]
    assert window.session.input.source == scan.top(LAYER, channel)[0].source
    assert (window.centre.channel_view.name, window.centre.channel_view.channel) == (LAYER, channel)
    assert grid.isVisible()
    selected = table.selectionModel().selectedRows()
    assert [table.channel_at(i.row()) for i in selected] == [channel]
    top = scan.top(LAYER, channel)
    assert len(top) == 5 and grid.tiles.count() == 5
    assert grid.sources() == [e.source for e in top]
    assert grid.captions() == [f"{e.value:.3f}\n{e.source.rsplit('/', 1)[-1]}" for e in top]
    views = grid.views
    assert [v.entry for v in views] == list(top)
    assert all(v.image.shape == (96, 96, 3) and v.heat.shape == (96, 96) for v in views)
    # Each tile's heat peaks at the entry's value (the crop holds the maximum).
    for view in views:
        assert view.heat.max() <= view.entry.value + 1e-4
        assert view.heat.max() >= 0.5 * view.entry.value
    # Clicking a tile opens that image as the window's input.
    second = grid.tiles.item(1)
    rect = grid.tiles.visualItemRect(second)
    with qtbot.waitSignal(window.input_loaded, timeout=TIMEOUT_MS) as opened:
        qtbot.mouseClick(grid.tiles.viewport(), LEFT, pos=rect.center())
    assert opened.args == [top[1].source]
    assert window.session.input.source == top[1].source
    # Another channel of a layer the scan does not hold: no grid.
    window.script.tick(["features.block1"])
    with qtbot.waitSignal(window.run_finished, timeout=TIMEOUT_MS):
        window.runs.run()
    assert window.display.open_channel("features.block1", 0)
    assert not grid.isVisible()


def test_escape_stops_a_channels_top_images_and_the_grid_says_so(qtbot, actviz_window, tmp_path):
    """Making a channel's top images is a job the window is busy with: Esc stops it at its next
    model pass (it ran on, several at once, after the next channel was asked for) and the grid
    says so; the same channel opened again makes them."""
    win, scan, channel = _scanned_demo(actviz_window, tmp_path)
    window = win.window
    table, grid = win.dataset.dock.table, win.dataset.feature.grid
    qtbot.waitUntil(lambda: not window.commands.cancel_action.isEnabled(), timeout=TIMEOUT_MS)
    gate = Gate(window.session.model)  # holds the views' pass over the top images (a batch)
    handle = window.session.model.register_forward_pre_hook(gate)
    try:
        _click_row(qtbot, table, table.row_of(channel))
        qtbot.waitUntil(gate.entered.is_set, timeout=TIMEOUT_MS)
        assert win.dataset.feature.is_busy() and window.commands.cancel_action.isEnabled()
        assert grid.caption.text() == f"Top 5 dataset images of ch {channel}: computing…"
        with qtbot.waitSignal(win.dataset.scans.views_cancelled, timeout=TIMEOUT_MS):
            window.activateWindow()
            qtbot.keyClick(window, Qt.Key.Key_Escape)
            gate.active = False
            gate.open.set()
        text = f"Cancelled: open ch {channel} again to make its top images."
        assert grid.caption.text() == text and grid.caption.shown_lines() == [text]
        assert not win.dataset.feature.is_busy()
        assert not window.commands.cancel_action.isEnabled()
        with qtbot.waitSignal(win.dataset.scans.views_ready, timeout=TIMEOUT_MS) as ready:
            _click_row(qtbot, table, table.row_of(channel))
        assert ready.args[:2] == [LAYER, channel] and grid.tiles.count() == 5
    finally:
        gate.open.set()
        handle.remove()
    assert_no_hooks(window.session.model)


def test_progress_text_eta_and_skipped_files_read_well():
    assert format_eta(7.4) == "0:07" and format_eta(723) == "12:03"
    assert format_eta(3723) == "1:02:03" and format_eta(float("nan")) == "—"
    assert eta_seconds(60, 240, 20.0) == 9.0 and np.isnan(eta_seconds(0, 240, 0.0))
    assert progress_text(60, 2400, 20.0, 117.0) == "60 / 2,400 images · 20.0 images/s · ETA 1:57"
    skipped = tuple(
        (f"/data/x/bad{i}.png", f"cannot identify image file '/data/x/bad{i}.png'")
        for i in range(5)
    )
    assert skipped_text(skipped[:1]) == (
        "Skipped 1 unreadable file: bad0.png (cannot identify image file)."
    )
    # The same reason is said once for the files named (it filled the dock once per file).
    assert skipped_text(skipped) == (
        "Skipped 5 unreadable files: bad0.png, bad1.png, bad2.png (cannot identify image "
        "file) and 2 more."
    )
    assert skipped_text((("/d/a.png", "damaged"), ("/d/b.txt", "/d/b.txt: not an image"))) == (
        "Skipped 2 unreadable files: a.png (damaged); b.txt (not an image)."
    )


def test_tile_heat_runs_from_zero_to_each_tiles_maximum():
    from actviz.data import TopEntry, TopView

    image = np.full((4, 4, 3), 100, dtype=np.uint8)
    heat = np.zeros((4, 4), dtype=np.float32)
    heat[1, 2] = 5.0
    heat[0, 0] = -3.0  # below zero: no heat
    view = TopView(TopEntry("a.png", 0, 5.0, (1, 2)), image, heat, (0, 4, 0, 4))
    (picture,) = tile_pictures([view])
    top = colorize(np.ones((1, 1), dtype=np.float32), OVERLAY_CMAP)[0, 0].astype(float)
    want = np.round((1 - HEAT_ALPHA) * 100 + HEAT_ALPHA * top).astype(np.uint8)
    np.testing.assert_array_equal(picture[1, 2], want)
    assert (picture[heat <= 0] == 100).all()  # silent pixels: the picture as it is


def test_the_window_scans_in_the_background_priority(qtbot, actviz_window, tmp_path, monkeypatch):
    """The scan's thread and loaders run below the GUI (live lag holds while a scan runs)."""
    win = _demo_window(actviz_window)
    import os
    import sys

    import actviz.data
    from actviz.core.threads import BACKGROUND_NICE

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    gui = nice()
    seen = []
    real = actviz.data.scan

    def spy(*args, **kwargs):
        seen.append((kwargs.get("background"), nice(), threading.get_ident()))
        return real(*args, **kwargs)

    monkeypatch.setattr(actviz.data, "scan", spy)
    folder = tmp_path / "images"
    write_folder(folder)
    win.dataset.scan_and_wait(ScanSpec(str(folder), (LAYER,), k=2, batch_size=BATCH), TIMEOUT_MS)
    ((background, scan_nice, ident),) = seen
    assert background is True and ident != threading.get_ident()
    if sys.platform.startswith("linux"):
        assert scan_nice == min(19, gui + BACKGROUND_NICE)
    assert nice() == gui  # the GUI thread keeps its priority


def test_the_windows_scan_has_its_loaders_forked_by_the_server(
    qtbot, actviz_window, tmp_path, monkeypatch
):
    """Forking loader processes from the window's (large) process stalled the GUI thread
    15-120 ms: the window's scan asks actviz's fork server for them (started while the dialog
    is open), and its result is the engine's."""
    win = _demo_window(actviz_window)
    import sys

    from actviz.data import fork_server as loaders

    contexts = []

    def spy(dataset):
        contexts.append(loaders.loader_context(dataset))
        return contexts[-1]

    monkeypatch.setattr(sys.modules["actviz.data.scan"], "loader_context", spy)
    prestarts = []
    monkeypatch.setattr(loaders, "prestart", lambda: prestarts.append(True))
    scans = win.dataset.scans
    win.dataset.open_dialog().reject()
    assert prestarts == []  # no loader processes (the fixture's num_workers=0): no server
    scans.num_workers = 1
    win.dataset.open_dialog().reject()
    assert prestarts == [True]
    folder = tmp_path / "images"
    write_folder(folder)
    # (Longer than an in-process scan: the server and its loader start torch, slow on a busy CI.)
    with qtbot.waitSignal(scans.scan_finished, timeout=4 * TIMEOUT_MS) as done:
        win.dataset.start(ScanSpec(str(folder), (LAYER,), k=3, batch_size=BATCH))
    # The demo's dataset (its preprocessing included) pickles: it went to the server.
    assert len(contexts) == 1 and isinstance(contexts[0], loaders.LoaderContext)
    got = done.args[0]
    want = engine_scan("demo", folder, [LAYER], k=3, cache=False, num_workers=0)
    assert got.count == want.count == IMAGES
    for channel in range(0, 32, 5):
        assert [(e.index, e.location) for e in got.top(LAYER, channel)] == [
            (e.index, e.location) for e in want.top(LAYER, channel)
        ]


def test_a_scan_start_leaves_a_shown_docks_width_and_the_panels_alone(
    qtbot, actviz_window, tmp_path
):
    """Widening the dock at every scan start re-laid out every panel (75-135 ms of the GUI
    thread beside live mode): it is widened when it opens, never while shown."""
    win = _demo_window(actviz_window)
    window = win.window
    from actviz.ui.dataset.dock import PREFERRED_WIDTH

    folder = tmp_path / "images"
    write_folder(folder)
    w, dock, scans = window, win.dataset.dock, win.dataset.scans
    assert not dock.isVisible()
    with qtbot.waitSignal(scans.scan_finished, timeout=TIMEOUT_MS):
        win.dataset.start(ScanSpec(str(folder), (LAYER,), k=2, batch_size=BATCH))
    # Opened: made readable, at its content's width up to the width the feature asks for.
    assert dock.isVisible() and dock.width() >= min(PREFERRED_WIDTH, dock.sizeHint().width())
    chosen = (
        dock.width() + 40
    )  # the width the user dragged it to  # the user's choice (or the live dock's, sharing the area)
    w.resizeDocks([dock], [chosen], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: dock.width() == chosen)
    central = w.centralWidget().size()
    with qtbot.waitSignal(scans.scan_finished, timeout=TIMEOUT_MS):
        win.dataset.start(ScanSpec(str(folder), ("features.block3",), k=2, batch_size=BATCH))
        # A long progress line wraps rather than widening the dock.
        dock.show_progress(123_456, 9_876_543, 12_345.6, 86_400.0 * 3)
        qtbot.wait(50)
        assert dock.width() == chosen and w.centralWidget().size() == central
    assert dock.width() == chosen and w.centralWidget().size() == central


def test_a_scan_start_opens_the_dock_with_one_relayout_of_the_centre(
    qtbot, actviz_window, tmp_path
):
    """The dock was shown, then widened, then fitted back to its hint: the centre (every
    layer panel) was laid out three times at a scan's start (115 ms of the GUI thread)."""
    from PySide6.QtCore import QEvent, QObject

    from actviz.ui.dataset.dock import PREFERRED_WIDTH

    class Widths(QObject):
        seen: list[int] = []

        def eventFilter(self, _obj, event):  # noqa: N802 - Qt name
            if event.type() == QEvent.Type.Resize:
                self.seen.append(event.size().width())
            return False

    win = _demo_window(actviz_window)
    folder = tmp_path / "images"
    write_folder(folder)
    window, dock, scans = win.window, win.dataset.dock, win.dataset.scans
    centre, widths = window.centralWidget(), Widths()
    assert not dock.isVisible()
    before = centre.width()
    centre.installEventFilter(widths)
    with qtbot.waitSignal(scans.scan_finished, timeout=TIMEOUT_MS):
        win.dataset.start(ScanSpec(str(folder), (LAYER,), k=2, batch_size=BATCH))
    qtbot.wait(100)  # the dock's fit to its hint, had it differed
    centre.removeEventFilter(widths)
    assert dock.isVisible() and dock.width() >= PREFERRED_WIDTH
    assert widths.seen == [centre.width()] and centre.width() < before, widths.seen


def test_a_saved_scan_found_on_opening_leaves_a_closed_dock_closed(qtbot, actviz_window, tmp_path):
    win = actviz_window()
    window = win.window
    dataset = win.dataset.feature
    dataset.scans.num_workers = 0
    assert window.files.open_model_source("demo", wait=True)
    folder = tmp_path / "images"
    write_folder(folder, count=4)
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(folder), (LAYER,), 3, 4))
    assert dataset.dock.isVisible()
    dataset.dock.close()  # the user closes it
    # The model opened again: its saved scan is found and shown in the dock, which stays
    # closed (it popped open at every model opened).
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS) as done:
        assert window.files.open_model_source("demo", wait=True)
    assert done.args[0].from_cache
    win.settle()
    assert not dataset.dock.isVisible()
    assert "4 images" in dataset.dock.summary_label.text()
    # A scan asked for still shows its end, also when the dock was closed while it ran.
    with qtbot.waitSignal(dataset.scans.scan_started, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(folder), (LAYER, "features.block3"), 3, 4))
    dataset.dock.close()
    qtbot.waitUntil(lambda: not dataset.is_busy(), timeout=TIMEOUT_MS)
    assert dataset.dock.isVisible()


def test_esc_stops_a_report_while_it_makes_the_scans_contact_sheet(
    qtbot, actviz_window, tmp_path, monkeypatch
):
    """The report makes the scan's sheets before its pages; Esc stopped it only at the first
    page (a checkpoint's wide layers kept the window busy past a minute), and the status bar
    showed no step. Each layer's sheet is a step now; Esc stops it between two channels, and
    nothing is written."""
    import time

    from PySide6.QtWidgets import QFileDialog

    from actviz.data import scan_file as sheet

    win, scan, channel = _scanned_demo(actviz_window, tmp_path)
    table = win.dataset.dock.table
    with qtbot.waitSignal(win.dataset.scans.views_ready, timeout=TIMEOUT_MS):
        _click_row(qtbot, table, table.row_of(channel))  # opens an image and runs it
    assert win.wait_idle(TIMEOUT_MS) and win.window.session.result is not None
    real, cropping = sheet._square, threading.Event()

    def slow(*args):  # each crop of a layer with many channels and sources
        cropping.set()
        time.sleep(0.05)
        return real(*args)

    monkeypatch.setattr(sheet, "_square", slow)
    out = tmp_path / "r.html"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), ""))
    )
    win.sessions.feature.report_action.trigger()  # File > Export report...
    qtbot.waitUntil(cropping.is_set, timeout=TIMEOUT_MS)
    # Its step shows while it works (it said only "Writing the report r.html…").
    step = f"Report: the scan's top images of {LAYER} (1/1, ETA —)"
    qtbot.waitUntil(lambda: win.status_text() == step, timeout=TIMEOUT_MS)
    began = time.perf_counter()
    qtbot.keyClick(win.window, Qt.Key.Key_Escape)
    assert win.wait_idle(TIMEOUT_MS)
    # 32 channels x 5 crops x 50 ms = 8 s of sheet; stopped after the channel in hand.
    assert time.perf_counter() - began < 3.0
    assert not out.exists()
    assert "The report was cancelled." in win.status_text()
