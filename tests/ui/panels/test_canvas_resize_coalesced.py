"""A canvas resized several times in one event-loop turn fits its scene once, at the last
size, when it is next painted or on the next turn (issue #37: a layout pass after an edit
resized each panel's canvas up to 7 times, each fitting pyqtgraph's scene: 135 ms of GUI
thread); what it shows and reads is then the last size's."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QCoreApplication

from actviz.ui.panels.canvas import ImageCanvas
from tests.ui.qt_helpers import scene_fits


def test_resizes_in_one_turn_fit_the_scene_once(qtbot, monkeypatch):
    canvas = ImageCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(300, 200)
    canvas.show()
    qtbot.waitExposed(canvas)
    image = np.arange(20 * 30, dtype=np.float32).reshape(20, 30)
    canvas.set_image(image, (0.0, float(image.max())))
    qtbot.waitUntil(lambda: scene_fits(canvas))
    fitted = []
    resize = ImageCanvas._resize

    def counted(self, event, **kwargs):
        fitted.append(event.size().toTuple())
        return resize(self, event, **kwargs)

    monkeypatch.setattr(ImageCanvas, "_resize", counted)
    heard = []
    canvas.resized.connect(lambda: heard.append(canvas.width()))
    for size in ((340, 220), (280, 190), (360, 240)):
        canvas.resize(*size)
    assert fitted == []  # not yet: the turn is not over
    assert heard == [340, 280, 360]  # whoever follows the width hears of each at once
    for _ in range(5):
        QCoreApplication.processEvents()
    assert fitted == [(360, 240)]
    assert scene_fits(canvas)
    # A size and back within a turn leaves the scene as it is: nothing to fit.
    canvas.resize(300, 200)
    canvas.resize(360, 240)
    for _ in range(5):
        QCoreApplication.processEvents()
    assert fitted == [(360, 240)]
    # Read before the turn ends, the canvas fits first: the image's corner is where it shows.
    canvas.resize(320, 200)
    corner = canvas.image_to_widget(30.0, 20.0)
    assert fitted[-1] == (320, 200) and scene_fits(canvas)
    rect = canvas.image_rect_on_screen()
    assert abs(corner.x() - rect.right()) <= 1.5 and abs(corner.y() - rect.bottom()) <= 1.5
