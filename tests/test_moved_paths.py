"""Import paths the documentation once showed still work, with a DeprecationWarning naming the
new path; the public script API is unchanged."""

from __future__ import annotations

import importlib

import pytest

import actviz

OLD = [
    ("actviz.io.models", "open_model", "actviz.io.models.loading"),
    ("actviz.io.export", "export_capture", "actviz.io.export.capture_export"),
    ("actviz.io.demo", "demo_samples", "actviz.io.models.demo_model"),
    ("actviz.analysis.effects", "estimate_from_capture", "actviz.analysis.effects.channel_effects"),
    ("actviz.analysis.effects", "verify", "actviz.analysis.effects.channel_effects"),
    ("actviz.analysis.visualize", "visualize", "actviz.analysis.visualize.feature_vis"),
    ("actviz.analysis.visualize", "layer_channels", "actviz.analysis.visualize.feature_vis"),
    ("actviz.analysis.visualize_export", "reproduce", "actviz.analysis.visualize.picture_files"),
]


@pytest.mark.parametrize(("old", "name", "new"), OLD)
def test_an_old_documented_path_warns_and_gives_the_new_object(old, name, new):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"):
        found = getattr(module, name)
    assert found is getattr(importlib.import_module(new), name)


def test_an_unknown_name_is_still_an_attribute_error():
    module = importlib.import_module("actviz.io.models")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        module.nothing  # noqa: B018


def test_the_public_api_is_the_engines_functions():
    from actviz.analysis.effects.channel_effects import effects
    from actviz.analysis.visualize.feature_vis import visualize
    from actviz.io.models.loading import load_model

    assert (actviz.visualize, actviz.effects, actviz.load_model) == (visualize, effects, load_model)
