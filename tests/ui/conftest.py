"""Shared fixtures and helpers for tests that drive the real main window.

``new_window`` builds a shown :class:`MainWindow` on a scratch settings file in the test's
``tmp_path``; ``window`` is its default one. ``wait_run`` and ``run_frame`` start a run and wait
for its result on the panels; ``frame`` is the seeded 16x16 input the tiny CNN tests feed.

The factory is not called ``make_window``: test_main_window and test_layer_panels have their own
fixture of that name, and modules that borrow their fixtures would hide this one.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import QSettings

from actviz.ui.window.main_window import MainWindow

#: How long a test waits for one run of a small model.
RUN_TIMEOUT_MS = 60_000
#: How long a test waits for a model or an input to open.
LOAD_TIMEOUT_MS = 30_000


def scratch_settings(folder) -> QSettings:
    """An INI settings file ``actviz.ini`` in ``folder`` (a test's ``tmp_path``)."""
    return QSettings(str(folder / "actviz.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def new_window(qtbot, tmp_path):
    """Give a factory of shown main windows on scratch settings in ``tmp_path``.

    ``new_window(size=(1280, 720), debounce_ms=20, auto_run=False, exposed=True)`` builds a
    :class:`MainWindow`, registers it with ``qtbot``, resizes and shows it and (``exposed``)
    waits until it is exposed. At teardown qtbot closes every window made, then this fixture
    closes them again (harmless: each has shut down by then).
    """
    made: list[MainWindow] = []

    def make(
        *,
        size: tuple[int, int] = (1280, 720),
        debounce_ms: int = 20,
        auto_run: bool = False,
        exposed: bool = True,
    ) -> MainWindow:
        w = MainWindow(
            settings=scratch_settings(tmp_path), debounce_ms=debounce_ms, auto_run=auto_run
        )
        qtbot.addWidget(w)
        made.append(w)
        w.resize(*size)
        w.show()
        if exposed:
            qtbot.waitExposed(w)
        return w

    yield make
    for w in made:
        w.close()


@pytest.fixture
def window(new_window) -> MainWindow:
    """Give the default window: 1280x720, 20 ms debounce, no auto-run, shown and exposed."""
    return new_window()


def wait_run(
    qtbot,
    window: MainWindow,
    *,
    start: bool = True,
    flush: bool = True,
    timeout: int = RUN_TIMEOUT_MS,
) -> None:
    """Wait for the window's next ``run_finished``.

    ``start``: start the run now (and it must start); otherwise wait for one already due.
    ``flush``: then put the result on the panels at once.
    """
    with qtbot.waitSignal(window.run_finished, timeout=timeout):
        if start:
            assert window.run() is not None
    if flush:
        window.flush_panel_updates()


def frame(seed: int) -> torch.Tensor:
    """A random 1x3x16x16 input, the same for the same ``seed``."""
    return torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


def run_frame(qtbot, window: MainWindow, seed: int, *, timeout: int = RUN_TIMEOUT_MS) -> None:
    """Open ``frame(seed)`` as the input, run it and put the result on the panels."""
    window.set_input(frame(seed))
    wait_run(qtbot, window, timeout=timeout)


@pytest.fixture
def resnet() -> torch.nn.Module:
    """A random-init ResNet-18 (seed 0) in eval mode."""
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval()


@pytest.fixture
def tiny_cnn() -> torch.nn.Module:
    """The tiny CNN of :mod:`tests.ui.tiny_models` (seed 0) in eval mode."""
    from tests.ui.tiny_models import TinyCNN

    torch.manual_seed(0)
    return TinyCNN().eval()


@pytest.fixture
def demo_resources(tmp_path_factory, monkeypatch):
    """The bundled demo when its weights are built; otherwise the same network with random
    weights and generated samples put where ``actviz.io.demo`` looks, so the demo flows run."""
    from actviz.io import demo
    from actviz.io.demo import build_demo_model, demo_weights_path, generate_image

    if demo_weights_path().is_file() and demo.demo_samples():
        return True
    folder = tmp_path_factory.mktemp("demo")
    torch.manual_seed(0)
    torch.save(build_demo_model().state_dict(), folder / "demo_cnn.pt")
    samples = []
    for i, name in enumerate(("circle", "square", "star")):
        path = folder / f"{name}.png"
        generate_image(name, np.random.default_rng(i)).save(path)
        samples.append(path)
    monkeypatch.setattr(demo, "demo_weights_path", lambda: folder / "demo_cnn.pt")
    monkeypatch.setattr(demo, "demo_samples", lambda: list(samples))
    return False
