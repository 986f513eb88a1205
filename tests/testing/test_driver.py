"""The public driver as a test author uses it: one ``tick`` signature with checked names,
``wait_idle()`` answering, channel counts, the prediction before and after an edit, and the
layout settling after a resize."""

from __future__ import annotations

import pytest
import torch

import actviz
from actviz.testing import Prediction
from tests.helpers import frame
from tests.ui.tiny_models import seeded_tiny_cnn


@pytest.mark.parametrize("form", ["names", "list"])
def test_tick_takes_names_or_a_list_on_the_driver_and_the_window(actviz_window, form):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1"])
    args = ("conv2", "fc") if form == "names" else (["conv2", "fc"],)
    win.tick(*args)
    assert set(win.session.ticked) >= {"conv1", "conv2", "fc"}
    win.untick(*args)
    assert not {"conv2", "fc"} & set(win.session.ticked)
    win.window.script.tick(*args)
    assert set(win.session.ticked) >= {"conv2", "fc"}
    win.window.script.tick(*args, ticked=False)  # untick() is deprecated on the façade
    assert win.session.ticked == ["conv1"]


@pytest.mark.parametrize("who", ["driver", "window"])
def test_an_unknown_layer_name_raises_with_close_matches(actviz_window, who):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1"])
    target = win if who == "driver" else win.window.script
    with pytest.raises(ValueError, match=r"'conv3'.*did you mean 'conv\d', 'conv\d'"):
        target.tick("conv3")
    with pytest.raises(ValueError, match="'fcc'.*'fc'"):
        if who == "driver":
            target.untick(["conv1", "fcc"])
        else:
            target.tick(["conv1", "fcc"], ticked=False)
    # Nothing changed: the check comes before any tick.
    assert win.session.ticked == ["conv1"]
    with pytest.raises(TypeError, match="untick"):
        win.window.script.tick(["conv1"], False)  # the old (names, ticked) form says what to use


def test_wait_idle_answers_on_the_driver_and_the_window(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1"], auto_run=True, debounce_ms=400)
    win.window.runs.schedule_run()
    # A run is due: no time to wait gives False on both, then both wait for it and say True.
    assert win.window.script.wait_idle(0) is False
    assert win.wait_idle(0) is False
    assert win.wait_idle() is True
    assert win.window.script.wait_idle() is True
    assert win.window.session.result is not None


def test_channels_counts_what_each_panel_pages_through(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1", "conv2", "fc"])
    win.run_and_wait()
    assert [win.channels(n) for n in ("conv1", "conv2", "fc")] == [4, 6, 5]
    with pytest.raises(KeyError, match="relu"):
        win.channels("relu")


def test_prediction_before_and_after_an_ablation(actviz_window):
    model, x = seeded_tiny_cnn(), frame(1)
    win = actviz_window()
    win.set_model(model, ["conv2", "fc"], categories=list("abcde"))
    win.set_input(x)
    with pytest.raises(ValueError, match="no prediction"):
        win.prediction()
    win.run_and_wait()
    clean = actviz.capture(model, x, ["fc"])
    probs = torch.softmax(clean.output[0], 0)
    top = int(probs.argmax())
    assert win.prediction() == Prediction(top, "abcde"[top], pytest.approx(float(probs[top])))
    assert [p.index for p in win.predictions()] == probs.argsort(descending=True).tolist()
    # Ablating every channel of conv2 leaves only fc's bias: the prediction follows the edit.
    edit = {"conv2": actviz.edits.ablate(list(range(6)))}
    edited = actviz.capture(model, x, ["fc"], edits=edit)
    new = torch.softmax(edited.output[0], 0)
    assert int(new.argmax()) != top
    win.session.edits.add("conv2", actviz.edits.ablate(list(range(6))))
    win.run_and_wait()
    got = win.prediction()
    assert got.index == int(new.argmax()) and got.label == "abcde"[got.index]
    assert got.probability == pytest.approx(float(new.max()))
    with pytest.raises(Exception, match="frozen|cannot assign"):
        got.index = 0  # type: ignore[misc]


def test_settle_waits_for_the_layout_after_a_resize(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1", "conv2"], size=(1280, 720))
    win.run_and_wait()
    panel = win.panel("conv1")
    wide = panel.width()
    win.window.resize(900, 640)
    assert win.settle() is True
    # Settled: the panels have their new width, and another pass changes nothing.
    assert panel.width() < wide
    before = win._geometry()
    assert win.settle() is True and win._geometry() == before
