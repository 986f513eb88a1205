"""Imports point one way, down the stack core < display < io < data < analysis < workspace < ui
< testing | cli | bench, with no exception.

Nothing outside ``ui`` (and the ``testing`` plugin, which drives the window) imports Qt.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PKG = pathlib.Path(__file__).resolve().parents[1] / "actviz"
QT = ("PySide6", "pyqtgraph", "shiboken6")


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


#: Qt-free packages and the ``actviz`` packages each may not import (imports point
#: ui -> io -> display -> core). ``display`` is checked once it exists.
QT_FREE = {
    "core": ("actviz.ui", "actviz.io", "actviz.display"),
    "display": ("actviz.ui", "actviz.io"),
    "io": ("actviz.ui",),
    "data": ("actviz.ui",),  # dataset scans sit at the io level
    "analysis": ("actviz.ui", "actviz.workspace"),  # engines scripts call: visualise, effects
    # The state of an investigation (session, pins, edits, comparisons), below the window.
    "workspace": ("actviz.ui",),
}


def qt_free_packages() -> list[str]:
    return [p for p in QT_FREE if (PKG / p / "__init__.py").is_file()]


def test_qt_free_sources_import_no_qt_and_no_upper_layer():
    assert {"core", "io"} <= set(qt_free_packages())
    checked = 0
    for package in qt_free_packages():
        for f in sorted((PKG / package).rglob("*.py")):
            mods = imported_modules(f)
            qt = {m for m in mods if m.split(".")[0] in QT}
            assert not qt, f"{f.relative_to(PKG.parent)} imports Qt: {qt}"
            upper = {m for m in mods if m.startswith(QT_FREE[package])}
            assert not upper, f"{f.relative_to(PKG.parent)} imports an upper layer: {upper}"
            checked += 1
    assert checked >= 6


def test_the_layer_check_sees_a_forbidden_import(tmp_path):
    # The checks above would pass on files they could not read: show one that fails.
    f = tmp_path / "bad.py"
    f.write_text("from PySide6.QtCore import Qt\nimport actviz.io.export\nfrom . import x\n")
    assert imported_modules(f) == {"PySide6.QtCore", "actviz.io.export"}


def test_importing_qt_free_packages_loads_no_qt():
    packages = ", ".join(f"actviz.{p}" for p in qt_free_packages())
    code = (
        "import pkgutil, importlib, sys\n"
        f"import {packages}\n"
        f"for pkg in ({packages},):\n"
        "    for m in pkgutil.iter_modules(pkg.__path__):\n"
        "        importlib.import_module(pkg.__name__ + '.' + m.name)\n"
        "import actviz; actviz.capture; actviz.module_tree\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {QT!r})\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


#: The stack, bottom first: a package imports only packages below it (or itself); the top
#: row (the test driver, the command line, the benchmarks) may import each other.
STACK = ("core", "display", "io", "data", "analysis", "workspace", "ui")
TOP = ("testing", "cli", "bench")


def _layer(package: str) -> int:
    return STACK.index(package) if package in STACK else len(STACK)


def test_imports_point_down_the_stack_with_no_exception():
    known = set(STACK) | set(TOP)
    found = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())
    assert set(found) <= known, f"a package outside the stack: {set(found) - known}"
    upward = []
    for package in found:
        for f in sorted((PKG / package).rglob("*.py")):
            for mod in imported_modules(f):
                parts = mod.split(".")
                if parts[0] != "actviz" or len(parts) < 2 or parts[1] not in known:
                    continue
                if _layer(parts[1]) > _layer(package):
                    upward.append(f"{f.relative_to(PKG.parent)} -> {mod}")
    assert not upward, "imports that point up the stack:\n" + "\n".join(upward)
