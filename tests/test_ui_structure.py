"""The window is a host: features attach through it only, and ``ui/`` has no import circles.

Read from the sources' ASTs (every import, deferred and type-only ones too), like
``test_import_graph``; plus the constructors of the features the window hosts by default.
"""

from __future__ import annotations

import inspect

from tests.test_import_graph import cycles, import_graph

#: The window's features: each is one package under ``actviz/ui``.
FEATURES = (
    "live",
    "whatif",
    "compare",
    "dataset",
    "tokens",
    "sessions",
    "effects",
    "atlas",
    "visualize",
    "concepts",
)
#: What a feature may import from ``actviz.ui``: the host protocol, passive panels, the worker,
#: the Qt-free loader helpers and where file dialogs start (besides its own package and
#: everything outside ``ui``).
FEATURE_MAY_IMPORT = (
    "actviz.ui.host",
    "actviz.ui.panels",
    "actviz.ui.worker",
    "actviz.ui.private_model",
    "actviz.ui.background_loads",
    "actviz.ui.file_dialogs",
)


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["actviz", "ui"]:
        return None
    return ".".join(parts[:3])


def ui_package_graph() -> dict[str, set[str]]:
    """``actviz.ui.X -> {actviz.ui.Y, ...}``: which ``ui`` sub-packages (and top modules) each
    one imports."""
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        source = _subpackage(module)
        if source is None:
            continue
        edges = graph.setdefault(source, set())
        for target in targets:
            sub = _subpackage(target)
            if sub is not None and sub != source:
                edges.add(sub)
    return graph


def test_no_import_circles_between_ui_subpackages():
    graph = ui_package_graph()
    assert {f"actviz.ui.{name}" for name in FEATURES} <= set(graph)
    assert cycles(graph) == []


def test_features_import_only_the_host_panels_and_qt_free_state():
    bad = []
    for module, targets in import_graph().items():
        feature = next((f for f in FEATURES if module.startswith(f"actviz.ui.{f}.")), None)
        if feature is None:
            continue
        for target in targets:
            if not target.startswith("actviz.ui") or target.startswith(f"actviz.ui.{feature}"):
                continue
            if not target.startswith(FEATURE_MAY_IMPORT):
                bad.append(f"{module} imports {target}")
    assert bad == []


def test_the_check_sees_a_circle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_default_feature_is_constructed_with_the_host_only():
    from actviz.ui.window.features import default_features

    made = default_features()
    assert {f.name for f in made} == set(FEATURES)
    for feature in made:
        params = list(inspect.signature(feature.__init__).parameters.values())[1:]
        required = [
            p
            for p in params
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        assert [p.name for p in required] == ["host"], feature
