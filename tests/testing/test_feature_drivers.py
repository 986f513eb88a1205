"""The per-feature drivers on the public driver (``win.live``, ``win.compare``,
``win.sessions``, ...) and ``actviz_window(features=[...])`` building only the features named."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtWidgets import QApplication

from actviz.core.capture import capture
from actviz.io.input_files import open_input
from actviz.testing.plugin import feature_classes
from actviz.ui.live.frames import TensorFrames
from actviz.ui.window.main_window import default_features
from tests.helpers import frame, random_frames
from tests.ui.tiny_models import seeded_tiny_cnn

LAYERS = ["conv1", "conv2", "fc"]


def _feature_names(win) -> set[str]:
    """The window's features but the plugin host (always there)."""
    return set(win.window.features) - {"plugins"}


def test_a_window_builds_only_the_features_it_names(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1"], features=["live", "compare"])
    assert _feature_names(win) == {"live", "compare"}
    assert win.live.feature is win.feature("live")
    with pytest.raises(KeyError, match="no feature 'whatif'"):
        win.whatif.add_edit("conv1", None)
    assert _feature_names(actviz_window(features=[])) == set()
    assert _feature_names(actviz_window()) == {make.name for make in default_features()}


def test_features_are_named_or_given_as_classes_and_a_wrong_name_lists_the_names():
    live, compare = (
        next(m for m in default_features() if m.name == n) for n in ("live", "compare")
    )
    assert feature_classes(["compare", live]) == [compare, live]
    with pytest.raises(ValueError, match=r"no feature 'lve'; the features are \[.*'live'"):
        feature_classes(["lve"])


def test_the_live_driver_plays_a_clip_and_reads_out_paused(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), LAYERS, auto_run=True, features=["live"])
    win.run_and_wait()
    live = win.live.configure(max_fps=1000)
    assert live is win.live.controller
    clip = random_frames(3, 2)
    live.set_source(TensorFrames(clip, "clip"))
    win.live.wait_frames(1)
    win.live.wait_idle()
    assert live.frames_shown >= 1
    shown = win.window.session.result.capture.inputs
    assert any(torch.equal(shown, clip[i : i + 1]) for i in range(3))
    live.pause()
    win.live.wait_idle()
    assert win.live.status_text() == "live paused"
    assert win.live.stats_text().startswith("paused · capture ")
    assert win.live.show_dock().isVisible()


def test_the_compare_driver_compares_with_an_input_and_paints_the_differences(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(3), LAYERS, features=["compare"])
    win.run_and_wait()
    view = win.compare.compare_with_input("random:1x3x16x16:5")
    model = win.session.model
    cap_a = win.window.session.result.capture
    cap_b = capture(model, open_input("random:1x3x16x16:5", model=model).value, LAYERS)
    assert view.chart.names == LAYERS
    assert win.compare.show_page() is win.window.centre.tabs.currentWidget()
    win.compare.wait_diff_panels()
    diff = (cap_a["conv2"].tensor - cap_b["conv2"].tensor)[0].numpy()
    np.testing.assert_allclose(view.diffs.panels["conv2"].activation_slot.view.data, diff)


def test_the_sessions_driver_saves_and_opens_a_session(actviz_window, tmp_path):
    win = actviz_window(seeded_tiny_cnn(), frame(2), ["conv1", "fc"], features=["sessions"])
    win.run_and_wait()
    path = tmp_path / "s.actviz"
    win.sessions.save(path)
    assert path.is_file()
    # A model given in code is not in the file: the other window shows the same one.
    other = actviz_window(seeded_tiny_cnn(), frame(4), ["conv1"], features=["sessions"])
    other.sessions.open(path)
    assert other.session.ticked == win.session.ticked
    assert torch.equal(other.session.input.value, frame(2))


def test_the_sessions_driver_saves_pins_without_waiting_on_the_question(actviz_window, tmp_path):
    # Pins holding captures make saving ask keep-or-leave-out in a modal box: the driver's save
    # waited on it for good. It answers ``pin_captures`` (keep, unless False).
    win = actviz_window(seeded_tiny_cnn(), frame(2), ["conv1", "fc"], features=["sessions"])
    win.run_and_wait()
    win.window.commands.pin_action.trigger()  # Ctrl+P
    assert len(win.session.pins) == 1
    kept, left = tmp_path / "kept.actviz", tmp_path / "left.actviz"
    win.sessions.save(kept)
    win.sessions.save(left, pin_captures=False)
    assert kept.stat().st_size > left.stat().st_size
    pinned = list(win.session.pins)[0].result.capture["conv1"].tensor
    other = actviz_window(seeded_tiny_cnn(), frame(4), ["conv1"], features=["sessions"])
    other.sessions.open(kept)
    (pin,) = other.session.pins
    assert torch.equal(pin.result.capture["conv1"].tensor, pinned)
    other.sessions.open(left)  # a pin without its capture is named, not restored
    assert not list(other.session.pins)
    assert any("saved without its capture: not restored" in m for m in other.banner_messages())


def test_a_driver_says_whether_its_feature_is_built(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1"], features=["live"])
    assert win.live.present and not win.compare.present and not win.visualize.present
    assert all(
        getattr(actviz_window(features=[]), name).present is False
        for name in ("live", "compare", "dataset", "effects", "whatif", "tokens", "sessions")
    )


def test_the_visualize_driver_sets_the_boxes_and_makes_a_page(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), LAYERS, features=["visualize"])
    win.run_and_wait()
    section = win.visualize.configure(size=16, steps=2)
    assert section is win.visualize.feature.section
    assert (section.size_spin.value(), section.steps_spin.value()) == (16, 2)
    win.window.session.set_page_channels("conv2", 6)  # the panel shows all 6
    assert win.visualize.visualise_page("conv2", 0)
    win.visualize.wait_idle()
    page = win.visualize.page
    assert page.channels == (0, 1, 2, 3, 4, 5)
    assert page.dock.message.text().startswith("6 channels at 2 steps, 16 px;")


def test_the_concepts_driver_attaches_a_folder_and_opens_a_concept(actviz_window, tmp_path):
    import actviz

    win = actviz_window(seeded_tiny_cnn(), frame(1), LAYERS, features=["concepts"])
    win.run_and_wait()
    vectors = torch.randn(600, 6, generator=torch.Generator().manual_seed(1)).abs()
    trained = actviz.concepts.train(vectors, "conv2", n_concepts=8, k=2, epochs=1, batch_size=128)
    folder = trained.save(tmp_path / "concepts-conv2")
    assert win.concepts.open_folder(folder)
    assert win.session.concepts["conv2"].concepts.same_as(trained)
    win.window.display.flush_panel_updates()
    assert win.concepts.open_concept("conv2", 1)
    label = win.concepts.view.effect_label
    win.qtbot.waitUntil(lambda: "Removing it" in label.text(), timeout=10_000)


def test_the_effects_driver_opens_the_dock_and_returns_the_estimates(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), LAYERS, features=["effects"])
    win.run_and_wait()
    assert win.effects.feature.effects is None  # nothing is estimated while the dock is closed
    estimates = win.effects.open()
    assert estimates is win.effects.feature.effects
    assert win.effects.dock.isVisible()
    assert set(win.effects.view.sections) == set(LAYERS)


def test_a_modal_box_nobody_answers_fails_the_test_instead_of_hanging_it(
    actviz_window, qtbot, tmp_path
):
    # Opening a full pickle asks whether to trust it, in a modal box: a test that did not expect
    # the question waited on it for good. The driver rejects it (Esc) after its patience and
    # raises into Qt, which pytest-qt turns into the test's failure.
    path = tmp_path / "whole.pt"
    torch.save(seeded_tiny_cnn(), path)  # a whole pickled model: not opened without trust
    win = actviz_window(features=[])
    win.modal_patience_s = 0.5
    with qtbot.capture_exceptions() as raised:
        assert win.window.files.open_model_source(str(path))
        assert win.wait_idle()
    ((kind, error, _),) = raised
    assert kind is TimeoutError and "whole.pt" in str(error) and "(Esc)" in str(error)
    assert win.session.model is None and QApplication.activeModalWidget() is None
