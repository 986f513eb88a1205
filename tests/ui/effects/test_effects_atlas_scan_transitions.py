"""What the Channels that matter dock, the Atlas tab and the Dataset dock show across the
ordinary transitions a user makes: another model opened, a channel clicked in a layer without
maps, an input that lies outside the dataset's map.

Real windows on the tiny CNN of :mod:`tests.ui.tiny_models` and the bundled demo; the scanned
folders are a few tiny PNGs written in tmp_path.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Qt

from actviz.ui.atlas.feature import FAR_OFF_MAP
from actviz.ui.atlas.view import EMPTY_TEXT
from actviz.ui.dataset.dialog import ScanSpec
from tests.helpers import frame
from tests.ui.tiny_models import seeded_tiny_cnn

LAYERS = ["conv1", "conv2"]
DEMO_LAYER = "features.block3"
TIMEOUT_MS = 30_000


def _write_images(folder, count: int = 6) -> None:
    """``count`` 24x24 PNGs of noise around grey levels from dark to mid (a line of dots)."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):
        level = 40 + 20 * i
        pixels = np.clip(level + rng.normal(0, 10, (24, 24, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"img{i}.png")


def _demo_dataset(win):
    """The demo opened in ``win``; returns its dataset feature, scanning without loader
    processes."""
    assert win.window.files.open_model_source("demo", wait=True)
    dataset = win.dataset.feature
    dataset.scans.num_workers = 0
    return dataset


def _demo_with_atlas(win, qtbot, tmp_path):
    """The demo, a folder scanned for DEMO_LAYER and its map built; returns the atlas feature."""
    window = win.window
    assert window.files.open_model_source("demo", wait=True)
    folder = tmp_path / "images"
    _write_images(folder)
    dataset, atlas = win.dataset.feature, win.atlas.feature
    dataset.scans.num_workers = 0
    with qtbot.waitSignal(atlas.fitted, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(folder), (DEMO_LAYER,), 3, batch_size=4))
    assert atlas.atlas is not None and atlas.view.status_label.text().startswith(DEMO_LAYER)
    return atlas


def test_another_model_clears_the_channels_of_the_model_before(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(3), LAYERS)
    win.run_and_wait()
    feature = win.effects.feature
    win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: not feature.estimating(), timeout=TIMEOUT_MS)
    assert feature.effects is not None and set(feature.view.sections) == set(LAYERS)

    # Another model, not run yet: the old model's bars and target must not stay on show.
    win.set_model(seeded_tiny_cnn(1), LAYERS)
    assert feature.effects is None
    assert feature.view.sections == {}
    assert feature.view.message.text().startswith("Run the model")
    # Its first result is ranked as usual.
    win.run_and_wait()
    win.qtbot.waitUntil(lambda: feature.effects is not None, timeout=TIMEOUT_MS)
    assert set(feature.view.sections) == set(LAYERS)


def test_another_model_leaves_no_line_of_the_map_before(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    atlas = _demo_with_atlas(win, qtbot, tmp_path)
    win.set_model(seeded_tiny_cnn(), LAYERS)
    view = atlas.view
    assert atlas.atlas is None and view.stack.currentIndex() == 0
    assert view.empty_label.text() == EMPTY_TEXT
    # The line over the map named the demo's map ("features.block3: 6 images (PCA) ...").
    assert view.status_label.text() == ""


def test_an_input_away_from_the_dataset_is_in_view(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    atlas = _demo_with_atlas(win, qtbot, tmp_path)
    window = win.window
    window.host.show_tab(atlas.view)
    win.settle()
    view = atlas.view
    # The window's input placed as every result is (a darker grey than the folder's).
    dark = tmp_path / "dark.png"
    Image.fromarray(np.full((24, 24, 3), 5, np.uint8)).save(dark)
    assert window.files.open_input_source(str(dark), wait=True)
    win.run_and_wait()
    qtbot.waitUntil(lambda: view.marker_position() is not None, timeout=TIMEOUT_MS)
    coords = atlas.atlas.coords

    def in_view(x: float, y: float) -> bool:
        (vx0, vx1), (vy0, vy1) = view.box.viewRange()
        return vx0 <= x <= vx1 and vy0 <= y <= vy1

    assert in_view(*view.marker_position())
    # A place past the dots' view (an input unlike the dataset): the view widens to hold
    # the star (it was off screen, as if the input had not been placed), dots kept in view.
    view.box.autoRange(padding=0.05)
    (x0, x1), (y0, y1) = view.box.viewRange()
    away = np.array([x1 + 1.5 * (x1 - x0), y0 - 0.5 * (y1 - y0)])
    atlas._show_input(away, atlas.nearest)
    assert in_view(*away), "the star is off screen"
    assert all(in_view(x, y) for x, y in coords[:, :2])
    assert FAR_OFF_MAP not in view.nearest_title.text()
    # Much farther away: widening to it would shrink the dots to a speck, so the view stays
    # and the tab says where the star is.
    before = view.box.viewRange()
    (x0, x1), (y0, y1) = before
    far = np.array([x1 + 50 * (x1 - x0), y0])
    atlas._show_input(far, atlas.nearest)
    assert view.marker_position() == (float(far[0]), float(far[1]))
    assert np.allclose(view.box.viewRange(), before)
    assert view.nearest_title.text().endswith(FAR_OFF_MAP)
    # A map fitted again (another layer's, say) fits its own dots: the star of the map
    # before no longer stretches the view.
    view.set_coords(coords, atlas._colouring())
    assert view.marker_position() is None
    (fx0, fx1), (fy0, fy1) = view.box.viewRange()
    assert fx1 - fx0 < np.ptp(coords[:, 0]) * 1.5
    assert fy1 - fy0 < np.ptp(coords[:, 1]) * 1.5


def test_a_channel_of_a_layer_without_maps_says_so_and_names_its_top_images(
    actviz_window, qtbot, tmp_path
):
    win = actviz_window()
    window = win.window
    window.files.load_demo()
    qtbot.waitUntil(lambda: window.session.input is not None, timeout=TIMEOUT_MS)
    win.wait_idle()
    assert "fc" in window.session.ticked
    win.run_and_wait()
    folder = tmp_path / "images"
    _write_images(folder)
    dataset = win.dataset.feature
    dataset.scans.num_workers = 0
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(folder), ("fc",), 3, batch_size=4))
    dock = dataset.dock
    assert dock.current_layer() == "fc"
    runs: list[int] = []
    window.run_finished.connect(lambda: runs.append(1))
    table = dock.table
    index = table.table_model.index(0, 0)
    channel = table.channel_at(0)
    qtbot.mouseClick(
        table.viewport(), Qt.MouseButton.LeftButton, pos=table.visualRect(index).center()
    )
    # The classifier's scores are bars, not maps: nothing runs again (it did, and nothing
    # opened), and the dock says why, with the channel's best images.
    assert not window.is_busy() and runs == []
    text = dock.message_label.text()
    assert text.startswith(f"fc ch {channel} has no maps to open large")
    best = dataset.scan.top("fc", channel)[0].source.split("/")[-1]
    assert f"Its top images: {best} (" in text
    assert dock.message_label.isVisible()
    # Not ticked: it is ticked and run (the click's usual way), then said the same way.
    win.untick("fc")
    win.run_and_wait()
    dock.set_message("")
    with win.expect_run():
        assert not dataset.open_channel("fc", channel)
    assert "fc" in window.session.ticked
    assert dock.message_label.text().startswith(f"fc ch {channel} has no maps to open large")


@contextlib.contextmanager
def _held_scan(win, tmp_path):
    """Start a scan of 16 images on the demo and hold it in its first batch (the model's
    forward waits at a gate); yields the dataset feature and the gate, which is opened and
    unhooked on leaving."""
    from tests.ui.dataset.scan_folders import Gate, write_folder

    window = win.window
    dataset = _demo_dataset(win)
    folder = tmp_path / "images"
    write_folder(folder)
    gate = Gate(window.session.model)
    handle = window.session.model.register_forward_pre_hook(gate)
    try:
        dataset.start(ScanSpec(str(folder), (DEMO_LAYER,), 3, 4))
        win.qtbot.waitUntil(gate.entered.is_set, timeout=TIMEOUT_MS)
        yield dataset, gate
    finally:
        gate.open.set()
        handle.remove()


def test_another_model_stops_a_scan_and_says_so(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    window = win.window
    with _held_scan(win, tmp_path) as (dataset, gate):
        assert window.commands.cancel_action.isEnabled()
        win.set_model(seeded_tiny_cnn(), LAYERS)
        gate.active = False
        gate.open.set()
        dock = dataset.dock
        assert not dataset.is_busy() and not dock.progress_box.isVisible()
        assert dock.summary_label.text() == "No dataset scanned"
        # The dock said nothing: the scan just vanished.
        assert dock.message_label.text().startswith(
            "The scan of images stopped: another model was opened."
        )
        assert dock.message_label.isVisible()
        assert not window.commands.cancel_action.isEnabled()


def test_embeddings_over_the_budget_leave_the_top_images(actviz_window, qtbot, tmp_path):
    from tests.ui.dataset.scan_folders import write_folder

    win = actviz_window()
    window = win.window
    assert window.files.open_model_source("demo", wait=True)
    window.session.set_memory_budget(1000)  # 16 images x 64 values x 2 bytes = 2 KiB: over it
    dataset, atlas = win.feature("dataset"), win.feature("atlas")
    dataset.scans.num_workers = 0
    folder = tmp_path / "images"
    write_folder(folder)
    failed: list[str] = []
    dataset.scans.scan_failed.connect(failed.append)
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS) as done:
        dataset.start(ScanSpec(str(folder), (DEMO_LAYER,), 3, 4))
    # The scan was refused whole for the atlas's vectors; the top images need no more
    # memory with more images, so they are scanned, and the dock and the tab say why
    # there is no map.
    scan = done.args[0]
    assert failed == [] and scan.count == 16 and not scan.embedding_layers
    assert len(scan.top(DEMO_LAYER, 0)) == 3
    note = dataset.dock.message_label.text()
    assert note.startswith("No atlas for this scan (the top images are complete): embeddings:")
    assert "memory budget" in note
    assert atlas.atlas is None and atlas.view.empty_label.text().startswith("No atlas for this")


def test_channels_without_effect_get_no_bar(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(3), [*LAYERS, "fc"])
    win.run_and_wait()
    feature = win.effects.feature
    win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: not feature.estimating(), timeout=TIMEOUT_MS)
    eff = feature.effects
    target = eff.target_index
    # Only the target's own score moves the target: the other four have no effect, and
    # drew four empty rows (a hairline in the colour of "works against").
    assert np.count_nonzero(eff.estimate("fc")) == 1
    section = feature.view.sections["fc"]
    assert [r.channel for r in section.bars.rows] == [target]
    assert section.info.text() == "5 channels · 4 of the top 5 without effect, not drawn"
    # The convolutions' channels all move it: all drawn, nothing said.
    assert len(feature.view.sections["conv2"].bars.rows) == 6
    assert "without effect" not in feature.view.sections["conv2"].info.text()
    # Verified, the same.
    assert feature.verify()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=TIMEOUT_MS)
    assert feature.effects["fc"].verified.sum() == 5
    assert [r.channel for r in feature.view.sections["fc"].bars.rows] == [target]


def test_a_folder_smaller_than_k_says_its_own_count(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    dataset = _demo_dataset(win)
    folder = tmp_path / "images"
    _write_images(folder, 4)
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(folder), (DEMO_LAYER,), 9, 4))
    # Four images, nine asked for: "4 images · top 9" read as if five were missing.
    assert dataset.dock.summary_label.text() == "images: 4 images · top 4"


def test_opened_under_the_dataset_dock_its_bars_show(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    window = win.window
    window.files.load_demo()
    qtbot.waitUntil(lambda: window.session.input is not None, timeout=TIMEOUT_MS)
    win.wait_idle()
    win.run_and_wait()
    dataset, feature = win.dataset.feature, win.effects.feature
    dataset.scans.num_workers = 0
    folder = tmp_path / "images"
    _write_images(folder, 4)
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(folder), (DEMO_LAYER,), 3, 4))
    assert dataset.dock.isVisible()
    feature.show_panel()
    qtbot.waitUntil(lambda: feature.effects is not None and not feature.estimating())
    win.settle()
    # At 1280x720 the dock under the Dataset dock got ~140 px: its controls, no bar.
    scroll = feature.dock.widget()
    bars = next(iter(feature.view.sections.values())).bars
    first_bar = bars.mapTo(scroll.viewport(), bars.rect().topLeft()).y()
    assert 0 <= first_bar < scroll.viewport().height() - 20, (first_bar, feature.dock.height())
    assert dataset.dock.table.height() > 150  # the table keeps room too


def test_the_scan_dialog_follows_another_model(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    window = win.window
    dataset = _demo_dataset(win)
    dialog = dataset.open_dialog()
    assert DEMO_LAYER in dialog.checked_layers()
    folder = tmp_path / "images"
    _write_images(folder, 4)
    dialog.folder_edit.setText(str(folder))
    # Another model while the dialog is open: it listed the demo's layers, and scanning
    # them failed ("unknown layer 'features.block1'").
    win.set_model(seeded_tiny_cnn(), LAYERS)
    assert dataset.dialog is dialog and dialog.isVisible()
    listed = [dialog.layer_list.item(i).text() for i in range(dialog.layer_list.count())]
    assert set(listed) == {n.name for n in window.session.tree if n.name}
    assert dialog.checked_layers() == LAYERS
    failed: list[str] = []
    dataset.scans.scan_failed.connect(failed.append)
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS) as done:
        dialog.scan_button.click()
    assert failed == [] and done.args[0].layers == tuple(LAYERS)


def test_a_map_fitted_before_shows_at_once_behind_a_slow_fit(
    actviz_window, qtbot, tmp_path, monkeypatch
):
    import threading

    from actviz.ui.atlas import feature as atlas_feature

    win = actviz_window()
    atlas = _demo_with_atlas(win, qtbot, tmp_path)
    pca = atlas.atlas
    assert pca.projection.method == "pca"
    view = atlas.view
    # A second method whose fit takes long (UMAP's cannot be stopped once it runs).
    release = threading.Event()
    entered = threading.Event()
    real = atlas_feature.build_atlas

    def slow(scan, layer, *, method, logits):
        if method == "umap":
            entered.set()
            assert release.wait(TIMEOUT_MS / 1000)
            method = "pca"
        return real(scan, layer, method=method, logits=logits)

    monkeypatch.setattr(atlas_feature, "build_atlas", slow)
    view.set_choices(view.method_combo, ["PCA", "UMAP"], "PCA")
    try:
        view.method_combo.setCurrentText("UMAP")
        qtbot.waitUntil(entered.is_set, timeout=TIMEOUT_MS)
        # Back to PCA while that fit runs: the map fitted before is shown at once (it
        # waited behind the fit, a minute for UMAP's first compile).
        view.method_combo.setCurrentText("PCA")
        assert atlas.atlas is pca and view.status_label.text().startswith(DEMO_LAYER)
        assert np.array_equal(view.coords, pca.coords)
    finally:
        release.set()
    # The slow fit, ended, does not replace it.
    qtbot.wait(200)
    qtbot.waitUntil(lambda: not atlas.worker.has_current_job(), timeout=TIMEOUT_MS)
    assert atlas.atlas is pca


def test_the_map_of_a_cancelled_scan_says_it_is_partial(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    atlas = win.atlas.feature
    with _held_scan(win, tmp_path) as (dataset, gate):
        with qtbot.waitSignal(atlas.fitted, timeout=TIMEOUT_MS):
            dataset.cancel()
            gate.active = False
            gate.open.set()
    assert atlas.atlas.scan.count == 4
    # "features.block3: 4 images (PCA)" read as the whole folder's map.
    assert atlas.view.status_label.text().startswith(
        f"{DEMO_LAYER}: 4 of 16 images, a partial scan (PCA)"
    )


def test_a_replaced_verification_is_still_said_under_the_new_bars(actviz_window):
    from actviz.ui.effects.feature import INTERRUPTED

    win = actviz_window(seeded_tiny_cnn(), frame(3), LAYERS)
    win.run_and_wait()
    feature = win.effects.feature
    win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: not feature.estimating(), timeout=TIMEOUT_MS)
    assert feature.verify()
    with win.expect_run():
        assert win.window.runs.run() is not None  # replaces the verification
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=TIMEOUT_MS)
    win.qtbot.waitUntil(
        lambda: (
            feature.effects is not None
            and feature.effects.context is not None
            and not feature.estimating()
            and feature._source() is win.window.session.result
        ),
        timeout=TIMEOUT_MS,
    )
    # The new result's estimates replaced the red line at once: the user saw bars without
    # exact values and no word of the verification.
    message = feature.view.message.text()
    assert message.startswith("target:") and message.endswith(INTERRUPTED)
    assert not any(feature.effects[layer].verified.any() for layer in LAYERS)
    # Verify again: the note goes.
    assert feature.verify()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=TIMEOUT_MS)
    assert INTERRUPTED not in feature.view.message.text()
    assert feature.effects["conv2"].verified.any()


def test_a_folder_of_one_image_reads_as_one(actviz_window, qtbot, tmp_path):
    win = actviz_window()
    atlas_ui = win.atlas.feature
    dataset = _demo_dataset(win)
    folder = tmp_path / "one"
    _write_images(folder, 1)
    with qtbot.waitSignal(atlas_ui.fitted, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(folder), (DEMO_LAYER,), 9, 4))
    assert dataset.dock.summary_label.text() == "one: 1 image · top 1"
    assert atlas_ui.view.status_label.text().startswith(f"{DEMO_LAYER}: 1 image (PCA)")


def test_a_text_model_is_told_a_scan_needs_images(actviz_window, qtbot, tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from tests.io.hf_tiny import save_tiny_gpt2

    folder = tmp_path / "gpt"
    save_tiny_gpt2(folder)
    win = actviz_window()
    window = win.window
    assert window.files.open_model_source(str(folder), wait=True)
    dataset = win.dataset.feature
    dataset.scans.num_workers = 0
    images = tmp_path / "images"
    _write_images(images, 2)
    # The dialog does not open, and a scan asked for anyway does not start: it ran and
    # failed in the embedding ("Expected tensor for argument #1 'indices' ...").
    assert dataset.open_dialog() is None and dataset.dialog is None
    assert dataset.start(ScanSpec(str(images), ("transformer.h.0",), 3)) is None
    assert not dataset.is_busy()
    said = [m for m in win.banner_messages() if "reads text, not images" in m]
    assert said and "Open an image model for them." in said[0]


def test_a_new_map_forgets_the_image_pointed_at_on_the_map_before(actviz_window, qtbot, tmp_path):
    from actviz.ui.atlas.view import HOVER_HINT

    win = actviz_window()
    atlas = _demo_with_atlas(win, qtbot, tmp_path)
    atlas._on_hovered(2)
    assert "img2.png" in atlas.view.hover_label.text()
    # Another scan (of other images): the line named an image of the scan before.
    other = tmp_path / "other"
    _write_images(other, 3)
    dataset = win.dataset.feature
    with qtbot.waitSignal(atlas.fitted, timeout=TIMEOUT_MS):
        dataset.start(ScanSpec(str(other), (DEMO_LAYER,), 3, 4))
    assert atlas.atlas.scan.count == 3
    assert atlas.view.hover_label.text() == HOVER_HINT and atlas.hover_text == ""


def test_an_image_gone_since_the_scan_leaves_the_other_top_images(actviz_window, qtbot, tmp_path):
    from actviz.data import top_views

    win = actviz_window()
    window = win.window
    window.files.load_demo()
    qtbot.waitUntil(lambda: window.session.input is not None, timeout=TIMEOUT_MS)
    win.wait_idle()
    win.run_and_wait()
    dataset = win.dataset.feature
    dataset.scans.num_workers = 0
    folder = tmp_path / "a_folder_with_a_rather_long_name_of_many_words_that_goes_on"
    _write_images(folder, 6)
    with qtbot.waitSignal(dataset.scans.scan_finished, timeout=TIMEOUT_MS) as done:
        dataset.start(ScanSpec(str(folder), (DEMO_LAYER,), 4, 4))
    scan = done.args[0]
    top = scan.top(DEMO_LAYER, 5)
    Path(top[1].source).unlink()  # moved away since the scan
    Path(top[2].source).write_bytes(b"not a png any more")
    # The engine: grey views saying why for those two, the others as before.
    views = top_views(window.session.loaded_model, scan, DEMO_LAYER, 5)
    assert [v.entry for v in views] == list(top)
    assert [bool(v.missing) for v in views] == [False, True, True, False]
    assert views[1].missing == f"{Path(top[1].source).name} is gone since the scan"
    assert views[2].missing.startswith(f"{Path(top[2].source).name} cannot be read now")
    assert views[0].heat.max() > 0 and views[1].heat.max() == 0
    # The window: it said "Could not make the top images: ... damaged image ([Errno 2] No
    # such file ...)" and showed none of them.
    width = window.width()
    grid = dataset.grid
    with qtbot.waitSignal(dataset.scans.views_ready, timeout=TIMEOUT_MS):
        assert dataset.open_channel(DEMO_LAYER, 5)
    assert grid.tiles.count() == 4
    assert grid.caption.text().endswith("· 2 gone or changed since the scan (grey)")
    gone = grid.tiles.item(1)
    assert not gone.flags() & Qt.ItemFlag.ItemIsEnabled and "gone since" in gone.toolTip()
    win.settle()
    assert window.width() == width  # the long caption is cut, not widening the window
