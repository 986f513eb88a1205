"""Shared models and inputs for the window tests.

Windows come from the ``actviz_window`` fixture of :mod:`actviz.testing` (the plugin actviz
installs for pytest), which also runs and waits and checks what a test leaves behind; here are
only what several test files feed it: ``frame`` (the seeded 16x16 input of the tiny CNN tests,
from :mod:`tests.helpers`),
the ``tiny_cnn`` and ``resnet`` models, ``demo_resources`` and ``LOAD_TIMEOUT_MS``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from tests.helpers import frame

__all__ = ["LOAD_TIMEOUT_MS", "frame", "small_conv_window"]

#: How long a test waits for a model or an input to open.
LOAD_TIMEOUT_MS = 30_000


@pytest.fixture(autouse=True)
def _nothing_left_behind(request):
    """Every UI test is checked for leftovers: ``actviz_window`` checks its own windows; a
    test that builds panels or dialogs by hand gets :func:`actviz_leak_check`."""
    if "actviz_window" not in request.fixturenames:
        request.getfixturevalue("actviz_leak_check")
    yield


@pytest.fixture(autouse=True)
def _pointer_elsewhere(qapp):
    """Each test's first pointer move is a move: Qt drops a move to where the pointer already
    is, and an earlier test in the process may have left it exactly where this one hovers."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QCursor

    QCursor.setPos(QPoint(-10_000, -10_000))


@pytest.fixture
def actviz_window(actviz_window, request):
    """The plugin's factory; in a module or test marked ``window_features(*names)`` its
    windows have only those features (a window without them is built in half the time)."""
    marker = request.node.get_closest_marker("window_features")
    if marker is None:
        return actviz_window
    return functools.partial(actviz_window, features=marker.args)


def small_conv_window(actviz_window):
    """A window on a seeded conv, ReLU, flatten model with both layers ticked, run once."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten())
    win = actviz_window(model, frame(0), layers=["0", "1"])
    win.run_and_wait()
    return win


@pytest.fixture
def worker(qtbot):
    """A capture :class:`~actviz.ui.worker.Worker` of its own, shut down after the test."""
    from actviz.ui.worker import Worker

    w = Worker()
    yield w
    w.shutdown()


@pytest.fixture
def resnet() -> torch.nn.Module:
    """A random-init ResNet-18 (seed 0) in eval mode, one per test (a window may change it)."""
    from tests.helpers import seeded_resnet18

    return seeded_resnet18()


@pytest.fixture
def tiny_cnn() -> torch.nn.Module:
    """The tiny CNN of :mod:`tests.ui.tiny_models` (seed 0) in eval mode."""
    from tests.ui.tiny_models import seeded_tiny_cnn

    return seeded_tiny_cnn(0)


@pytest.fixture
def demo_resources(tmp_path_factory, monkeypatch):
    """The bundled demo when its weights are built; otherwise the same network with random
    weights and generated samples put where ``actviz.io.models.demo_model`` looks, so the demo flows
    run."""
    from actviz.io.models import demo_model as demo
    from actviz.io.models.demo_model import build_demo_model, demo_weights_path, generate_image

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
