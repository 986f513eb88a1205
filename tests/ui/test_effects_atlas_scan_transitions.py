"""What the Channels that matter dock, the Atlas tab and the Dataset dock show across the
ordinary transitions a user makes: another model opened, a channel clicked in a layer without
maps, an input that lies outside the dataset's map.

Real windows on the tiny CNN of :mod:`tests.ui.tiny_models` and the bundled demo; the scanned
folders are a few tiny PNGs written in tmp_path.
"""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "conv2"]
TIMEOUT_MS = 30_000


def _tiny(seed: int = 0) -> TinyCNN:
    torch.manual_seed(seed)
    return TinyCNN().eval()


def _input() -> torch.Tensor:
    return torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))


def test_another_model_clears_the_channels_of_the_model_before(actviz_window):
    win = actviz_window(_tiny(), _input(), LAYERS)
    win.run_and_wait()
    feature = win.feature("effects")
    win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: not feature.estimating(), timeout=TIMEOUT_MS)
    assert feature.effects is not None and set(feature.view.sections) == set(LAYERS)

    # Another model, not run yet: the old model's bars and target must not stay on show.
    win.set_model(_tiny(1), LAYERS)
    assert feature.effects is None
    assert feature.view.sections == {}
    assert feature.view.message.text().startswith("Run the model")
    # Its first result is ranked as usual.
    win.run_and_wait()
    win.qtbot.waitUntil(lambda: feature.effects is not None, timeout=TIMEOUT_MS)
    assert set(feature.view.sections) == set(LAYERS)
