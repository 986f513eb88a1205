"""Test helpers are written once: a helper several test files use lives in a conftest or a
helper module (``tests/helpers.py``, ``tests/ui/qt_helpers.py``, ...), not copied into each,
and not imported from another test file.

Read from the sources' ASTs: every module-level function and class of ``tests/`` but the tests
themselves.
"""

from __future__ import annotations

import ast
import pathlib
import re
from collections import defaultdict

TESTS = pathlib.Path(__file__).parent


def _definition(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> tuple[str, int]:
    """What makes two definitions the same helper: their decorators, arguments (or bases) and
    body, the docstring aside (names, line numbers and comments do not count); and how many
    statements the body has."""
    body = node.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    head = node.bases if isinstance(node, ast.ClassDef) else node.args
    parts = [type(node).__name__, *map(ast.dump, node.decorator_list)]
    parts += [ast.dump(h) for h in head] if isinstance(head, list) else [ast.dump(head)]
    return "\n".join([*parts, *map(ast.dump, body)]), len(body)


def copied_helpers(files: dict[str, str]) -> list[str]:
    """The helpers defined in more than one of ``files`` (``{path: source}``).

    A helper is copied when another file defines one the same (see :func:`_definition`) under
    the same name, or under any name when it is more than one statement long.

    Returns
    -------
    list of str
        ``"name: path:line, path:line"`` for each copied helper, sorted.
    """
    places: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    long: dict[str, bool] = {}
    for path, source in files.items():
        for node in ast.parse(source).body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if node.name.startswith("test_"):
                continue
            key, statements = _definition(node)
            places[key].append((node.name, path, node.lineno))
            long[key] = statements > 1
    found = []
    for key, where in places.items():
        by_name: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for name, path, line in where:
            by_name[name].append((path, line))
        groups = [sorted(set(where_)) for where_ in by_name.values()]
        if long[key]:
            groups = [sorted({(path, line) for _, path, line in where})]
        for group in groups:
            if len({path for path, _ in group}) > 1:
                names = sorted({name for name, path, line in where if (path, line) in group})
                spots = ", ".join(f"{path}:{line}" for path, line in group)
                found.append(f"{'/'.join(names)}: {spots}")
    return sorted(found)


def test_no_helper_is_defined_in_two_test_files():
    files = {
        str(path.relative_to(TESTS)): path.read_text(encoding="utf-8")
        for path in sorted(TESTS.rglob("*.py"))
    }
    assert len(files) > 100
    assert copied_helpers(files) == []


def test_the_check_sees_a_copied_helper_under_its_name_or_another():
    fixture = '''
import pytest

@pytest.fixture
def worker(qtbot):
    """A worker."""
    w = Worker()
    yield w
    w.shutdown()
'''
    other_docstring = fixture.replace('"""A worker."""', '"""Other words for it."""')
    renamed = fixture.replace("def worker", "def own_worker")
    one_line = "def model():\n    return build()\n"
    assert copied_helpers({"a.py": fixture, "b.py": other_docstring}) == ["worker: a.py:5, b.py:5"]
    assert copied_helpers({"a.py": fixture, "b.py": renamed}) == [
        "own_worker/worker: a.py:5, b.py:5"
    ]
    # A one-line body under another name is no copy; the same name is; a test is no helper.
    assert copied_helpers({"a.py": one_line, "b.py": one_line.replace("model", "net")}) == []
    assert copied_helpers({"a.py": one_line, "b.py": one_line}) == ["model: a.py:1, b.py:1"]
    tests = "def test_it():\n    assert f() == 1\n    assert g() == 2\n"
    assert copied_helpers({"a.py": tests, "b.py": tests}) == []
    # Another scope is another fixture (a folder's own overrides the suite's).
    scoped = fixture.replace("@pytest.fixture", '@pytest.fixture(scope="module")')
    assert copied_helpers({"a.py": fixture, "b.py": scoped}) == []
    # Two definitions in one file are that file's business.
    assert copied_helpers({"a.py": fixture + renamed}) == []


#: Test files that still import helpers from another test file (``file: module``), to move into
#: a conftest or a helper module; the list only shrinks.
KNOWN_TEST_IMPORTS = {
    # cycles and import_graph are the import-graph test's own; the layering tests share them.
    "test_ui_structure.py: tests.test_import_graph",
}
_TEST_MODULE = re.compile(r"^tests(\.\w+)*\.test_\w+$")


def imported_test_modules(files: dict[str, str]) -> set[str]:
    """``"file: module"`` for each test module that a file of ``files`` imports."""
    found = set()
    for path, source in files.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            found |= {f"{path}: {m}" for m in modules if _TEST_MODULE.match(m)}
    return found


def test_no_test_file_imports_another_test_file():
    files = {
        str(path.relative_to(TESTS)): path.read_text(encoding="utf-8")
        for path in sorted(TESTS.rglob("*.py"))
    }
    found = imported_test_modules(files)
    assert sorted(found - KNOWN_TEST_IMPORTS) == []
    assert sorted(KNOWN_TEST_IMPORTS - found) == []  # moved: take it off the list
    assert not any(entry.startswith("ui/") for entry in found)


def test_the_import_check_sees_a_test_module_imported_from_a_test():
    files = {
        "ui/a/test_x.py": "from tests.ui.b.test_y import helper\nimport tests.test_z\n",
        "ui/a/test_w.py": "def f():\n    from tests.ui.b.test_y import helper\n",
        "ui/b/test_y.py": "from tests.ui.b.windows import helper\nfrom tests.helpers import frame\n",
    }
    assert imported_test_modules(files) == {
        "ui/a/test_x.py: tests.ui.b.test_y",
        "ui/a/test_x.py: tests.test_z",
        "ui/a/test_w.py: tests.ui.b.test_y",
    }
