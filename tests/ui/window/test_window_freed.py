"""A closed window is freed, whatever was pending on its event loop when it closed (the
stress run kept a whole window alive: a dock shown just before the close had queued a
zero-timer call to fit its width, and PySide keeps such a call's function, and the window it
closes over, when the timer's context object is deleted before it fires)."""

from __future__ import annotations

import gc
import weakref

from PySide6.QtWidgets import QDockWidget

from actviz.testing.checks import flush_deletes


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
