"""The stress run's dialog answerer calls an Open model dialog stuck only when it is busy and
says nothing new: a first architecture guess says what it tries for 9-20 s on two cores, which
a gpt2 run counted as stuck."""

from __future__ import annotations

from types import SimpleNamespace

from actviz.testing import stress_dialogs
from actviz.testing.stress_dialogs import DialogAnswerer
from actviz.ui.window.dialogs import OpenModelDialog


def test_a_busy_open_dialog_is_stuck_only_when_it_says_nothing_new(qtbot, monkeypatch):
    stuck: list[str] = []
    driver = SimpleNamespace(params={"answer": "accept"}, note_stuck=stuck.append)
    answerer = DialogAnswerer(driver)
    dialog = OpenModelDialog(None, recent=[], keep_open=True)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.set_busy(True, "Opening my.pt…")
    key = id(dialog)
    clock = [100.0]
    monkeypatch.setattr(stress_dialogs.time, "perf_counter", lambda: clock[0])
    answerer._seen[key] = clock[0]
    answerer._answer_dialog(dialog)  # the text is read: the clock starts from now
    for text in ("trying resnet18…", "trying resnet34…", "trying vgg16…"):
        clock[0] += stress_dialogs.DIALOG_STUCK_S - 1
        dialog.set_busy(True, f"Guessing the architecture of the weights: {text}")
        answerer._answer_dialog(dialog)
    assert stuck == [] and dialog.isVisible()  # 3 x 19 s, each with news
    clock[0] += stress_dialogs.DIALOG_STUCK_S + 1
    answerer._answer_dialog(dialog)  # 21 s without a word
    assert stuck == [
        "the Open model dialog stayed busy: "
        "'Guessing the architecture of the weights: trying vgg16…'"
    ]
