"""actviz.testing's leak checks and driver on real widgets and a tiny model: each check reports
what was deliberately left behind, and nothing when it was cleaned up."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from PySide6.QtWidgets import QDialog, QMenu, QWidget

from actviz.testing import (
    ProcessState,
    assert_no_hooks,
    hooks_left,
    leaked_widgets,
    painted_pixels,
    top_level_widgets,
)
from actviz.testing.checks import flush_deletes
from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "conv2", "fc"]


def test_a_deliberately_leaked_widget_is_reported_and_a_deleted_one_is_not(qapp):
    before = top_level_widgets()
    dialog = QDialog()  # no parent: a top-level widget nobody deletes
    dialog.setObjectName("forgotten")
    hidden = QWidget()
    child_menu = QMenu(dialog)  # a window of its own, but deleted with its parent
    left = leaked_widgets(before)
    assert {w.objectName() for w in left} >= {"forgotten"}
    assert set(map(id, left)) == {id(dialog), id(hidden), id(child_menu)}
    hidden.deleteLater()
    dialog.deleteLater()  # takes child_menu with it
    del dialog, hidden, child_menu, left
    flush_deletes()
    assert leaked_widgets(before) == []


def test_a_widget_only_a_dead_python_object_holds_is_not_a_leak(qapp):
    class Holder:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it
            self.menu = QMenu()

    before = top_level_widgets()
    Holder()
    assert leaked_widgets(before) == []


def test_hooks_left_names_every_kind_of_hook_on_any_submodule():
    model = TinyCNN()
    assert hooks_left(model) == []
    handles = [
        model.conv1.register_forward_hook(lambda m, i, o: None),
        model.conv2.register_forward_pre_hook(lambda m, i: None),
        model.fc.register_full_backward_hook(lambda m, gi, go: None),
        model.register_forward_hook(lambda m, a, k, o: None, with_kwargs=True),
    ]
    left = hooks_left(model)
    assert [line.split(":")[0] for line in left] == [
        "(model) still has _forward_hooks",
        "(model) still has _forward_hooks_with_kwargs",
        "conv1 still has _forward_hooks",
        "conv2 still has _forward_pre_hooks",
        "fc still has _backward_hooks",
    ]
    with pytest.raises(AssertionError, match="conv1 still has _forward_hooks"):
        assert_no_hooks(model)
    for handle in handles:
        handle.remove()
    assert_no_hooks(model)


def test_process_state_sees_the_switch_interval_threads_and_global_hooks():
    before = ProcessState.now()
    assert before.changes_since(before) == []
    interval, threads = sys.getswitchinterval(), torch.get_num_threads()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        sys.setswitchinterval(interval * 2)
        torch.set_num_threads(threads + 1)
        changes = ProcessState.now().changes_since(before)
    finally:
        sys.setswitchinterval(interval)
        torch.set_num_threads(threads)
        handle.remove()
    assert [c.split(" changed")[0].split(" went")[0] for c in changes] == [
        "sys.getswitchinterval()",
        "torch.get_num_threads()",
        "global module hooks",
    ]
    assert ProcessState.now().changes_since(before) == []


def test_the_driver_ticks_runs_and_reads_what_the_panels_paint(actviz_window):
    torch.manual_seed(0)
    model = TinyCNN().eval()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(model, x, ["conv1"])
    result = win.run_and_wait()
    assert list(win.window.host.layer_panels) == ["conv1"] and win.status_text()
    win.tick("conv2", "fc")
    result = win.run_and_wait()
    assert list(result.layers) == LAYERS
    # What is painted: the mosaic's colour indices through the panel's 256-colour table.
    shown = result.layers["conv2"].mosaic
    pixels = win.shown_pixels("conv2")
    assert pixels.shape == (*shown.image.shape, 4) and pixels.dtype == np.uint8
    canvas = win.panel("conv2").activation_slot.image_canvas
    np.testing.assert_array_equal(pixels, painted_pixels(canvas.image))
    table = canvas.image.lut
    np.testing.assert_array_equal(pixels[..., :3], table[shown.indices][..., :3])
    with pytest.raises(ValueError, match="bars"):
        win.shown_pixels("fc")
    win.untick("conv1")
    assert "conv1" not in win.run_and_wait().layers
    with pytest.raises(KeyError, match="conv1"):
        win.panel("conv1")


def test_the_driver_ablates_from_the_tile_menu_and_opens_docks(actviz_window):
    torch.manual_seed(0)
    model = TinyCNN().eval()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(model, x, LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    with win.expect_run():
        action = win.context_action("conv2", 1, "Ablate")
    assert action.text() == "Ablate ch 1"
    assert not np.abs(win.window.session.result.layers["conv2"].view.data[1]).any()
    assert win.window.session.result.layers["conv2"].view.data[0].any()
    whatif = win.whatif.feature
    assert whatif.dock.isVisible()
    dock = win.open_dock("Model")
    assert dock.isVisible()
    win.resize(900, 600)
    assert (win.window.width(), win.window.height()) == (900, 600)


def test_a_deleted_window_leaves_no_plot_menus_while_python_still_holds_it(actviz_window):
    """pyqtgraph makes each plot's "Plot Options" menu without a parent; the window's plots
    delete theirs with themselves, so a reference to the dead window (a log record's
    traceback, a test's variable) does not keep top-level menus alive."""
    before = top_level_widgets()
    held = actviz_window().window
    held.close()
    held.deleteLater()
    flush_deletes()
    assert leaked_widgets(before) == []
    assert held is not None  # still referenced here


def test_live_array_mib_counts_each_storage_and_buffer_once():
    from actviz.testing.checks import live_array_mib

    before = live_array_mib()
    tensor = torch.zeros(4, 2**20, dtype=torch.uint8)  # 4 MiB
    views = [tensor[0], tensor.view(-1), tensor.numpy()]  # the same storage, no new bytes
    array = np.ones(3 * 2**20, dtype=np.uint8)  # 3 MiB, held by a list
    holder = [array, array[::2]]
    after = live_array_mib()
    assert after["tensors"] - before["tensors"] == pytest.approx(4, abs=0.01)
    assert after["arrays"] - before["arrays"] == pytest.approx(3, abs=0.01)
    del views, holder


def test_python_heap_mib_sees_objects_that_malloc_does_not():
    from actviz.testing.checks import python_heap_mib

    before = python_heap_mib()
    assert before["python_arenas"] >= before["python_heap"] > 0
    held = [(i, float(i)) for i in range(200_000)]  # small objects: pymalloc's, not malloc's
    after = python_heap_mib()
    assert after["python_heap"] - before["python_heap"] > 10
    del held
