"""A progress step never paints the window on the spot (#37: ``QProgressBar.setValue`` repaints
at once, and that immediate repaint painted every canvas waiting for a paint inside the
progress report: blocks of 80-180 ms in the stress run, at ``set_busy`` / ``set_progress``)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject

from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.style import ProgressBar
from tests.ui.conftest import frame


def test_a_progress_step_leaves_the_canvases_paint_to_the_event_loop(actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), ["conv1", "conv2"])
    win.run_and_wait()
    win.settle()
    bar = win.window.status.progress_bar
    assert isinstance(bar, ProgressBar)
    bar.setRange(0, 100)
    bar.setVisible(True)
    win.settle()
    canvases = [c for c in win.window.findChildren(ImageCanvas) if c.on_screen()]
    assert canvases
    painted: list[ImageCanvas] = []

    class Paints(QObject):
        def eventFilter(self, watched, event):  # noqa: N802 - Qt name
            if event.type() == QEvent.Type.Paint:
                painted.append(watched.parentWidget())
            return False

    spy = Paints()
    for canvas in canvases:
        canvas.viewport().installEventFilter(spy)
    for step, (low, high) in enumerate(((0, 100), (0, 0), (0, 40))):
        for canvas in canvases:
            canvas.viewport().update()  # a new frame waits for its paint
        bar.setRange(low, high)
        bar.setValue(10 + 20 * step)
        bar.reset()
        assert painted == []  # a plain QProgressBar painted them here, at once
        win.settle()
        win.window.grab()
        assert set(canvases) <= set(painted)  # painted with the rest, by the event loop
        painted.clear()
    assert bar.value() == -1 and (bar.minimum(), bar.maximum()) == (0, 40)
