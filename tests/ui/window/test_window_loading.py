"""Opening models and inputs off the GUI thread: responsiveness, stale loads, failures, cancel.

The loaders are injected (``window.model_loader``) so a load can be made deliberately slow,
gated on an event, or failing, while the real window, session and workers run around it.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from PySide6.QtCore import QTimer

from actviz.io.errors import ModelLoadError
from actviz.io.models.demo_model import generate_image
from actviz.io.models.loaded_model import LoadedModel
from actviz.testing import RUN_TIMEOUT_MS, assert_no_hooks
from tests.helpers import frame
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.ui.tiny_models import SIZE, TINY_LAYERS, TinyCNN, seeded_tiny_cnn

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()


def _loaded(source: str, model: torch.nn.Module | None = None, **extra) -> LoadedModel:
    return LoadedModel(model if model is not None else seeded_tiny_cnn(), f"tiny {source}", source, "module",
                       **extra)  # fmt: skip


class GatedLoader:
    """A model loader that blocks each source until released, and records its threads."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.started: dict[str, threading.Event] = {}
        self.models: dict[str, TinyCNN] = {}
        self.released: list[str] = []  # sources whose gate opened (or that had none)
        self.on_gui_thread: list[bool] = []

    def gate(self, source: str) -> threading.Event:
        self.started.setdefault(source, threading.Event())
        return self.gates.setdefault(source, threading.Event())

    def __call__(self, source: str, *, arch=None, weights=None, trust=False) -> LoadedModel:
        self.on_gui_thread.append(threading.current_thread() is threading.main_thread())
        self.started.setdefault(source, threading.Event()).set()
        gate = self.gates.get(source)
        if gate is not None:
            assert gate.wait(10), f"{source} was never released"
        self.released.append(source)
        if source.startswith("broken"):
            raise ModelLoadError(f"{source}: not a checkpoint")
        self.models[source] = seeded_tiny_cnn()
        return _loaded(source, self.models[source])


def _tiny_run(actviz_window, model: torch.nn.Module | None = None):
    """A window on the tiny CNN (or ``model``) with its layers ticked, run once."""
    model = model if model is not None else seeded_tiny_cnn()
    win = actviz_window(model, frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    win.run_and_wait()
    return win


def _gated_loader(window) -> GatedLoader:
    """A :class:`GatedLoader` the window opens its models with from now on."""
    loader = GatedLoader()
    window.model_loader = loader
    return loader


def _png(tmp_path, size: int = 16):
    path = tmp_path / f"star{size}.png"
    generate_image("star", np.random.default_rng(0)).resize((size, size)).save(path)
    return path


# -------------------------------------------------------------------------------- responsive
def test_a_slow_model_load_keeps_the_window_responsive(qtbot, actviz_window):
    old = seeded_tiny_cnn()
    win = _tiny_run(actviz_window, old)
    window = win.window
    loader = _gated_loader(window)
    gate = loader.gate("resnet18")
    ticks = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    try:
        assert window.files.open_model_source("resnet18") is True
        assert loader.started["resnet18"].wait(5)
        # The GUI thread returned at once: status, busy bar and Cancel while the load runs.
        assert window.status.status_label.text() == "Opening resnet18…"
        assert window.status.progress_bar.isVisible() and window.commands.cancel_action.isEnabled()
        assert window.files.is_loading() and window.is_busy()
        # The event loop keeps running timers while the load is held at its gate.
        qtbot.waitUntil(lambda: len(ticks) >= 10, timeout=30_000)
        assert loader.released == [] and window.files.is_loading()
        # The previous model stays usable while the new one loads.
        assert window.session.model is old
        win.run_and_wait()
        with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
            gate.set()
        assert loaded.args == ["resnet18"]
        assert loader.on_gui_thread == [False]
        assert window.session.model is loader.models["resnet18"]
        assert window.windowTitle() == "actviz — tiny resnet18"
        assert not window.status.progress_bar.isVisible() and not window.files.is_loading()
        assert window.settings.recent_models()[0] == "resnet18"
    finally:
        timer.stop()
        gate.set()


def _loader_threads(window) -> list[bool]:
    """Wraps the window's model loader; each load appends whether it ran on the GUI thread."""
    threads: list[bool] = []
    real = window.model_loader

    def spy(source, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(source, **kwargs)

    window.model_loader = spy
    return threads


def test_opening_a_real_torchvision_name_runs_off_the_gui_thread(qtbot, actviz_window):
    win = _tiny_run(actviz_window)
    window = win.window
    threads = _loader_threads(window)
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source("resnet18", weights=None)
    assert threads == [False]
    assert type(window.session.model).__name__ == "ResNet"
    assert window.session.model_kind == "torchvision"
    # The 16x16 tensor input stays; it is an in-memory tensor, so nothing is re-read.
    assert window.session.input.value.shape == (1, 3, 16, 16)


# -------------------------------------------------------------------------------- stale / failed
def test_a_stale_model_load_is_dropped(qtbot, actviz_window):
    win = _tiny_run(actviz_window)
    window = win.window
    loader = GatedLoader()
    first_gate = loader.gate("first")
    window.model_loader = loader
    seen = []
    window.model_loaded.connect(seen.append)
    window.files.open_model_source("first")
    assert loader.started["first"].wait(5)
    # The user opens another model while the first is still loading: it starts at once.
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source("second")
    assert window.session.model is loader.models["second"]
    first_gate.set()
    # The loader is idle only once the stale result has reached the window's worker.
    qtbot.waitUntil(lambda: not window.model_loads.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert "first" in loader.models  # it did finish loading, and was dropped
    assert seen == ["second"]
    assert window.session.model is loader.models["second"]
    assert window.settings.recent_models()[0] == "second"


def test_a_failed_load_keeps_the_previous_model_usable(qtbot, actviz_window):
    old = seeded_tiny_cnn()
    win = _tiny_run(actviz_window, old)
    window = win.window
    loader = _gated_loader(window)
    gate = loader.gate("broken.pt")
    previous = window.session.result
    window.files.open_model_source("broken.pt")
    assert loader.started["broken.pt"].wait(5)
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        gate.set()
    assert "'broken.pt': not a checkpoint" in failed.args[0]
    assert any("Could not open model 'broken.pt'" in t for t in window.centre.banner.texts())
    assert window.session.model is old and window.session.result is previous
    assert list(window.host.layer_panels) == ["conv1", "conv2", "fc"]
    assert not window.status.progress_bar.isVisible()
    win.run_and_wait()
    assert window.session.result is not previous
    assert_no_hooks(old)


def test_cancel_drops_a_model_load(qtbot, actviz_window):
    old = seeded_tiny_cnn()
    win = _tiny_run(actviz_window, old)
    window = win.window
    loader = _gated_loader(window)
    gate = loader.gate("slow")
    window.files.open_model_source("slow")
    assert loader.started["slow"].wait(5)
    with qtbot.waitSignal(window.model_load_failed, timeout=10_000) as failed:
        window.cancel()
    assert "cancelled" in failed.args[0]
    assert not window.files.is_loading() and not window.status.progress_bar.isVisible()
    gate.set()
    qtbot.waitUntil(lambda: not window.model_loads.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert "slow" in loader.models  # the cancelled load finished and was dropped
    assert window.session.model is old


def test_set_model_replaces_a_pending_load(qtbot, actviz_window):
    win = _tiny_run(actviz_window)
    window = win.window
    loader = _gated_loader(window)
    gate = loader.gate("slow")
    window.files.open_model_source("slow")
    assert loader.started["slow"].wait(5)
    mine = seeded_tiny_cnn()
    window.script.set_model(mine, layers=["conv1"])
    gate.set()
    qtbot.waitUntil(lambda: not window.model_loads.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert "slow" in loader.models  # the replaced load finished and was dropped
    assert window.session.model is mine


def test_wait_returns_the_outcome_and_closing_ends_a_wait(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    loader = _gated_loader(window)
    assert window.files.open_model_source("quick", wait=True) is True
    assert window.session.model is loader.models["quick"]
    assert window.files.open_model_source("broken", wait=True) is False
    gate = loader.gate("never")

    def close_once_reading() -> None:
        if loader.started["never"].is_set():
            window.close()
        else:
            QTimer.singleShot(5, close_once_reading)

    QTimer.singleShot(0, close_once_reading)
    try:
        assert window.files.open_model_source("never", wait=True) is False
        # The wait ended while the load was still held at its gate: closing ended it.
        assert loader.started["never"].is_set() and "never" not in loader.released
    finally:
        gate.set()


# -------------------------------------------------------------------------------- inputs
def test_an_input_waits_for_the_model_being_opened(qtbot, demo_resources, actviz_window, tmp_path):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    real = window.model_loader
    release = threading.Event()

    def slow_demo(source, **kwargs):
        assert release.wait(10)
        return real(source, **kwargs)

    window.model_loader = slow_demo
    failures = []
    window.run_failed.connect(failures.append)
    path = _png(tmp_path, 16)
    window.files.open_model_source("demo")
    window.files.open_input_source(str(path))
    assert window.files.is_loading()
    with win.expect_run(flush=False):
        release.set()
    # Read with the demo's transforms (resized to its 64x64 input), not as a bare 16x16 image.
    assert window.session.model_name == "demo"
    assert window.session.input.source == str(path)
    assert tuple(window.session.input.value.shape) == (1, 3, 64, 64)
    assert window.session.result.image.shape == (64, 64, 3)
    assert failures == []


def test_a_new_model_rereads_the_input_before_the_automatic_run(
    qtbot, demo_resources, actviz_window, tmp_path
):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    window.script.set_model(seeded_tiny_cnn(), layers=["conv1"])
    path = _png(tmp_path, 16)
    with win.expect_run(flush=False):
        assert window.files.open_input_source(str(path))
    assert tuple(window.session.input.value.shape) == (1, 3, 16, 16)
    runs, failures = [], []
    window.run_started.connect(lambda: runs.append(tuple(window.session.input.value.shape)))
    window.run_failed.connect(failures.append)
    with qtbot.waitSignal(window.input_loaded, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source("demo")
    qtbot.waitUntil(
        lambda: window.session.result is not None and bool(runs), timeout=RUN_TIMEOUT_MS
    )
    qtbot.waitUntil(lambda: not window.worker.is_busy(), timeout=RUN_TIMEOUT_MS)
    # Only runs on the re-read 64x64 input: none with the old 16x16 tensor on the new model.
    assert runs and set(runs) == {(1, 3, 64, 64)}
    assert failures == []
    assert window.session.result.layers["features.block1"].view.data.shape == (16, 64, 64)


def test_a_slow_input_load_is_off_the_gui_thread_and_stale_ones_are_dropped(
    qtbot, actviz_window, tmp_path
):
    win = _tiny_run(actviz_window)
    window = win.window
    real = window.input_loader
    release_a, a_started = threading.Event(), threading.Event()
    threads = []

    def loader(source, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        if source.endswith("a.png"):
            a_started.set()
            assert release_a.wait(10)
        return real(source, **kwargs)

    window.input_loader = loader
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    generate_image("circle", np.random.default_rng(1)).resize((16, 16)).save(a)
    generate_image("square", np.random.default_rng(2)).resize((16, 16)).save(b)
    window.files.open_input_source(str(a))
    assert window.status.status_label.text() == "Opening a.png…"
    assert a_started.wait(5)  # "a" is being read when "b" is asked for
    with qtbot.waitSignal(window.input_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        window.files.open_input_source(str(b))
    assert loaded.args == [str(b)]
    release_a.set()
    # Idle only once the stale "a" has reached the window's worker (and been dropped).
    qtbot.waitUntil(lambda: not window.input_loads.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert window.session.input.source == str(b)
    assert threads == [False, False]


@pytest.mark.usefixtures("demo_resources")
def test_load_demo_opens_model_and_sample_in_the_background(qtbot, actviz_window):
    win = actviz_window(size=SIZE, auto_run=True)
    window = win.window
    threads = _loader_threads(window)
    with win.expect_run(flush=False):
        assert window.files.load_demo(sample="square") is True
    assert threads == [False]
    assert window.session.input.source.endswith("square.png")
    assert window.session.result.gradcam_default == "features.block4"
    assert window.settings.recent_models() == []  # the demo is not a "recent" model


def test_input_files_open_with_tensors_too(qtbot, actviz_window, tmp_path):
    win = _tiny_run(actviz_window)
    window = win.window
    path = tmp_path / "x.pt"
    x = frame(7)
    torch.save(x, path)
    with win.expect_run(flush=False):
        assert window.files.open_input_source(str(path), wait=True) is True
    assert torch.equal(window.session.input.value, x)
    assert window.settings.recent_inputs()[0] == str(path)


def test_cancel_drops_an_input_load_and_keeps_the_input(qtbot, actviz_window, tmp_path):
    win = _tiny_run(actviz_window)
    window = win.window
    release, started = threading.Event(), threading.Event()
    real = window.input_loader

    def slow(source, **kwargs):
        started.set()
        assert release.wait(10)
        return real(source, **kwargs)

    window.input_loader = slow
    value = window.session.input.value
    window.files.open_input_source(str(_png(tmp_path)))
    assert started.wait(5)
    with qtbot.waitSignal(window.input_load_failed, timeout=10_000) as failed:
        window.cancel()
    assert "cancelled" in failed.args[0]
    assert not window.files.is_loading() and not window.status.progress_bar.isVisible()
    release.set()
    qtbot.waitUntil(lambda: not window.input_loads.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert window.session.input.value is value


def test_cancel_stops_an_export_between_files(qtbot, actviz_window, tmp_path, monkeypatch):
    import actviz.io.export.capture_export as export_module

    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    # On the Overview the run has its saliency: the export starts at once, no re-run.
    win.window.host.show_tab(win.window.centre.overview_tab)
    win.run_and_wait()
    window = win.window
    release, started = threading.Event(), threading.Event()
    written = []

    def export_capture(cap, out, *, progress, **kwargs):
        for i, name in enumerate(cap.names):
            progress(i, len(cap.names), name)
            written.append(name)
            started.set()
            assert release.wait(10)
        return []

    monkeypatch.setattr(export_module, "export_capture", export_capture)
    window.exports.export_all(tmp_path / "out")
    assert started.wait(5)
    qtbot.waitUntil(
        lambda: window.status.status_label.text() == "Exporting 0/3: conv1", timeout=10_000
    )
    window.cancel()
    with qtbot.waitSignal(window.export_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        release.set()
    assert "cancelled" in failed.args[0]
    assert written == ["conv1"]  # stopped at the next file
    assert window.exports.last_export == []


def test_cancel_stops_a_real_export_between_layers(qtbot, actviz_window, tmp_path, monkeypatch):
    """The real export_capture, held while it writes conv2's first file, then cancelled."""
    from PIL import Image

    win = actviz_window(seeded_tiny_cnn(), frame(1), TINY_LAYERS, size=SIZE, auto_run=True)
    # On the Overview the run has its saliency: the export starts at once, no re-run.
    win.window.host.show_tab(win.window.centre.overview_tab)
    win.run_and_wait()
    window = win.window
    cap = window.session.result.capture
    out = tmp_path / "out"
    writing, release = threading.Event(), threading.Event()
    real_save = Image.Image.save

    def save(self, fp, *args, **kwargs):
        if str(fp).endswith("conv2_features.png"):
            writing.set()
            assert release.wait(10)
        return real_save(self, fp, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "save", save)
    failures = []
    window.export_failed.connect(failures.append)
    try:
        assert window.exports.export_all(out) is True
        assert writing.wait(10)  # conv1 is written, conv2 is being written
        qtbot.waitUntil(
            lambda: window.status.status_label.text() == "Exporting 1/4: conv2", timeout=30_000
        )
        window.cancel()
    finally:
        release.set()
    qtbot.waitUntil(lambda: bool(failures), timeout=LOAD_TIMEOUT_MS)
    assert failures == ["Export cancelled; the files written so far stay."]
    assert not window.is_busy() and window.exports.last_export == []
    # Stopped before the next layer: conv1 and conv2 are complete, fc and the summary never came.
    assert sorted(p.name for p in out.iterdir()) == [
        "conv1.npz", "conv1_features.png", "conv1_features_1x.png", "conv1_grad.png",
        "conv1_grad_1x.png",
        "conv2.npz", "conv2_features.png", "conv2_features_1x.png", "conv2_grad.png",
        "conv2_grad_1x.png",
    ]  # fmt: skip
    np.testing.assert_array_equal(np.load(out / "conv1.npz")["output"], cap["conv1"].output.numpy())
    Image.open(out / "conv2_features.png").verify()  # the held file was finished, not cut off


@pytest.mark.window_features("sessions")
def test_a_session_opened_while_an_input_loads_leaves_no_run_waiting(actviz_window, tmp_path):
    """A tick changed while an input is read makes a run wait for that input; a session opened
    meanwhile replaces the input, and the run waited for it for good: the window never became
    idle ("run due" in the stress run's stuck findings)."""
    from actviz.io.models.demo_model import demo_samples
    from actviz.ui.background_loads import load_input_source

    win = actviz_window(auto_run=True)
    window = win.window
    gate = threading.Event()

    def slow_input(source, **kwargs):
        gate.wait(30)
        return load_input_source(source, **kwargs)

    window.input_loader = slow_input
    gate.set()
    assert window.files.load_demo()
    assert win.wait_idle()
    saved = tmp_path / "s.actviz"
    win.sessions.save(saved)
    gate.clear()
    window.files.open_input_source(str(demo_samples()[1]))
    win.tick("features.pool1")  # the run it asks for waits for the input being read
    win.qtbot.wait(300)  # past the run's 20 ms delay: it waits for the input now
    assert window.runs.is_due() and window.files.inputs.request is not None
    win.sessions.open(saved)
    gate.set()
    assert win.wait_idle(20_000), "a run still waits for an input nobody reads"
    assert not window.runs.is_due()
    assert window.session.input.source != str(demo_samples()[1])
