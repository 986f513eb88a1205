"""The package's names stay functions after its modules are imported (a submodule named like
a lazily loaded function used to replace it: ``from actviz.analysis.concepts import train``
then gave the module)."""

from __future__ import annotations

import importlib
import inspect


def test_names_are_not_shadowed_by_their_modules():
    for module in (
        "training",
        "concept_scan",
        "dictionary",
        "hooks",
        "concept_sheet",
        "tiles",
        "ranking",
        "directions",
    ):
        importlib.import_module(f"actviz.analysis.concepts.{module}")
    from actviz.analysis.concepts import (
        concept_atlas,
        concept_effects,
        load,
        resolve_hook,
        scan_concepts,
        top_heatmaps,
        train,
    )

    for fn in (
        train,
        scan_concepts,
        top_heatmaps,
        load,
        resolve_hook,
        concept_effects,
        concept_atlas,
    ):
        assert inspect.isfunction(fn), fn
