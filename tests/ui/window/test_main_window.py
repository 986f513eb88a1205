"""The explorer window, driven with qtbot on real tiny models and a random-init ResNet-18."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication
from torch import nn

from actviz.core.capture import capture
from actviz.display.mosaic import MIN_PAGE_CHANNELS, mosaic, page_channels_for
from actviz.io.models.demo_model import DEMO_CLASSES, build_demo_model, generate_image
from actviz.testing import RUN_TIMEOUT_MS, assert_no_hooks
from actviz.ui.tree.dock import NameRole
from actviz.ui.window.main_window import MainWindow
from actviz.ui.window.script import MovedWarning
from actviz.ui.window.settings import AppSettings
from tests.core.seed_models import SeedMLP
from tests.helpers import frame
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.ui.tiny_models import SIZE, TINY_LAYERS, TinyCNN, seeded_tiny_cnn  # noqa: F401 - an arch string names it here

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()

LEFT = Qt.MouseButton.LeftButton


# -------------------------------------------------------------------------------- basics
def test_title_tree_and_exactly_the_ticked_panels(qtbot, actviz_window):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    assert "actviz" in window.windowTitle() and "TinyCNN" in window.windowTitle()
    assert list(window.host.layer_panels) == ["conv1", "conv2", "fc"]
    result = window.session.result
    expected = capture(model, frame(1), ["conv1", "conv2", "fc"])
    shapes = {"conv1": (4, 16, 16), "conv2": (6, 8, 8), "fc": (5,)}
    for name, shape in shapes.items():
        layer = result.layers[name]
        panel = window.host.layer_panels[name]
        assert layer.view.data.shape == shape
        assert panel.activation_slot.view is layer.view
        np.testing.assert_allclose(layer.view.data, expected[name].tensor[0].numpy(), rtol=1e-5)
        np.testing.assert_allclose(
            layer.grad_view.data, expected[name].grad[0].abs().numpy(), rtol=1e-5, atol=1e-8
        )
    assert result.layers["conv1"].mosaic.channels == 4
    assert result.layers["fc"].view.kind == "bars" and result.layers["fc"].mosaic is None
    # The tree shows output shapes after the run.
    tm = window.model_dock.tree_model
    assert tm.index_of("conv2", 2).data() == "1×6×8×8"
    # Overview: top-5 of 5 classes, stats per layer, gradient flow per layer.
    assert len(window.centre.prediction_panel.predictions()) == 5
    assert window.centre.stats_table.names() == ["conv1", "conv2", "fc"]
    assert window.centre.grad_flow_panel.names == ["conv1", "conv2", "fc"]
    assert np.all(window.centre.grad_flow_panel.norms > 0)
    # With the Layers tab shown there is no saliency view: the backward stopped at conv1.
    assert window.centre.tabs.currentWidget() is window.centre.layers_splitter
    assert (
        window.session.result.capture.input_grads is None
        and window.centre.saliency_panel.heat is None
    )
    layer_grads = {n: window.session.result.capture[n].grad.clone() for n in ("conv1", "conv2")}
    # Showing the Overview re-runs with the input gradient; the layers' gradients are the same.
    with win.expect_run(flush=False):
        window.centre.tabs.setCurrentWidget(window.centre.overview_tab)
    cap = window.session.result.capture
    assert window.centre.saliency_panel.heat.shape == (16, 16)
    assert window.centre.saliency_panel.message_label.text() == ""  # not "Computing saliency…"
    expected = cap.input_grads.abs()[0].amax(0)
    np.testing.assert_allclose(
        window.centre.saliency_panel.heat, (expected / expected.max()).numpy(), atol=1e-6
    )
    for name, grad in layer_grads.items():
        torch.testing.assert_close(cap[name].grad, grad, rtol=0, atol=0)
    assert window.centre.gradcam_panel.current_layer() == "conv2"
    assert "ms" in window.status.timing_label.text() and "held" in window.status.timing_label.text()
    assert_no_hooks(model)


def test_ticking_reruns_automatically_and_adds_exactly_that_panel(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    with win.expect_run(flush=False):
        window.script.tick(["relu"])  # no explicit run: the debounce timer starts it
    assert list(window.host.layer_panels) == ["conv1", "relu", "conv2", "fc"]
    assert window.session.result.layers["relu"].view.data.min() >= 0
    with win.expect_run(flush=False), pytest.warns(MovedWarning, match="ticked=False"):
        window.script.untick("conv1", "fc")  # deprecated for tick(..., ticked=False)
    assert list(window.host.layer_panels) == ["relu", "conv2"]


def test_quick_changes_are_debounced_into_one_run(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    started = []
    window.run_started.connect(lambda: started.append(1))
    submitted = window.worker.submitted
    with win.expect_run(flush=False):
        window.script.tick(["relu"])
        window.script.tick(["pool"])
        window.host.set_target_text("2")
    # Every change had been made before the timer fired: one capture was ever submitted.
    assert window.worker.submitted == submitted + 1
    assert started == [1] and not window.worker.is_busy()
    assert "relu" in window.host.layer_panels and "pool" in window.host.layer_panels
    assert window.session.result.target_index == 2


def test_stale_results_are_discarded(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    finished = []
    window.run_finished.connect(lambda: finished.append(window.session.result.target_index))
    window.runs.run()
    window.session.set_target(1)
    window.runs.run()
    window.session.set_target(3)
    window.runs.run()
    # The worker is idle only once all three results reached it: the two stale ones were
    # dropped there, and the window shows the latest.
    qtbot.waitUntil(lambda: not window.worker.is_busy() and bool(finished), timeout=RUN_TIMEOUT_MS)
    assert finished == [3]


def test_clicking_a_channel_opens_it_beside_its_gradient(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    panel = window.host.layer_panels["conv2"]
    mosaic = panel.activation_slot.mosaic
    canvas = panel.activation_slot.image_canvas
    window.centre.layers_scroll.ensureWidgetVisible(panel)
    qtbot.waitUntil(lambda: not panel.visibleRegion().isEmpty(), timeout=10_000)
    y0, x0 = mosaic.tile_origin(4)
    point = canvas.image_to_widget(x0 + 2.5, y0 + 3.5)
    with qtbot.waitSignal(panel.channel_clicked, timeout=10_000):
        qtbot.mouseClick(canvas.viewport(), LEFT, pos=point)
    assert window.centre.channel_box.isVisible()
    layer = window.session.result.layers["conv2"]
    assert window.centre.channel_view.channel == 4
    np.testing.assert_array_equal(window.centre.channel_view.activation, layer.view.data[4])
    np.testing.assert_array_equal(window.centre.channel_view.gradient, layer.grad_view.data[4])
    assert window.display.selected_layer == "conv2"
    assert window.centre.histogram_panel.counts.sum() == 6 * 8 * 8


def _page_fits_width(window: MainWindow, name: str) -> int:
    """Wait-able: the page size layer ``name`` shows once its panel's width is known (0
    before), checked against the rule: tiles >= 32 px, at least MIN_PAGE_CHANNELS channels."""
    panel = window.host.layer_panels[name]
    m = panel.activation_slot.mosaic
    width = panel.mosaic_width()
    if m is None or not width:
        return 0
    want = page_channels_for(
        m.total_channels, m.tile_h, m.tile_w, width, min_channels=MIN_PAGE_CHANNELS
    )
    return want if m.page_size == want else 0


def test_paging_through_the_channels_of_a_wide_layer(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    window.script.set_model(model, layers=["layer3", "layer4"])
    window.script.set_input(frame(1, 64))
    win.run_and_wait()
    narrow, wide = window.host.layer_panels["layer3"], window.host.layer_panels["layer4"]
    # Pages follow the panels' widths: as many 4x4 / 2x2 tiles as stay >= 32 px wide.
    qtbot.waitUntil(lambda: _page_fits_width(window, "layer3") > 0, timeout=30_000)
    qtbot.waitUntil(lambda: _page_fits_width(window, "layer4") > 0, timeout=30_000)
    n3, size = _page_fits_width(window, "layer3"), _page_fits_width(window, "layer4")
    assert MIN_PAGE_CHANNELS <= n3 < 256 and MIN_PAGE_CHANNELS <= size < 256
    assert narrow.activation_slot.image_canvas.grid.tile_screen_px() >= 32
    assert wide.activation_slot.image_canvas.grid.tile_screen_px() >= 32
    assert window.session.page_channels == {"layer3": n3, "layer4": size}
    assert narrow.page_bar.text() == f"ch 0-{n3 - 1} of 256"
    assert wide.page_bar.text() == f"ch 0-{size - 1} of 512"
    assert not wide.page_bar.prev_button.isEnabled() and wide.page_bar.next_button.isEnabled()
    window.centre.layers_scroll.ensureWidgetVisible(wide)
    qtbot.waitUntil(lambda: not wide.page_bar.next_button.visibleRegion().isEmpty(), timeout=10_000)
    qtbot.mouseClick(wide.page_bar.next_button, LEFT)
    layer = window.session.result.layers["layer4"]
    assert wide.page_bar.text() == f"ch {size}-{2 * size - 1} of 512"
    assert wide.page_bar.prev_button.isEnabled() and wide.page_bar.next_button.isEnabled()
    assert window.session.channel_pages == {"layer4": size}
    # The result is not edited (it may be pinned): the panel shows a new page of its views.
    assert layer.mosaic.first_channel == 0
    m, gm = wide.activation_slot.mosaic, wide.gradient_slot.mosaic
    assert (m.first_channel, m.channels, gm.first_channel) == (size, size, size)
    ref = mosaic(layer.view.data[size : 2 * size], pad=0)
    np.testing.assert_allclose(m.image, ref.image, atol=1e-6, equal_nan=True)
    # Another normalisation re-prepares the shown capture on the same page.
    with win.expect_run():
        window.commands.normalize_combo.setCurrentIndex(
            window.commands.normalize_combo.findData("shared")
        )
    layer = window.session.result.layers["layer4"]
    m = layer.mosaic
    assert (m.normalize, m.first_channel, m.channels) == ("shared", size, size)
    assert wide.activation_slot.mosaic is m
    assert wide.page_bar.text() == f"ch {size}-{2 * size - 1} of 512"
    # One shared scale for the whole layer (every page, and the export, alike).
    ref = mosaic(layer.view.data, first_channel=size, max_channels=size, normalize="shared", pad=0)
    assert m.scale_range == (float(layer.view.data.min()), float(layer.view.data.max()))
    np.testing.assert_allclose(m.image, ref.image, atol=1e-6, equal_nan=True)
    # Hover and click name the layer's channel, not the tile's place on the page.
    target = size + 5
    canvas = wide.activation_slot.image_canvas
    y0, x0 = m.tile_origin(target)
    point = canvas.image_to_widget(x0 + 0.5, y0 + 0.5)
    qtbot.mouseMove(canvas.viewport(), point)
    qtbot.waitUntil(
        lambda: wide.status_label.text().startswith(f"ch {target}  (x=0, y=0)"), timeout=10_000
    )
    with qtbot.waitSignal(wide.channel_clicked, timeout=10_000):
        qtbot.mouseClick(canvas.viewport(), LEFT, pos=point)
    assert window.centre.channel_view.channel == target
    np.testing.assert_array_equal(window.centre.channel_view.activation, layer.view.data[target])
    assert window.session.channel_pages == {"layer4": target}
    # The channel view takes most of the tab: the mosaic's page follows its narrower width
    # and still holds the channel opened.
    qtbot.waitUntil(lambda: 0 < _page_fits_width(window, "layer4") < size, timeout=30_000)
    small = _page_fits_width(window, "layer4")
    first = target // small * small
    assert wide.page_bar.text() == f"ch {first}-{first + small - 1} of 512"
    # Closed again, the page is as wide as before and holds the channel opened.
    window.centre.channel_view.close_button.click()
    qtbot.waitUntil(lambda: _page_fits_width(window, "layer4") == size, timeout=30_000)
    assert wide.page_bar.text() == f"ch {size}-{2 * size - 1} of 512"
    # The page holds for the next run; the first page is one click back.
    win.run_and_wait()
    assert window.session.result.layers["layer4"].mosaic.first_channel == size
    assert wide.page_bar.text() == f"ch {size}-{2 * size - 1} of 512"
    qtbot.mouseClick(wide.page_bar.prev_button, LEFT)
    assert wide.page_bar.text() == f"ch 0-{size - 1} of 512"
    assert wide.activation_slot.mosaic.first_channel == 0
    assert window.session.result.layers["layer4"].mosaic.first_channel == size  # held, not edited
    assert not window.display.turn_page("layer4", -1)  # no page before the first
    assert not window.display.turn_page("layer3", -1)
    window.script.set_model(seeded_tiny_cnn(), layers=["conv1"])
    assert window.session.channel_pages == {} and window.session.page_channels == {}


def test_changing_the_target_changes_the_gradients(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    before = window.session.result
    auto = before.target_index
    other = (auto + 1) % 5
    with win.expect_run(flush=False):
        assert window.host.set_target_text(str(other))
    after = window.session.result
    assert after.target_index == other
    assert f"class {other}" in after.target_text
    np.testing.assert_array_equal(after.layers["conv1"].view.data, before.layers["conv1"].view.data)
    assert not np.allclose(
        after.layers["conv1"].grad_view.data, before.layers["conv1"].grad_view.data
    )
    # The fc gradient is one-hot on the target class.
    fc_grad = after.layers["fc"].grad_view.data
    assert fc_grad[other] == pytest.approx(1.0) and fc_grad.sum() == pytest.approx(1.0)


def test_target_by_class_name(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    torch.manual_seed(0)
    window.script.set_model(build_demo_model().eval(), categories=DEMO_CLASSES, layers=["fc"])
    window.script.set_input(frame(1, 64))
    win.run_and_wait()
    assert window.commands.target_combo.count() == 1 + len(DEMO_CLASSES)
    with win.expect_run(flush=False):
        assert window.host.set_target_text("star")
    assert window.session.result.target_index == DEMO_CLASSES.index("star")
    assert window.session.result.target_text.endswith(": star")
    assert window.commands.target_combo.currentText() == f"{DEMO_CLASSES.index('star')}: star"
    # An unknown name leaves the target as it was and says why.
    assert not window.host.set_target_text("hexagon")
    assert window.session.target == DEMO_CLASSES.index("star")
    assert any("hexagon" in t for t in window.centre.banner.texts())
    # Back to auto via the combo's first entry.
    with win.expect_run(flush=False):
        window.commands.target_combo.activated.emit(0)
    assert window.session.target is None


def test_resnet18_random_init(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    window.script.set_model(model)
    window.script.set_input(frame(1, 64))
    win.run_and_wait()
    assert list(window.host.layer_panels) == ["layer1", "layer2", "layer3", "layer4", "fc"]
    layers = window.session.result.layers
    assert layers["layer1"].view.data.shape == (64, 16, 16)
    assert layers["layer3"].view.data.shape == (256, 4, 4)
    assert layers["layer4"].mosaic.channels == 256 and layers["layer4"].mosaic.total_channels == 512
    # Tiles of 3 px or less (layer4 2x2) are packed without NaN padding; 4x4 keeps its gaps.
    assert [layers[n].mosaic.pad for n in ("layer1", "layer2", "layer3", "layer4")] == [1, 1, 1, 0]
    tiles = layers["layer4"].mosaic
    assert tiles.image.shape == (tiles.rows * 2, tiles.cols * 2)
    # NaN only in the unused grid cells after channel 255, none between tiles.
    assert np.isnan(tiles.image).sum() == (tiles.rows * tiles.cols - 256) * 4
    assert tiles.channel_at(*reversed(tiles.tile_origin(255))) == 255
    assert layers["layer4"].grad_mosaic.pad == 0
    assert np.isnan(layers["layer2"].mosaic.image).any()  # 8x8 tiles keep their 1 px gap
    assert layers["fc"].view.data.shape == (1000,)
    assert window.session.result.gradcam_default == "layer4"
    assert window.centre.gradcam_panel.heat.shape == (64, 64)
    # Tree: one row per named module, shapes filled for the captured ones.
    assert window.model_dock.tree_model.index_of("layer2", 2).data() == "1×128×8×8"
    assert_no_hooks(model)


def test_seed_mlp_two_units_per_layer(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    model = SeedMLP()
    window.script.set_model(model)
    window.script.set_input(torch.tensor([0.05, 0.1]))
    win.run_and_wait()
    assert list(window.host.layer_panels) == ["fc1", "s1", "fc2", "s2"]
    for name in ("fc1", "s1", "fc2", "s2"):
        layer = window.session.result.layers[name]
        assert layer.view.kind == "bars" and layer.view.data.shape == (2,)
        assert window.host.layer_panels[name].activation_slot.bar_canvas.count() == 2
    np.testing.assert_allclose(
        window.session.result.layers["fc1"].view.data, [0.3775, 0.3925], rtol=1e-5
    )
    assert len(window.centre.prediction_panel.predictions()) == 2
    assert window.session.result.saliency is None  # a 1-D input has no image to overlay


def test_sequences_are_heatmaps_and_scalars_are_numbers(qtbot, actviz_window):
    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 6)
            self.act = nn.GELU()
            self.score = nn.Linear(6, 1)

        def forward(self, x):
            return self.score(self.act(self.proj(x))).mean()

    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    torch.manual_seed(0)
    window.script.set_model(Seq(), layers=["proj", "score", ""])
    window.script.set_input(torch.randn(1, 5, 8))
    win.run_and_wait()
    layers = window.session.result.layers
    assert layers["proj"].view.kind == "heatmap" and layers["proj"].view.data.shape == (5, 6)
    assert layers["score"].view.kind == "heatmap" and layers["score"].view.data.shape == (5, 1)
    assert layers[""].view.kind == "scalar"
    assert float(layers[""].view.data) == pytest.approx(float(window.session.result.capture.output))
    assert window.host.layer_panels[""].activation_slot.scalar_label.text() != ""
    assert window.session.result.predictions == ()  # a scalar output has no classes
    assert "single output" in window.session.result.target_text


# -------------------------------------------------------------------------------- bad input
def test_wrong_input_shape_shows_a_message_and_keeps_the_previous_result(qtbot, actviz_window):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    previous = window.session.result
    with qtbot.waitSignal(window.run_failed, timeout=RUN_TIMEOUT_MS) as blocker:
        window.script.set_input(torch.randn(1, 5, 16, 16))
        window.runs.run()
    assert "Run failed" in blocker.args[0]
    assert any("Run failed" in t and "channels" in t for t in window.centre.banner.texts())
    assert window.centre.banner.isVisible()
    assert window.session.result is previous
    assert list(window.host.layer_panels) == ["conv1", "conv2", "fc"]
    assert_no_hooks(model)
    window.script.set_input(frame(2))
    win.run_and_wait()
    assert not any("Run failed" in t for t in window.centre.banner.texts())


def test_a_forward_that_raises_shows_a_message(qtbot, actviz_window):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    model.fail = True
    with qtbot.waitSignal(window.run_failed, timeout=RUN_TIMEOUT_MS):
        window.runs.run()
    assert any("kaputt" in t for t in window.centre.banner.texts())
    assert_no_hooks(model)
    model.fail = False
    win.run_and_wait()


def test_nan_outputs_are_reported_and_highlighted(qtbot, actviz_window):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    model.poison = True
    win.run_and_wait()
    assert any("NaN" in t for t in window.centre.banner.texts())
    assert window.centre.banner.messages()[0][0] == "error"
    stats = {row["name"]: row for row in window.session.result.stats_rows()}
    assert stats["conv1"]["nan"] == 0
    # Predictions survive NaN logits: no crash, no NaN probabilities shown.
    assert all(np.isfinite(p) for _, _, p in window.centre.prediction_panel.predictions())
    model.poison = False
    win.run_and_wait()
    assert not any("NaN" in t for t in window.centre.banner.texts())


def test_corrupt_checkpoint_keeps_the_current_model(qtbot, actviz_window, tmp_path):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"PK\x03\x04 this is not really a checkpoint")
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        assert window.files.open_model_source(str(broken)) is True  # started in the background
    assert "broken.pt" in failed.args[0]
    assert any("broken.pt" in t for t in window.centre.banner.texts())
    assert window.session.model is model
    assert not window.status.progress_bar.isVisible() and not window.files.is_loading()
    win.run_and_wait()
    assert window.files.open_model_source(str(broken), wait=True) is False
    assert window.session.model is model


def test_unreadable_input_file_keeps_the_current_input(qtbot, actviz_window, tmp_path):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    bad = tmp_path / "noise.png"
    bad.write_bytes(b"\x89PNG definitely not an image")
    value = window.session.input.value
    with qtbot.waitSignal(window.input_load_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        window.files.open_input_source(str(bad))
    assert "noise.png" in failed.args[0]
    assert any("noise.png" in t for t in window.centre.banner.texts())
    assert window.session.input.value is value
    assert window.files.open_input_source(str(bad), wait=True) is False


def test_cancel_keeps_the_previous_result(qtbot, actviz_window):
    class Gated(nn.Module):
        """Once ``gated``, stops inside its forward until ``release`` is set."""

        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(40))
            self.gated = False
            self.entered, self.release = threading.Event(), threading.Event()

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                if self.gated and i == 1:
                    self.entered.set()
                    assert self.release.wait(10)
                x = layer(x)
            return x

    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    model = Gated()
    window.script.set_model(model, layers=["layers.0"])
    window.script.set_input(torch.randn(1, 4))
    win.run_and_wait()
    previous = window.session.result
    model.gated = True
    try:
        with qtbot.waitSignal(window.run_cancelled, timeout=RUN_TIMEOUT_MS):
            window.runs.run()
            assert model.entered.wait(10)  # the capture is inside the forward
            qtbot.waitUntil(window.status.progress_bar.isVisible, timeout=30_000)
            assert window.commands.cancel_action.isEnabled()
            window.cancel()
            model.release.set()
    finally:
        model.release.set()
    assert window.session.result is previous
    assert not window.status.progress_bar.isVisible()
    assert_no_hooks(model)


# -------------------------------------------------------------------------------- model / input
def test_untrusted_pickle_asks_before_unpickling(qtbot, actviz_window, tmp_path):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    path = tmp_path / "whole_model.pt"
    torch.save(seeded_tiny_cnn(), path)
    asked, trusts = [], []
    real_loader = window.model_loader

    def loader(source, **kwargs):
        trusts.append((kwargs["trust"], threading.current_thread() is threading.main_thread()))
        return real_loader(source, **kwargs)

    def ask(answer):
        def confirm(parent, p, msg):
            # Asked on the GUI thread, before anything is unpickled.
            asked.append((p, threading.current_thread() is threading.main_thread()))
            return answer

        return confirm

    window.model_loader = loader
    window.confirm_untrusted = ask(False)
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source(str(path))
    assert asked == [(str(path), True)]
    assert trusts == [(False, False)]  # loaded once, off the GUI thread, without trust
    assert window.session.model is model
    assert any("not trusted" in t for t in window.centre.banner.texts())
    window.confirm_untrusted = ask(True)
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        window.files.open_model_source(str(path))
    assert loaded.args == [str(path)]
    assert len(asked) == 2 and asked[1] == (str(path), True)
    assert trusts[1:] == [(False, False), (True, False)]  # asked, then loaded with trust
    assert type(window.session.model).__name__ == "TinyCNN" and window.session.model is not model
    assert window.session.model_kind == "pickle"


def test_torchscript_warning_is_a_visible_banner_and_recent(qtbot, actviz_window, tmp_path):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    path = tmp_path / "scripted.pt"
    torch.jit.script(seeded_tiny_cnn()).save(str(path))
    assert window.files.open_model_source(str(path), wait=True)
    assert window.centre.banner.isVisible()
    assert any("TorchScript" in t for t in window.centre.banner.texts())
    # Its runs warn the same sentence: the banner says it once, not once per source.
    window.script.set_input(frame(1))
    win.run_and_wait()
    assert window.session.result is not None and window.session.result.warnings
    texts = window.centre.banner.texts()
    assert sum("TorchScript" in t for t in texts) == 1, texts
    # Nothing ticked (no hook reaches its layers), and the Layers tab says why it stays empty.
    assert not window.session.ticked and not window.session.result.layers
    placeholder = window.centre.layers_placeholder
    assert placeholder.isVisibleTo(window) and "TorchScript" in placeholder.text()
    assert AppSettings(window.settings.store).recent_models()[0] == str(path)
    assert window.commands.recent_models_menu.actions()[0].text() == str(path)


def test_state_dict_needs_the_architecture_field(qtbot, actviz_window, tmp_path):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    source = seeded_tiny_cnn()
    path = tmp_path / "weights.pt"
    torch.save(source.state_dict(), path)
    assert window.files.open_model_source(str(path), wait=True) is False
    assert any("weights.pt" in t and "arch" in t for t in window.centre.banner.texts())
    assert window.files.open_model_source(
        str(path), arch="tests.ui.window.test_main_window:TinyCNN", wait=True
    )
    loaded = window.session.model
    assert torch.equal(loaded.conv1.weight, source.conv1.weight)
    assert AppSettings(window.settings.store).recent_models()[0] == (
        f"{path}|tests.ui.window.test_main_window:TinyCNN"
    )


def test_unregistered_modules_warning_is_a_visible_banner(qtbot, actviz_window):
    from tests.core.seed_models import PowLogListModel

    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    window.script.set_model(PowLogListModel())
    window.script.set_input((torch.tensor([2.0, 3.0]), torch.tensor([2.0, 2.0])))
    win.run_and_wait()
    assert window.centre.banner.isVisible()
    assert any("not registered" in t for t in window.centre.banner.texts())


def test_drop_a_file_url_opens_it_as_input_and_runs(qtbot, actviz_window, tmp_path):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    path = tmp_path / "dropped.png"
    generate_image("star", np.random.default_rng(0)).resize((16, 16)).save(path)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    enter = QDragEnterEvent(
        QPoint(20, 20), Qt.DropAction.CopyAction, mime, LEFT, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    drop = QDropEvent(
        QPointF(20, 20), Qt.DropAction.CopyAction, mime, LEFT, Qt.KeyboardModifier.NoModifier
    )
    with win.expect_run(flush=False):
        QApplication.sendEvent(window, drop)
    assert window.session.input.source == str(path)
    assert window.session.result.image.shape == (16, 16, 3)
    expected = np.asarray(Image.open(path).convert("RGB"))
    np.testing.assert_array_equal(window.session.result.image, expected)
    # Text drags are refused.
    text = QMimeData()
    text.setText("hello")
    refused = QDragEnterEvent(
        QPoint(20, 20), Qt.DropAction.CopyAction, text, LEFT, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(window, refused)
    assert not refused.isAccepted()


def test_module_details_and_train_mode(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    model = seeded_tiny_cnn()
    model.conv2.train()
    window.script.set_model(model, layers=["conv1"])
    proxy_index = window.model_dock.tree_proxy.mapFromSource(
        window.model_dock.tree_model.index_of("conv1")
    )
    window.model_dock.tree_view.setCurrentIndex(proxy_index)
    rows = window.model_dock.details.row_texts()
    assert [r[:4] for r in rows] == [
        ["weight", "parameter", "4×3×3×3", "float32"],
        ["bias", "parameter", "4", "float32"],
    ]
    assert float(rows[0][4]) == pytest.approx(float(model.conv1.weight.detach().norm()), rel=1e-3)
    assert "eval mode" in window.model_dock.details.header.text()
    window.model_dock.tree_view.setCurrentIndex(
        window.model_dock.tree_proxy.mapFromSource(window.model_dock.tree_model.index_of("conv2"))
    )
    assert "train mode" in window.model_dock.details.header.text()


def _named(*names: str) -> nn.Module:
    model = nn.Sequential()
    for name in names:
        model.add_module(name, nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
    return model


def test_name_column_fits_long_names_up_to_sixty_percent(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    view, header = window.model_dock.tree_view, window.model_dock.tree_view.header()
    assert header.sectionSize(0) == 170  # before any model
    # On a first start the dock opens at its default width (wider than its minimum).
    assert window.model_dock.width() == 300
    window.resizeDocks([window.model_dock], [700], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: view.viewport().width() > 600, timeout=10_000)
    fm = view.fontMetrics()
    cap = int(view.viewport().width() * 0.6)
    # A name wider than 170 px but inside 60 % of the tree: the column fits it exactly.
    target = (170 + cap) // 2 - 4 * view.indentation()
    medium = "e" * max(1, target // max(fm.horizontalAdvance("e"), 1))
    window.script.set_model(_named(medium, "head"))
    win.settle()  # fitted once, in the turn after the model came (not per resize on the way)
    wanted = view.sizeHintForColumn(0)
    assert 170 < wanted < cap
    assert header.sectionSize(0) == wanted
    assert header.sectionSize(0) >= fm.horizontalAdvance(medium) + view.indentation()
    # A name wider than the tree is capped at 60 % of it.
    window.script.set_model(_named("x" * 400))
    win.settle()
    assert view.sizeHintForColumn(0) > cap
    assert header.sectionSize(0) == cap
    assert window.model_dock.fit_name_column(max_fraction=0.3) == max(140, int(cap / 0.6 * 0.3))


def test_a_model_set_before_show_is_fitted_once_shown(qtbot, actviz_window):
    win = actviz_window(_named("y" * 60, "head"), size=SIZE, auto_run=True, show=False)
    window = win.window
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: not window.model_dock._fit_pending, timeout=10_000)
    view = window.model_dock.tree_view
    wanted = view.sizeHintForColumn(0)
    assert wanted > 170
    assert view.header().sectionSize(0) == min(wanted, int(view.viewport().width() * 0.6))


def test_default_size_fits_a_1600_by_1000_screen(qtbot, actviz_window):
    from PySide6.QtCore import QSize

    from actviz.ui.window.central import default_window_size

    size = default_window_size(QSize(1600, 960))  # 1600x1000 less a 40 px task bar
    assert size.width() <= 1600 * 0.9 and size.height() <= 960 * 0.9
    assert size.width() >= 1200 and size.height() >= 800
    small = default_window_size(QSize(1280, 720))
    assert (small.width(), small.height()) == (1152, 648)
    window = actviz_window(size=None, show=False, auto_run=True).window
    hint = window.minimumSizeHint()
    assert hint.width() <= size.width() and hint.height() <= size.height()


def test_banner_dismiss_button_clears_it(qtbot, actviz_window):
    from PySide6.QtWidgets import QToolButton

    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    window.host.show_error("first")
    window.host.show_warning("second", source="model")
    assert window.centre.banner.texts() == ["first", "second"] and window.centre.banner.isVisible()
    assert isinstance(window.centre.banner.close_button, QToolButton)
    window.centre.banner.close_button.click()
    assert window.centre.banner.texts() == [] and not window.centre.banner.isVisible()


def test_tree_context_actions_and_filter(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    window.runs.auto_run = False
    torch.manual_seed(0)
    window.script.set_model(torchvision.models.resnet18(weights=None).eval())
    actions = {
        a.text(): a
        for a in window.model_dock.tree_context_menu("layer1.0.conv1").actions()
        if a.text()
    }
    assert set(actions) == {
        "Tick all leaves below layer1.0.conv1", "Tick all Conv2d modules",
        "Untick layer1.0.conv1 and below", "Untick all",
    }  # fmt: skip
    actions["Untick all"].trigger()
    assert window.session.ticked == []
    actions["Tick all Conv2d modules"].trigger()
    assert len(window.session.ticked) == 20
    menu = window.model_dock.tree_context_menu("layer2.1")
    next(a for a in menu.actions() if a.text().startswith("Tick all leaves")).trigger()
    assert "layer2.1.bn2" in window.session.ticked and "layer2.1" not in window.session.ticked
    window.model_dock.filter_edit.setText("bn2")
    proxy = window.model_dock.tree_proxy

    def visible(parent=None):
        from PySide6.QtCore import QModelIndex

        parent = parent or QModelIndex()
        out = []
        for r in range(proxy.rowCount(parent)):
            idx = proxy.index(r, 0, parent)
            out.append(idx.data(NameRole))
            out += visible(idx)
        return out

    shown = visible()
    assert [n for n in shown if n.endswith("bn2")] == [
        f"layer{i}.{j}.bn2" for i in range(1, 5) for j in (0, 1)
    ]
    assert "layer1.0.conv1" not in shown


def test_bundled_sample_picker(qtbot, demo_resources, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    assert window.commands.sample_combo.isEnabled() and window.commands.sample_combo.count() >= 3
    torch.manual_seed(0)
    window.script.set_model(build_demo_model().eval(), categories=DEMO_CLASSES)
    with win.expect_run(flush=False):
        window.commands.sample_combo.activated.emit(2)
    assert window.session.input.source == str(window.files.menus.samples[1])
    assert window.session.result.image.shape == (64, 64, 3)
    assert window.commands.sample_combo.currentIndex() == 0  # back to the "Sample…" prompt


# -------------------------------------------------------------------------------- view settings
def test_view_settings_apply_and_persist(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    model = seeded_tiny_cnn()
    window.script.set_model(model, layers=["conv1", "conv2"])
    window.script.set_input(frame(1))
    win.run_and_wait()
    window.commands.colormap_combo.setCurrentText("magma")
    assert window.host.layer_panels["conv1"].activation_slot.image_canvas.colormap_name() == "magma"
    window.commands.gradients_action.setChecked(False)
    assert not window.host.layer_panels["conv1"].gradient_shown()
    with win.expect_run(flush=False):
        window.commands.normalize_combo.setCurrentIndex(
            window.commands.normalize_combo.findData("shared")
        )
    assert window.session.result.layers["conv1"].mosaic.normalize == "shared"
    window.resize(1111, 777)
    window.close()
    # A second window on the same settings file (the fixture's, in tmp_path).
    again = actviz_window(size=None, show=False, auto_run=True).window
    assert again.commands.colormap == "magma"
    assert again.commands.colormap_actions["magma"].isChecked()
    assert again.commands.normalize_combo.currentData() == "shared"
    assert again.display.gradients_visible is False
    assert again.settings.geometry is not None
    # (The offscreen platform clamps restored sizes to its small virtual screen.)
    assert again.restoreGeometry(again.settings.geometry)
    assert again.height() == pytest.approx(777, abs=10)


def test_shortcuts(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    keys = {a.text(): a.shortcut().toString() for a in window.actions()}
    assert keys["Open model…"] == "Ctrl+O"
    assert keys["Run"] == "Ctrl+R"
    assert keys["Export everything…"] == "Ctrl+E"
    assert keys["Quit"] == "Ctrl+Q"
    window.activateWindow()
    with qtbot.waitSignal(window.run_started, timeout=30_000):
        qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.worker.is_busy(), timeout=RUN_TIMEOUT_MS)


def test_gradcam_layer_is_selectable(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    assert set(window.session.result.grad_cams) == {"conv1", "conv2"}
    window.centre.gradcam_panel.layer_changed.emit("conv1")
    np.testing.assert_array_equal(
        window.centre.gradcam_panel.heat, window.session.result.grad_cams["conv1"]
    )
    assert window.session.gradcam_layer == "conv1"


# -------------------------------------------------------------------------------- export
def test_export_png_and_npy(qtbot, actviz_window, tmp_path):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    window.display.select_layer("conv2")
    png = window.exports.export_panel_png(tmp_path / "panel.png")
    assert png is not None and png.is_file()
    with Image.open(png) as image:
        assert image.width > 100 and image.height > 100
    paths = window.exports.export_layer_npy(tmp_path / "arrays")
    assert sorted(p.name for p in paths) == ["conv2.activation.npy", "conv2.gradient.npy"]
    expected = capture(model, frame(1), ["conv2"])["conv2"]
    np.testing.assert_allclose(
        np.load(tmp_path / "arrays" / "conv2.activation.npy"), expected.tensor.numpy(), rtol=1e-6
    )
    np.testing.assert_allclose(
        np.load(tmp_path / "arrays" / "conv2.gradient.npy"), expected.grad.numpy(), rtol=1e-5
    )
    window.centre.tabs.setCurrentWidget(window.centre.overview_tab)
    overview = window.exports.export_panel_png(tmp_path / "overview.png")
    with Image.open(overview) as image:
        assert image.width > 300


def test_export_everything_runs_in_the_background(qtbot, actviz_window, tmp_path):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    threads = []
    import actviz.io.export.capture_export as export_module

    real = export_module.export_capture

    def export_capture(*args, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)

    export_module.export_capture = export_capture
    try:
        with qtbot.waitSignal(window.export_finished, timeout=LOAD_TIMEOUT_MS) as done:
            assert window.exports.export_all(tmp_path / "all") is True
            assert (
                window.status.progress_bar.isVisible()
                and "Exporting" in window.status.status_label.text()
            )
    finally:
        export_module.export_capture = real
    paths = done.args[0]
    assert threads == [False]  # written off the GUI thread
    assert paths == window.exports.last_export and all(p.exists() for p in paths)
    assert {"conv1", "conv2", "fc"} <= {p.name.split(".")[0] for p in paths if p.suffix == ".npz"}
    assert paths[-1].name == "summary.json"
    assert f"Exported {len(paths)} files" in window.status.status_label.text()
    assert not window.status.progress_bar.isVisible()
    # Blocking form (scripts), and the failure path: a file where the folder should be.
    assert window.exports.export_all(tmp_path / "again", wait=True) is True
    (tmp_path / "blocked").write_text("not a folder")
    with qtbot.waitSignal(window.export_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        window.exports.export_all(tmp_path / "blocked" / "sub")
    assert "Export failed" in failed.args[0]
    assert any("Export failed" in t for t in window.centre.banner.texts())


# -------------------------------------------------------------------------------- lifecycle
@pytest.mark.slow
def test_open_and_close_fifteen_times_leaves_no_hooks(qtbot, actviz_window):
    model = seeded_tiny_cnn()
    x = frame(1)
    for i in range(15):
        win = actviz_window(size=None, debounce_ms=5, auto_run=True, show=False)
        window = win.window
        try:
            window.script.set_model(model, layers=["conv1", "conv2", "fc"])
            window.script.set_input(x)
            window.show()
            if i % 5 == 4:
                window.runs.run()  # close while the capture may still be running
            else:
                with win.expect_run(flush=False):
                    window.runs.run()
        finally:
            window.close()
        assert not window.worker.is_busy() or window.worker._pool.activeThreadCount() == 0
        destroyed: list[bool] = []
        window.destroyed.connect(lambda *_, seen=destroyed: seen.append(True))
        window.deleteLater()
        qtbot.waitUntil(lambda seen=destroyed: bool(seen), timeout=30_000)
        assert_no_hooks(model)
    assert not model.training
    # Closing mid-capture leaves no global hooks either (the helper checks module hooks).
    assert not nn.modules.module._global_forward_hooks
    assert not nn.modules.module._global_forward_pre_hooks


def test_screenshot_after_a_demo_run_is_not_blank(qtbot, demo_resources, actviz_window, tmp_path):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    with win.expect_run(flush=False):
        assert window.files.load_demo()
    window.display.flush_panel_updates()  # grab() below paints synchronously
    shot = tmp_path / "main_window.png"
    assert window.grab().save(str(shot), "PNG")
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape[0] >= 600 and pixels.shape[1] >= 1000
    assert pixels.std() > 20
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 500  # colour maps, not flat widgets
    # The first layer panel's mosaic is rendered (not an empty canvas).
    canvas = next(iter(window.host.layer_panels.values())).activation_slot.image_canvas
    tile = tmp_path / "canvas.png"
    assert canvas.grab().save(str(tile), "PNG")
    assert np.asarray(Image.open(tile).convert("RGB"), dtype=np.int16).std() > 20


def test_demo_opens_run_with_labels(qtbot, demo_resources, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    with win.expect_run(flush=False):
        assert window.files.load_demo()
    assert list(window.host.layer_panels) == [
        "features.block1", "features.block2", "features.block3", "features.block4", "fc",
    ]  # fmt: skip
    labels = [label for _, label, _ in window.centre.prediction_panel.predictions()]
    assert set(labels) <= set(DEMO_CLASSES)
    assert window.session.result.gradcam_default == "features.block4"
    assert window.session.input.image is not None
    assert window.session.input.source == str(window.files.menus.samples[0])
    assert window.windowTitle() == "actviz — demo"
    assert window.centre.banner.texts() == []
    # The demo's categories feed the target selector: a class name re-runs on that class.
    with win.expect_run(flush=False):
        assert window.host.set_target_text("ring")
    assert window.session.result.target_index == DEMO_CLASSES.index("ring")


def test_a_selection_over_the_memory_budget_is_refused_with_a_message(qtbot, actviz_window):
    """An ordinary Run obeys the session's memory budget: a message, no crash, no result."""
    import torch
    from torch import nn

    # The window as MainWindow() makes it: its default size, debounce and auto-run, not shown.
    window = actviz_window(size=None, debounce_ms=300, auto_run=True, show=False).window
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1)
    )
    window.script.set_model(model)
    window.script.set_input(torch.randn(1, 3, 64, 64))
    window.session.set_memory_budget(200_000)  # one 64x64x64 map is 1 MiB
    with qtbot.waitSignal(window.run_failed, timeout=30_000):
        window.runs.run()
    assert any("memory budget" in t for t in window.centre.banner.texts())
    window.session.set_memory_budget(1 << 30)
    with qtbot.waitSignal(window.run_finished, timeout=30_000):
        window.runs.run()
    assert window.session.result is not None
    window.shutdown()


@pytest.mark.window_features("live")
def test_the_memory_budget_is_1_gib_unless_actviz_memory_budget_says_otherwise(
    qtbot, actviz_window, monkeypatch, caplog
):
    # ACTVIZ_MEMORY_BUDGET is unset in tests (tests/conftest.py).
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    assert window.session.memory_budget == 1 << 30
    assert win.live.controller.memory_budget == 1 << 30
    assert win.live.dock.budget_spin.value() == 1024  # MiB
    window.close()
    monkeypatch.setenv("ACTVIZ_MEMORY_BUDGET", "512MiB")
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    assert window.session.memory_budget == 512 << 20
    assert win.live.controller.memory_budget == 512 << 20
    assert win.live.dock.budget_spin.value() == 512
    window.close()
    # A budget from the environment is obeyed: one 64x64x64 map (1 MiB) is over 200 kB.
    monkeypatch.setenv("ACTVIZ_MEMORY_BUDGET", "200000")
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    window.script.set_model(nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU()))
    window.script.set_input(torch.randn(1, 3, 64, 64))
    with qtbot.waitSignal(window.run_failed, timeout=RUN_TIMEOUT_MS):
        window.runs.run()
    assert window.session.result is None
    assert any("memory budget" in t for t in window.centre.banner.texts())
    window.close()
    # Nonsense is ignored with a warning, not a crash: the default holds.
    monkeypatch.setenv("ACTVIZ_MEMORY_BUDGET", "lots")
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    assert window.session.memory_budget == 1 << 30
    assert any("ignoring ACTVIZ_MEMORY_BUDGET" in r.getMessage() for r in caplog.records)


def test_select_layer_highlights_exactly_one_panel_without_style_sheets(qtbot, actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    # after a run the last spatial layer shown is selected (not fc's few values)
    assert [n for n, p in window.host.layer_panels.items() if p.is_selected()] == ["conv2"]
    window.display.select_layer("fc")
    assert [n for n, p in window.host.layer_panels.items() if p.is_selected()] == ["fc"]
    assert all(p.styleSheet() == "" for p in window.host.layer_panels.values())
    window.display.select_layer(None)
    assert not any(p.is_selected() for p in window.host.layer_panels.values())


def test_existing_panels_are_refreshed_in_chunks_and_off_screen_ones_on_scroll(
    qtbot, actviz_window
):
    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    window = win.window
    window.resize(900, 420)  # room for about one layer panel: the others are off screen
    qtbot.waitUntil(lambda: not window.display.panel_updates_pending(), timeout=10_000)
    window.script.set_input(frame(7))
    with win.expect_run(flush=False):
        assert window.runs.run() is not None
    result = window.session.result

    def current(name: str) -> bool:
        return window.host.layer_panels[name].activation_slot.view is result.layers[name].view

    def on_screen(name: str) -> bool:
        return not window.host.layer_panels[name].visibleRegion().isEmpty()

    names = list(window.host.layer_panels)
    qtbot.waitUntil(lambda: all(current(n) for n in names if on_screen(n)), timeout=10_000)
    hidden = [n for n in names if not on_screen(n)]
    assert hidden, "the test needs an off-screen panel"
    assert not any(current(n) for n in hidden)  # not painted while nobody can see them
    assert window.display.panel_updates_pending()
    window.centre.layers_scroll.ensureWidgetVisible(window.host.layer_panels[hidden[-1]])
    qtbot.waitUntil(lambda: current(hidden[-1]), timeout=10_000)
    window.display.flush_panel_updates()
    assert all(current(n) for n in names) and not window.display.panel_updates_pending()
