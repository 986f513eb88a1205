"""Imports point one way: ui -> io -> core. core and io never import Qt."""

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


def test_core_and_io_sources_import_no_qt_and_no_upper_layer():
    files = sorted((PKG / "core").rglob("*.py")) + sorted((PKG / "io").rglob("*.py"))
    assert len(files) >= 6
    for f in files:
        mods = imported_modules(f)
        bad = {m for m in mods if m.split(".")[0] in QT or m.startswith("actviz.ui")}
        assert not bad, f"{f.relative_to(PKG.parent)} imports {bad}"
        if f.is_relative_to(PKG / "core"):
            assert not {m for m in mods if m.startswith("actviz.io")}, f


def test_importing_core_and_io_loads_no_qt():
    code = (
        "import pkgutil, importlib, sys\n"
        "import actviz.core, actviz.io\n"
        "for pkg in (actviz.core, actviz.io):\n"
        "    for m in pkgutil.iter_modules(pkg.__path__):\n"
        "        importlib.import_module(pkg.__name__ + '.' + m.name)\n"
        "import actviz; actviz.capture; actviz.module_tree\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {QT!r})\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
