"""No layout pass re-enters itself: a geometry handler that changes geometry runs its own
work once per pass, and the channel view opens from a tile in every combination of sorted
tiles, an edit and docks, at three screen sizes (ResNet-18, all its Conv2d layers ticked)."""

from __future__ import annotations

import functools

import pytest
import torch
import torchvision
from PySide6.QtCore import QEvent, QObject, QPoint, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QApplication, QWidget

from actviz.ui.panels import canvas as canvas_module
from actviz.ui.panels import feature_map
from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.window import central as layout

#: The geometry handlers of the Layers tab, outermost first.
HANDLERS = (
    (layout._LayersScroll, "resizeEvent"),
    (feature_map.LayerPanel, "resizeEvent"),
    (canvas_module.ImageCanvas, "resizeEvent"),
    (canvas_module.ImageCanvas, "_fit_colorbar"),
)


class _Reentry:
    """Counts how deep each wrapped handler is nested inside itself."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.worst: dict[str, int] = {}

    def wrap(self, cls: type, name: str):
        original = getattr(cls, name)
        key = f"{cls.__name__}.{name}"

        @functools.wraps(original)
        def wrapper(obj, *args, **kwargs):
            depth = self.stack.count(key) + 1
            self.worst[key] = max(self.worst.get(key, 0), depth)
            self.stack.append(key)
            try:
                return original(obj, *args, **kwargs)
            finally:
                self.stack.pop()

        return wrapper


def test_a_canvas_resized_from_its_own_resize_does_not_recurse(qtbot):
    """A layout that answers a canvas's resize by resizing it again (what the Layers grid did
    through height-for-width) gets one nested event, not an endless recursion."""
    holder = QWidget()  # a child widget is resized at once (a top-level waits for the system)
    qtbot.addWidget(holder)
    holder.resize(400, 300)
    canvas = ImageCanvas(holder, fit_width=True)
    canvas.set_image(torch.rand(8, 24).numpy(), (0.0, 1.0))
    canvas.resize(300, 200)
    holder.show()
    qtbot.waitExposed(holder)
    calls = []

    def answer() -> None:
        # A layout that never agrees answers each size with another, and Qt delivers that
        # resize from inside this one (the C++ stack of the hang: resizeEvent inside
        # resizeEvent of the same canvases).
        calls.append(canvas.height())
        if len(calls) < 50:
            size = QSize(canvas.width(), 200 + len(calls) % 2)
            canvas.resizeEvent(QResizeEvent(size, canvas.size()))

    canvas.resized.connect(answer)
    canvas.resize(310, 200)
    assert len(calls) == 1  # the nested resize only moved the view; no second round


def test_the_layers_grid_hears_the_width_before_it_is_laid_out(qtbot):
    """The Layers scroll area says its new viewport width in its resize, before the grid is
    laid out at it (the grid's columns follow it), once per width."""
    holder = QWidget()
    qtbot.addWidget(holder)
    holder.resize(700, 400)
    scroll = layout._LayersScroll()
    scroll.setParent(holder)
    scroll.resize(400, 300)
    holder.show()
    qtbot.waitExposed(holder)
    widths: list[int] = []
    scroll.viewport_resized.connect(widths.append)
    scroll.resize(500, 300)
    assert widths == [scroll.viewport().width()]
    scroll.resize(520, 300)
    assert widths[1:] == [scroll.viewport().width()]
    qtbot.wait(50)
    assert len(widths) == 2  # the pass's end has nothing new to say


def _click_ranked_tile(win, name: str, rank: int = 0) -> int:
    panel = win.reveal(name)
    slot = panel.activation_slot
    channel = slot.mosaic.tile_channels[rank]
    y0, x0 = slot.mosaic.tile_origin(channel)
    pos = slot.image_canvas.image_to_widget(x0 + 1.5, y0 + 1.5)
    win.qtbot.mouseClick(slot.image_canvas.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos))
    win.settle()
    return channel


@pytest.mark.slow
@pytest.mark.parametrize("size", [(1360, 820), (1280, 720), (1024, 640)])
def test_channel_view_in_every_combination(actviz_window, monkeypatch, size):
    probe = _Reentry()
    for cls, name in HANDLERS:
        monkeypatch.setattr(cls, name, probe.wrap(cls, name))
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    win = actviz_window(model, x, size=size)
    window, session = win.window, win.window.session
    session.tick_type("Conv2d")  # the tree's "Tick all Conv2d modules"
    win.run_and_wait()
    assert len(window.host.layer_panels) >= 20  # the default ticks and every Conv2d
    effects = win.effects.feature
    first = next(iter(window.host.layer_panels))
    for docks in (False, True):
        if docks:
            win.open_dock("Channels that matter")
            win.qtbot.waitUntil(lambda: not effects.estimating(), timeout=60_000)
        for sort in (False, True) if docks else (False,):
            if docks:
                effects.view.sort_check.setChecked(sort)
                win.settle()
            for edit in (False, True):
                if edit:
                    window.display.flush_panel_updates()
                    mosaic = win.panel("layer4.1.conv2").activation_slot.mosaic
                    win.context_action("layer4.1.conv2", mosaic.tile_channels[0], "Ablate")
                    win.wait_idle()
                channel = _click_ranked_tile(win, first)
                assert window.display.opened_channel == (first, channel)
                assert window.display.channel_view.isVisible()
                win.wait_idle()
                window.display.channel_view.close_button.click()
                win.settle()
                assert not window.display.channel_view.isVisible()
                if edit:
                    win.whatif.dock.clear_button.click()
                    win.wait_idle()
                win.resize(size[0] - 40, size[1])
                win.resize(*size)
    QApplication.processEvents()
    nested = {key: depth for key, depth in probe.worst.items() if depth > 1}
    assert nested == {}, f"geometry handlers re-entered themselves: {nested}"


class _Sizes(QObject):
    """The sizes each watched widget was resized to."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[QObject, list[tuple[int, int]]] = {}

    def eventFilter(self, obj, event):  # noqa: N802 - Qt name
        if event.type() == QEvent.Type.Resize:
            self.seen.setdefault(obj, []).append(event.size().toTuple())
        return False


def test_the_channel_view_opens_and_closes_with_one_layout_of_each_panel(actviz_window):
    """A panel arranged its sides (stacked or side by side) after its resize: closing the channel
    view laid every panel out at two heights (stacked, then side by side). Arranged for its
    width before the grid asks its height, each panel is resized once (48 channels: one page
    at either width, so no re-paging moves it)."""
    torch.manual_seed(0)
    convs = [torch.nn.Conv2d(3 if i == 0 else 48, 48, 3, padding=1) for i in range(6)]
    model = torch.nn.Sequential(*convs).eval()
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    win = actviz_window(model, x, layers=[str(i) for i in range(6)], size=(1360, 820))
    win.run_and_wait()
    window = win.window
    panels = list(window.host.layer_panels.values())
    scroll, sizes = window.centre.layers_scroll, _Sizes()
    scroll.installEventFilter(sizes)
    _click_ranked_tile(win, "0")
    win.wait_idle()
    assert window.display.channel_view.isVisible() and all(p.is_narrow() for p in panels)
    # Opening it shared the tab once (it was shown at Qt's share, then given its own).
    assert sizes.seen.pop(scroll) == [scroll.size().toTuple()]
    for panel in panels:
        panel.installEventFilter(sizes)
    win.qtbot.mouseClick(window.display.channel_view.close_button, Qt.MouseButton.LeftButton)
    win.wait_idle()
    win.settle()
    assert not window.display.channel_view.isVisible() and not any(p.is_narrow() for p in panels)
    resized = {panel.name: sizes.seen.get(panel, []) for panel in panels}
    assert all(len(seen) == 1 for seen in resized.values()), resized
