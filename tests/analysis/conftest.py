"""What several analysis test files share: ``demo``, the bundled demo network."""

from __future__ import annotations

import pytest
from torch import nn

from actviz.io.models.demo_model import load_demo_model


@pytest.fixture(scope="module")
def demo() -> nn.Module:
    """The bundled demo network (its weights when built, else random init), shared by a
    test module."""
    return load_demo_model()
