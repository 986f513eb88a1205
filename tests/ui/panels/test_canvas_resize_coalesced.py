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


def test_one_paint_fits_scenes_up_to_the_turns_budget_and_the_rest_on_later_turns(
    qtbot, monkeypatch
):
    """Six canvases resized at once and painted in one pass: with no fit budget left after the
    first fit (:data:`FIT_BUDGET_S` 0), that paint fits one scene and paints the others as they
    were; the others fit on the turns after, and all end fitted to their new size."""
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    import actviz.ui.panels.scene_fit as scene_fit

    box = QWidget()
    qtbot.addWidget(box)
    column = QVBoxLayout(box)
    canvases = [ImageCanvas() for _ in range(6)]
    image = np.arange(20 * 30, dtype=np.float32).reshape(20, 30)
    for canvas in canvases:
        column.addWidget(canvas)
        canvas.set_image(image, (0.0, float(image.max())))
    box.resize(300, 900)
    box.show()
    qtbot.waitExposed(box)
    qtbot.waitUntil(lambda: all(scene_fits(c) for c in canvases))
    monkeypatch.setattr(scene_fit, "FIT_BUDGET_S", 0.0, raising=False)
    before = [c.width() for c in canvases]
    fitted = []
    resize = ImageCanvas._resize
    monkeypatch.setattr(
        ImageCanvas, "_resize", lambda self, event: (fitted.append(self), resize(self, event))[1]
    )
    box.resize(420, 900)
    box.repaint()  # one paint pass over all six, before any deferred fit
    assert len(fitted) == 1
    assert sum(not scene_fits(c) for c in canvases) == 5
    qtbot.waitUntil(lambda: all(scene_fits(c) for c in canvases))
    assert sorted(map(id, fitted)) == sorted(map(id, canvases))  # each fitted once
    assert all(c.width() == w + 120 for c, w in zip(canvases, before, strict=True))
