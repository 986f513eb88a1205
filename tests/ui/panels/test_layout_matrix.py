"""The layout check (:func:`actviz.testing.layout_check.layout_problems`) over a matrix of window
states: sizes x dock sets x tabs x channel view open or closed, each checked as reached and
again after every resize, with the demo and a random-init ResNet-18; the Atlas tab with the
demo before a dataset was scanned and with the map of a ten-image scan.

One window per model walks the states. A representative subset runs with the suite; the
whole matrix is marked ``slow``. Problems already reported and owned elsewhere are listed in
``KNOWN`` with where they come from: the test fails on any other problem, and the known ones
are printed, so the list shrinks as they are fixed.
"""

from __future__ import annotations

import itertools
import os
import re

import pytest
import torch
from PySide6.QtWidgets import QDockWidget

from actviz.testing import RUN_TIMEOUT_MS
from actviz.testing.layout_check import LayoutProblem, layout_problems

SIZES = ((1024, 640), (1280, 720), (1920, 1080))
DOCK_SETS = {
    "none": (),
    "model": ("modelDock",),
    "model+edits": ("modelDock", "editsDock"),
    "model+dataset+live": ("modelDock", "datasetDock", "liveDock"),
}
TABS = ("Layers", "Overview", "Compare", "Atlas")
CHANNEL = (False, True)

#: (kind, pattern of the widget path): problems reported to their owners and not fixed yet,
#: each with a comment saying where it comes from. Empty: the whole matrix holds.
KNOWN: tuple[tuple[str, str], ...] = ()


def _known(problem: LayoutProblem) -> bool:
    return any(problem.kind == k and re.search(p, problem.widget) for k, p in KNOWN)


def _settle_with_compare(win) -> None:
    window = win.window
    compare = win.compare if win.compare.present else None
    win.settle()
    win.qtbot.waitUntil(lambda: not window.pending_work(), timeout=RUN_TIMEOUT_MS)
    window.display.flush_panel_updates()
    if compare is not None and compare.page.isVisible():  # painted while it is shown
        compare.wait_diff_panels(RUN_TIMEOUT_MS)
    win.settle()  # what the flush and the comparison's panels moved


def _set_docks(win, names: tuple[str, ...]) -> None:
    for dock in win.window.findChildren(QDockWidget):
        if dock.objectName() in ("modelDock", "editsDock", "datasetDock", "liveDock"):
            wanted = dock.objectName() in names
            if dock.isVisible() != wanted:
                dock.toggleViewAction().trigger()


def _set_tab(win, title: str) -> None:
    tabs = win.window.centre.tabs
    for i in range(tabs.count()):
        if tabs.tabText(i) == title:
            tabs.setCurrentIndex(i)
            return
    raise KeyError(f"no tab {title!r}")


def _set_channel(win, layer: str, shown: bool) -> None:
    centre = win.window.centre
    _set_tab(win, "Layers")  # the channel view is on it: hidden with it otherwise
    if shown and centre.channel_box.isHidden():
        assert win.window.display.open_channel(layer, 0)
    elif not shown and not centre.channel_box.isHidden():
        centre.channel_view.close_button.click()
    assert centre.channel_box.isHidden() != shown


def _prepare(win) -> str:
    """A result with an edit (the Edits dock has a row), a pin compared with (the Compare tab
    has panels); returns a layer shown as maps (for the channel view)."""
    window = win.window
    result = win.window.session.result
    maps = [n for n, layer in result.layers.items() if layer.shape and len(layer.shape) == 4]
    assert maps
    pin = window.pins_ui.pin_result()
    from actviz.core.edit_kinds import ablate

    with win.expect_run():
        win.whatif.add_edit(maps[0], ablate([0]))
    compare = win.compare.feature
    with win.qtbot.waitSignal(compare.compare_finished, timeout=RUN_TIMEOUT_MS):
        assert window.pins_ui.compare_with_pin(pin)
    _settle_with_compare(win)
    return maps[0]


def walk(win, label: str, sizes, dock_sets, tabs, channels) -> tuple[list[str], list[str]]:
    """Put the window in every state of the matrix; return (new problems, known problems),
    each line naming the state."""
    layer = _prepare(win)
    new, known = [], []

    def check(state: str) -> None:
        problems = layout_problems(win.window)
        if problems:
            # What a moment and a paint put right is not what a user sees: look again.
            win.qtbot.wait(200)
            win.window.grab()
            win.settle()
            problems = layout_problems(win.window)
        shots = os.environ.get("ACTVIZ_LAYOUT_SHOTS")  # a folder: screenshots of failing states
        if shots and any(not _known(p) for p in problems):
            name = re.sub(r"[^\w.=+-]+", "_", f"{label} {state}")
            win.window.grab().save(os.path.join(shots, f"{name}.png"))
        for problem in problems:
            line = f"{label} {state}: {problem}"
            (known if _known(problem) else new).append(line)

    turn = itertools.count()
    for docks, channel in itertools.product(dock_sets, channels):
        _set_docks(win, DOCK_SETS[docks])
        _set_channel(win, layer, channel)
        state = f"docks={docks} channel={'open' if channel else 'closed'}"
        for size in (None, *sizes):
            if size is not None:
                # Each tab takes its turn at being the one shown through a resize (the others
                # are laid out when they are shown): every tab is resized while shown, and
                # every (size, docks, tab, channel) state is checked, with a quarter of the
                # resizes that resizing under each tab in turn would take.
                _set_tab(win, tabs[next(turn) % len(tabs)])
                win.resize(*size)
            w, h = win.window.width(), win.window.height()
            how = "" if size is None else " (after a resize)"
            for tab in tabs:
                _set_tab(win, tab)
                _settle_with_compare(win)
                check(f"{w}x{h}{how} {state} tab={tab}")
    return new, known


def _demo_run_window(actviz_window):
    win = actviz_window(size=(1280, 720), auto_run=True)
    with win.expect_run():
        assert win.window.files.load_demo()
    return win


def _resnet_window(actviz_window):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 112, 112, generator=torch.Generator().manual_seed(0))
    win = actviz_window(model, x, size=(1280, 720), auto_run=True)
    win.run_and_wait()
    return win


def _report_problems(new: list[str], known: list[str]) -> None:
    for line in sorted(set(known)):
        print("known:", line)
    assert not new, "layout problems:\n" + "\n".join(new)


@pytest.mark.parametrize("make", [_demo_run_window, _resnet_window], ids=["demo", "resnet18"])
def test_layout_holds_at_1280x720_with_and_without_docks(make, demo_resources, actviz_window):
    win = make(actviz_window)
    new, known = walk(
        win,
        make.__name__.strip("_").replace("_window", ""),
        sizes=((1280, 720),),
        dock_sets=("none", "model+edits"),
        tabs=("Layers", "Overview"),
        channels=CHANNEL,
    )
    _report_problems(new, known)


@pytest.mark.slow
@pytest.mark.parametrize("make", [_demo_run_window, _resnet_window], ids=["demo", "resnet18"])
def test_layout_holds_over_the_whole_matrix(make, demo_resources, actviz_window):
    win = make(actviz_window)
    new, known = walk(
        win,
        make.__name__.strip("_").replace("_window", ""),
        sizes=SIZES,
        dock_sets=tuple(DOCK_SETS),
        tabs=TABS,
        channels=CHANNEL,
    )
    _report_problems(new, known)


def test_the_check_finds_a_cut_label_and_a_dock_scroll_bar(actviz_window, tiny_cnn):
    from PySide6.QtWidgets import QLabel

    from actviz.ui.panels.style import ElidedLabel

    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    win = actviz_window(tiny_cnn, x, ["conv1"])
    win.run_and_wait()
    window = win.window
    assert layout_problems(window) == [] or all(_known(p) for p in layout_problems(window))
    panel = win.panel("conv1")
    # A plain label too narrow for its number: cut without an ellipsis.
    cut = QLabel("0.123456789 0.123456789", panel)
    cut.setGeometry(0, 0, 30, 20)
    cut.show()
    # An elided label is fine once it shows "…" and the whole text as its tooltip.
    elided = ElidedLabel("features.block1.conv.weight", panel)
    elided.setGeometry(0, 30, 50, 20)
    elided.show()
    win.settle()
    found = layout_problems(window)
    labels = [p for p in found if p.kind == "label"]
    assert len(labels) == 1 and "'0.123456789" in labels[0].widget, found
    assert "cut, no ellipsis" in labels[0].detail
    cut.deleteLater()
    elided.deleteLater()
    # The live dock's content made wider than the dock: it scrolls sideways.
    dock = win.open_dock("liveDock")
    scroll = dock.widget()
    scroll.widget().setMinimumWidth(dock.width() + 200)
    win.settle()
    assert any(
        p.kind == "dock scroll bar" and "liveDock" in p.widget for p in layout_problems(window)
    )
    scroll.widget().setMinimumWidth(0)


@pytest.mark.parametrize("scanned", [False, True], ids=["empty", "map"])
def test_the_atlas_tab_holds_over_sizes_and_docks(scanned, demo_resources, actviz_window, tmp_path):
    """The Atlas tab at every size and dock set: its message before a scan, and the map of a
    ten-image scan (with its legend, the input's nearest images and the dataset dock's table)."""
    from tests.ui.atlas.atlas_windows import scan_into_atlas, write_classes

    win = _demo_run_window(actviz_window)
    atlas = win.atlas.feature
    if scanned:
        folder = tmp_path / "images"
        write_classes(folder)
        scan_into_atlas(win, folder)
        assert atlas.atlas is not None and atlas.view.dots.count() == 10
    new, known = walk(
        win,
        "demo atlas " + ("map" if scanned else "empty"),
        sizes=SIZES,
        dock_sets=tuple(DOCK_SETS),
        tabs=("Atlas",),
        channels=(False,),
    )
    # What the walk saw: the map (with the input's nearest images after the walk's runs), or
    # the message asking for a scan.
    view = atlas.view
    assert view.stack.currentIndex() == (1 if scanned else 0)
    if scanned:
        assert view.nearest_strip.count() > 0
    _report_problems(new, known)


def test_the_channel_view_fills_a_tall_window(demo_resources, actviz_window):
    """At 1280x1080 the channel view is taller than wide: its images go one above the other
    (side by side they left blank bands above and below, which the check calls 'blank')."""
    win = _demo_run_window(actviz_window)
    layer = next(n for n in win.window.session.result.shown if n.startswith("features."))
    _set_channel(win, layer, True)
    win.resize(1280, 1080)
    _settle_with_compare(win)
    view = win.window.centre.channel_view
    problems = layout_problems(win.window)
    assert not problems, "\n".join(map(str, problems))
    assert view.height() > view.width() and view.is_stacked()
    win.resize(1920, 1080)  # wide again: side by side
    _settle_with_compare(win)
    assert not view.is_stacked()
    problems = layout_problems(win.window)
    assert not problems, "\n".join(map(str, problems))
