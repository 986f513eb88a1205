"""Test-wide settings: Qt offscreen, small torch thread pool, and a hook-leak guard."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests never reach the network: torchvision names fall back to random init at once.
os.environ.setdefault("ACTVIZ_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)


def assert_no_hooks(model: torch.nn.Module) -> None:
    """Fail if any module of ``model`` still holds a hook."""
    for name, mod in model.named_modules():
        for attr in (
            "_forward_hooks",
            "_forward_pre_hooks",
            "_backward_hooks",
            "_backward_pre_hooks",
            "_forward_hooks_with_kwargs",
            "_forward_pre_hooks_with_kwargs",
        ):
            hooks = getattr(mod, attr, None)
            assert not hooks, f"{name or '(model)'} still has {attr}: {hooks}"


@pytest.fixture
def no_hooks_left():
    """The helper above, as a fixture."""
    return assert_no_hooks
