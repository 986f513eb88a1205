"""A closed window is freed, whatever was pending on its event loop when it closed (the
stress run kept a whole window alive: a dock shown just before the close had queued a
zero-timer call to fit its width, and PySide keeps such a call's function, and the window it
closes over, when the timer's context object is deleted before it fires)."""

from __future__ import annotations

import gc
import weakref

import torch
from PySide6.QtWidgets import QDockWidget

from actviz.core.edit_kinds import ablate
from actviz.testing.checks import flush_deletes
from actviz.ui.dataset.dialog import ScanSpec
from actviz.ui.live.frames import TensorFrames
from tests.data.conftest import write_images
from tests.ui.conftest import frame
from tests.ui.tiny_models import TinyCNN


def test_a_window_closed_right_after_a_dock_is_shown_is_freed(qapp):
    from actviz.bench.ui_bench import scratch_settings
    from actviz.ui.window.main_window import MainWindow

    window = MainWindow(settings=scratch_settings())
    window.show()
    qapp.processEvents()
    hidden = [d for d in window.findChildren(QDockWidget) if not d.isVisible()]
    assert hidden, "every dock is shown at start"
    for dock in hidden:
        dock.show()  # each queues the fit of its width for the next event-loop turn
    window.close()
    window.deleteLater()
    alive = weakref.ref(window)
    del window, hidden, dock
    flush_deletes()
    gc.collect()
    flush_deletes()
    assert alive() is None


def test_the_model_before_a_switch_is_freed_whatever_the_features_did(actviz_window, tmp_path):
    """Nothing of the window keeps the model it showed before, once a pin, an edit, the
    estimates, a comparison, live frames, a page of pictures, the channel view and a mapped
    scan used it (the last run's request held a whole model's weights until the next run)."""
    torch.manual_seed(0)  # (the driver keeps the model it opens with: its hooks are checked)
    win = actviz_window(TinyCNN().eval(), None, ["conv1", "conv2"], size=(1300, 820))
    window = win.window
    window.script.set_model(TinyCNN().eval(), layers=["conv1", "conv2", "fc"])
    window.script.set_input(frame(1))
    win.run_and_wait()
    before = weakref.ref(window.session.model)
    pin = window.pins_ui.pin_result()
    win.whatif.add_edit("conv1", ablate([1]))
    win.run_and_wait()
    win.effects.open()
    win.compare.compare_with_pin(pin)
    live = win.live.controller
    live.set_source(TensorFrames(torch.cat([frame(s) for s in range(4)]), "clip"))
    live.play()
    win.live.wait_frames(live.frames_shown + 3)
    live.pause()
    win.live.wait_idle()
    win.visualize.configure(size=16, steps=4)
    assert win.visualize.visualise_page("conv2")
    win.visualize.wait_idle()
    assert window.display.open_channel("conv2", 1)
    write_images(tmp_path, 6)
    win.dataset.in_process()
    win.atlas.scan_and_map(ScanSpec(str(tmp_path), ("conv2",), 6, 3))
    win.wait_idle()
    del pin
    window.script.set_model(TinyCNN().eval(), layers=["conv1"])
    win.wait_idle()
    gc.collect()
    assert before() is None
    # The toolbar's normalisation still re-prepares what the window shows (a run of the new model).
    win.run_and_wait()
    combo = window.commands.normalize_combo
    combo.setCurrentIndex(combo.findData("shared"))
    win.wait_idle()
    window.display.flush_panel_updates()
    assert window.host.layer_panels["conv1"].activation_slot.mosaic.normalize == "shared"
