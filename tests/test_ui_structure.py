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
    from actviz.ui.window.main_window import default_features

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


#: Test files at ``tests/ui``'s top that name no module there (none).
LOOSE_TOP_LEVEL_TESTS: set[str] = set()
#: ``ui`` packages whose tests live outside ``tests/ui``, and where.
UI_PACKAGES_TESTED_ELSEWHERE = {
    # The plugin tests install plugins as pip does (their own conftest) and test the public
    # plugin API (actviz/plugins.py), the examples and the bench section with it.
    "plugins": "tests/plugins",
}


def mirror_problems(ui_root, tests_root) -> list[str]:
    """What in ``tests_root`` does not mirror the ``ui`` package at ``ui_root``.

    The mirror: a folder ``tests/ui/<package>/`` (a package: it has ``__init__.py``) for each
    package of ``actviz/ui`` and none for anything else, the same below; a test of a module
    at ``ui``'s top (``worker.py``) is ``tests/ui/test_<module>[_what].py``; helper modules
    (``conftest.py``, ``qt_helpers.py``, ...) may stand anywhere.
    """
    problems = []

    def packages(folder):
        return {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}

    def folders(folder):
        return {p.name for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}

    def walk(ui, tests, rel, top):
        for name in sorted(folders(tests) - packages(ui)):
            problems.append(f"tests/ui/{rel}{name}/ mirrors no package actviz/ui/{rel}{name}")
        for name in sorted(folders(tests) & packages(ui)):
            if not (tests / name / "__init__.py").is_file():
                problems.append(f"tests/ui/{rel}{name}/ has no __init__.py")
            walk(ui / name, tests / name, f"{rel}{name}/", top=False)
        for name in sorted(packages(ui) - folders(tests)):
            if not rel and name in UI_PACKAGES_TESTED_ELSEWHERE:
                continue
            problems.append(f"actviz/ui/{rel}{name}/ has no tests/ui/{rel}{name}/")
        if not top:
            return
        modules = {p.stem for p in ui.glob("*.py") if p.stem != "__init__"}
        for test in sorted(tests.glob("test_*.py")):
            if test.name in LOOSE_TOP_LEVEL_TESTS:
                continue
            stem = test.stem.removeprefix("test_")
            if not any(stem == m or stem.startswith(f"{m}_") for m in modules):
                problems.append(
                    f"tests/ui/{test.name} names no module at actviz/ui's top "
                    f"({sorted(modules)}): it belongs in the folder of the package it tests"
                )

    walk(ui_root, tests_root, "", top=True)
    return problems


def test_tests_ui_mirrors_the_ui_packages():
    import pathlib

    import actviz

    here = pathlib.Path(__file__).parent
    ui = pathlib.Path(actviz.__file__).parent / "ui"
    assert mirror_problems(ui, here / "ui") == []
    for package, where in UI_PACKAGES_TESTED_ELSEWHERE.items():
        assert (ui / package / "__init__.py").is_file(), package
        assert (here.parent / where).is_dir(), where


def test_the_mirror_check_sees_a_stray_folder_a_missing_one_and_a_loose_test(tmp_path):
    ui, tests = tmp_path / "ui", tmp_path / "tests"
    for folder in (ui / "live", ui / "compare", tests / "live", tests / "old_bugs"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    for path in (ui / "worker.py", tests / "test_worker_jobs.py", tests / "test_switch.py"):
        path.write_text("")
    assert mirror_problems(ui, tests) == [
        "tests/ui/old_bugs/ mirrors no package actviz/ui/old_bugs",
        "actviz/ui/compare/ has no tests/ui/compare/",
        "tests/ui/test_switch.py names no module at actviz/ui's top (['worker']): it belongs in"
        " the folder of the package it tests",
    ]
    (tests / "compare").mkdir()
    (tests / "old_bugs" / "__init__.py").unlink()
    (tests / "old_bugs").rmdir()
    (tests / "test_switch.py").unlink()
    assert mirror_problems(ui, tests) == ["tests/ui/compare/ has no __init__.py"]
