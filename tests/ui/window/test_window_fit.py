"""The window fits a laptop screen: minimum size, docks, saved layout, banner (issue 12, 1 and 7)."""

from __future__ import annotations

import numpy as np
import torch
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow

from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.frames import TensorFrames
from actviz.ui.tree.dock import PREFERRED_WIDTH
from actviz.ui.window.central import breakable
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.ui.tiny_models import TinyCNN

#: The largest minimum size allowed (a 1280x720 laptop screen less its panel and title bar).
MAX_MIN_W, MAX_MIN_H = 1024, 640
LONG_ERROR = (
    "Could not open model '/home/someone/experiments/2024-run-17/checkpoints/"
    "resnet18_finetuned_on_a_very_long_dataset_name_epoch_0099.safetensors': holds only weights "
    "(122 tensors), not the architecture; " + "and a long explanation of what to do next " * 6
)
UNBROKEN = "/very/" + "long_directory_name_without_any_space/" * 12 + "model.pt"


def _fits(window: QMainWindow) -> tuple[int, int]:
    hint = window.minimumSizeHint()
    assert hint.width() <= MAX_MIN_W and hint.height() <= MAX_MIN_H, (
        hint.width(),
        hint.height(),
    )
    return hint.width(), hint.height()


def _resize_to(qtbot, window: QMainWindow, w: int, h: int) -> None:
    window.resize(w, h)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == (w, h), timeout=10_000)


# ------------------------------------------------------------------------------ point 1
def test_minimum_size_fits_1024x640_on_every_tab_and_with_any_banner(qtbot, actviz_window, resnet):
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    win = actviz_window(resnet, x, ["layer1", "layer2", "layer3", "layer4", "fc"], size=None)
    win.run_and_wait()
    window = win.window
    assert win.live.dock is not None and not win.live.dock.isVisible()
    for index in range(window.centre.tabs.count()):
        window.centre.tabs.setCurrentIndex(index)
        qtbot.waitUntil(lambda: not window.display.display_pending(), timeout=RUN_TIMEOUT_MS)
        _fits(window)
    for text in (LONG_ERROR, UNBROKEN, "short"):
        window.host.show_error(text, source="model")
        window.host.show_warning(text, source="run")
        assert window.centre.banner.isVisible()
        for index in range(window.centre.tabs.count()):
            window.centre.tabs.setCurrentIndex(index)
            _fits(window)
    # The live dock, once opened, scrolls instead of making the window taller.
    win.live.dock.show()
    _fits(window)
    # And the window really takes that size (no widget forces it larger).
    _resize_to(qtbot, window, MAX_MIN_W, MAX_MIN_H)
    assert (window.width(), window.height()) == (MAX_MIN_W, MAX_MIN_H)
    # The long banner wraps inside the window: its text is fully there, one line per width.
    banner = window.centre.banner
    assert banner.width() <= window.width()
    assert banner.label.height() >= banner.label.heightForWidth(banner.label.width()) - 1


def test_a_long_unbroken_path_gets_break_opportunities():
    soft = breakable(UNBROKEN)
    assert soft.replace("\u200b", "") == UNBROKEN
    assert soft.count("\u200b") >= 12  # after each separator of the long run
    assert breakable("short words stay as they are") == "short words stay as they are"


def test_layers_get_sixty_percent_of_the_width_at_1280x720(qtbot, actviz_window, resnet):
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    win = actviz_window(resnet, x, ["layer1", "layer2", "layer3", "layer4", "fc"], size=None)
    win.run_and_wait()
    window = win.window
    window.centre.tabs.setCurrentIndex(0)
    _resize_to(qtbot, window, 1280, 720)
    qtbot.waitUntil(lambda: window.centre.layers_scroll.width() > 0, timeout=10_000)
    share = window.centre.layers_scroll.width() / window.width()
    assert share >= 0.6, share
    # The Model dock opens at its default width, and the user can widen it.
    assert window.model_dock.width() == PREFERRED_WIDTH
    window.resizeDocks([window.model_dock], [450], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: window.model_dock.width() == 450, timeout=10_000)


def _view_menu(window: QMainWindow):
    return next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "View")


def test_docks_close_reopen_from_view_and_tab_together(qtbot, actviz_window):
    win = actviz_window(size=None, auto_run=True)
    window = win.window
    model, live = window.model_dock, win.live.dock
    menu_actions = _view_menu(window).actions()
    for dock in (model, live):
        assert dock.features() & QDockWidget.DockWidgetFeature.DockWidgetClosable
        assert dock.toggleViewAction() in menu_actions
    assert window.dockOptions() & QMainWindow.DockOption.AllowTabbedDocks
    assert model.isVisible() and not live.isVisible()
    model.toggleViewAction().trigger()
    assert not model.isVisible()
    model.toggleViewAction().trigger()
    assert model.isVisible()
    live.toggleViewAction().trigger()
    assert live.isVisible()
    window.tabifyDockWidget(model, live)
    assert window.tabifiedDockWidgets(model) == [live]
    # View > Reset window layout: Model on the left at its width, Live closed.
    window.commands.reset_layout_action.trigger()
    assert window.dockWidgetArea(model) == Qt.DockWidgetArea.LeftDockWidgetArea
    assert window.dockWidgetArea(live) == Qt.DockWidgetArea.RightDockWidgetArea
    assert model.isVisible() and not live.isVisible()
    assert window.tabifiedDockWidgets(model) == []
    window.close()


def test_live_dock_opens_when_live_mode_is_used(qtbot, actviz_window):
    win = actviz_window(size=None, auto_run=True)
    window = win.window
    torch.manual_seed(0)
    window.script.set_model(TinyCNN().eval(), layers=["conv1"])
    window.script.set_input(torch.randn(1, 3, 16, 16))
    dock, live = win.live.dock, win.live.controller
    assert not dock.isVisible()
    frames = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    live.set_source(TensorFrames(frames, "clip"))  # what the source selector does
    assert dock.isVisible()
    dock.hide()
    dock.play_action.trigger()  # Ctrl+Space or Live > Play, with the dock closed
    assert live.playing and dock.isVisible()
    live.pause()
    qtbot.waitUntil(lambda: not window.is_busy(), timeout=RUN_TIMEOUT_MS)
    window.close()


def test_the_live_dock_is_read_without_scrolling_sideways_at_1280x720(qtbot, actviz_window):
    """Its source list (sized to its longest item) and its playback row (a frame's name beside
    speed and loop) made its content 411 px wide in a 300 px dock: clipped, a scroll bar."""
    win = actviz_window(size=None, auto_run=True)
    window = win.window
    window.resize(1280, 720)
    torch.manual_seed(0)
    window.script.set_model(TinyCNN().eval(), layers=["conv1"])
    window.script.set_input(torch.randn(1, 3, 16, 16))
    frames = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    win.live.controller.set_source(TensorFrames(frames, "a_clip_with_a_rather_long_name.mp4"))
    dock = win.live.dock
    qtbot.waitUntil(lambda: dock.isVisible() and dock.width() > 0)
    scroll = dock.widget()
    qtbot.waitUntil(lambda: scroll.widget().width() <= scroll.viewport().width())
    assert scroll.widget().minimumSizeHint().width() <= dock.width()
    assert scroll.horizontalScrollBar().maximum() == 0
    win.live.controller.pause()
    qtbot.waitUntil(lambda: not window.is_busy(), timeout=RUN_TIMEOUT_MS)
    window.close()


def test_window_state_is_restored_from_settings(qtbot, actviz_window):
    win = actviz_window(size=None, auto_run=True)
    window = win.window
    # Inside the offscreen screen (800x600): a restored geometry is kept on screen.
    _resize_to(qtbot, window, 760, 540)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, window.model_dock)
    win.live.dock.show()
    window.tabifyDockWidget(window.model_dock, win.live.dock)
    qtbot.waitUntil(lambda: win.live.dock.isVisible(), timeout=10_000)
    saved = (window.width(), window.height())
    assert saved[0] == 760  # (tabbed docks may need a little more height)
    window.close()
    window.settings.sync()

    other = actviz_window(size=None, auto_run=True)
    again = other.window
    assert (again.width(), again.height()) == saved
    assert again.dockWidgetArea(again.model_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    assert again.tabifiedDockWidgets(again.model_dock) == [other.live.dock]
    assert again.dockWidgetArea(other.live.dock) == Qt.DockWidgetArea.RightDockWidgetArea
    again.close()


def test_first_start_without_settings_has_live_closed_and_model_left(qtbot, actviz_window):
    win = actviz_window(size=None, auto_run=True)
    window = win.window
    assert window.dockWidgetArea(window.model_dock) == Qt.DockWidgetArea.LeftDockWidgetArea
    assert window.model_dock.isVisible() and not win.live.dock.isVisible()
    window.close()


def _margins(layout) -> tuple[int, int, int, int]:
    m = layout.contentsMargins()
    return m.left(), m.top(), m.right(), m.bottom()


# ------------------------------------------------------------------------------ point 7
def test_banner_icon_is_drawn_by_the_style_not_a_glyph(qtbot, actviz_window):
    window = actviz_window(size=None, auto_run=True).window
    banner = window.centre.banner
    for level, show in (("error", window.host.show_error), ("warning", window.host.show_warning)):
        banner.clear()
        show("something happened")
        assert banner.level == level
        pixmap = banner.icon_label.pixmap()
        assert not pixmap.isNull() and pixmap.width() == 16
        image = pixmap.toImage()
        # A real icon: more than one colour drawn (a missing-glyph box would be a label).
        colours = {image.pixel(x, y) for x in range(16) for y in range(16)}
        assert len(colours) > 3
        assert not any(ch in banner.label.text() for ch in "⛔⚠✕")
    assert not banner.close_button.icon().isNull() and banner.close_button.text() == ""
    window.close()


def test_an_error_banner_clears_on_the_next_successful_load(qtbot, actviz_window, tmp_path):
    window = actviz_window(size=None, auto_run=True).window
    bad = tmp_path / "broken.pt"
    bad.write_bytes(b"not a model at all")
    assert not window.files.open_model_source(str(bad), wait=True)
    assert any(level == "error" for level, _ in window.centre.banner.messages())
    torch.manual_seed(0)
    good = tmp_path / "tiny.pt"
    torch.save(TinyCNN().eval().state_dict(), good)
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source(str(good), arch="tests.ui.tiny_models:TinyCNN")
    assert all(level != "error" for level, _ in window.centre.banner.messages())
    # The same for inputs: a failed input, then one that opens.
    assert not window.files.open_input_source(str(tmp_path / "missing.png"), wait=True)
    assert any(level == "error" for level, _ in window.centre.banner.messages())
    from PIL import Image

    picture = tmp_path / "ok.png"
    Image.fromarray(np.full((16, 16, 3), 90, np.uint8)).save(picture)
    with qtbot.waitSignal(window.input_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_input_source(str(picture))
    assert all(level != "error" for level, _ in window.centre.banner.messages())
    window.close()


def test_overview_panels_share_one_margin_and_spacing(qtbot, actviz_window, resnet):
    from actviz.ui.panels.style import PAGE_MARGIN, PANEL_SPACING

    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    # 1280x720: room for each row's panels side by side (a narrower page lays them out down).
    win = actviz_window(resnet, x, ["layer1", "layer2", "layer3", "layer4", "fc"])
    win.run_and_wait()
    window = win.window
    window.centre.tabs.setCurrentIndex(1)
    win.settle()
    rows, top, bottom = window.centre.overview_splitters
    assert top.orientation() == bottom.orientation() == Qt.Orientation.Horizontal
    for splitter in (rows, top, bottom):
        assert splitter.handleWidth() == PANEL_SPACING
        assert not splitter.childrenCollapsible()
    assert _margins(window.centre.overview_tab.widget().layout()) == (PAGE_MARGIN,) * 4
    grid = window.centre.layers_grid
    assert grid.spacing() == PANEL_SPACING
    panels = [
        window.centre.prediction_panel,
        window.centre.saliency_panel,
        window.centre.gradcam_panel,
        window.centre.grad_flow_panel,
        window.centre.histogram_panel,
        window.centre.stats_table,
    ]
    outer = {_margins(p.layout()) for p in panels}
    assert len(outer) == 1  # the same inner margins in every Overview panel
    # Panels of one row line up: same top edge, same height.
    for row in (panels[:3], panels[3:]):
        assert len({p.mapTo(window, p.rect().topLeft()).y() for p in row}) == 1
        assert len({p.height() for p in row}) == 1


def test_every_mosaic_scene_matches_its_canvas_after_the_demo_opens_at_1280x720(
    qtbot, actviz_window
):
    # A canvas's fitted height, set while a resize was being handled, once left pyqtgraph's
    # scene at the earlier, taller size: the activation mosaic sat lower than the gradient's
    # and its last row was cut (the demo's first panel at 1280x720).
    window = actviz_window(size=None, auto_run=True).window
    window.resize(1280, 720)
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        assert window.files.load_demo()
    window.display.flush_panel_updates()
    canvases = [
        slot.image_canvas
        for panel in window.host.layer_panels.values()
        for slot in (panel.activation_slot, panel.gradient_slot)
        if slot.image_canvas is not None and slot.image_canvas.isVisible()
    ]
    assert len(canvases) >= 4

    def scenes_fit() -> bool:
        for c in canvases:
            if not c.on_screen():
                c.ensure_scene()  # off screen: what the paint that shows it does
        return all(c.ci.geometry().size().toSize() == c.size() for c in canvases)

    qtbot.waitUntil(scenes_fit, timeout=10_000)
    window.close()
