"""No import cycles anywhere in ``actviz``.

The graph is read from the sources' ASTs, so it sees every import a module can make: at module
level, under ``if TYPE_CHECKING:`` (a type-only import is still a dependency of the design)
and inside functions (a deferred import hides a cycle, it does not remove it).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "actviz"


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    """The absolute module ``from ... import`` names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    base = name.split(".")
    if not is_package:
        base.pop()  # a module's relative imports start at its package
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The ``actviz`` modules ``name`` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, name, is_package)
            for alias in node.names:
                # ``from actviz.ui import worker`` depends on the submodule ``actviz.ui.worker``
                # (not on the package, whose ``__init__`` every submodule runs anyway).
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    edges = set()
    for target in found:
        # ``import a.b.c`` of a name that is not a module (an attribute) counts as its module.
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name and target.startswith("actviz"):
            edges.add(target)
    return edges


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path back to its start) per strongly connected component with one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [c for c in components if len(c) > 1]


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    """``a -> b -> a``: a shortest path from the component's first module back to it."""
    start = component[0]
    members = set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return " -> ".join(paths[v] + [start])
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return " <-> ".join(component)  # pragma: no cover - a component always closes


def test_the_graph_sees_every_kind_of_import(tmp_path: pathlib.Path) -> None:
    pkg = tmp_path / "actviz"
    (pkg / "sub").mkdir(parents=True)
    for f in ("__init__.py", "a.py", "b.py", "c.py", "d.py", "sub/__init__.py", "sub/e.py"):
        (pkg / f).write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from actviz.b import X\n"
    )
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("import actviz.d.thing\nfrom .sub import e\n")
    (pkg / "sub/e.py").write_text("from ..a import Y\n")
    modules = {
        ".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): p
        for p in pkg.rglob("*.py")
    }
    graph = {n: imports_of(n, p, modules) for n, p in modules.items()}
    assert graph["actviz.a"] == {"actviz.b"}
    assert graph["actviz.b"] == {"actviz.c"}
    assert graph["actviz.c"] == {"actviz.d", "actviz.sub.e"}
    assert graph["actviz.sub.e"] == {"actviz.a"}
    found = cycles(graph)
    assert found == [["actviz.a", "actviz.b", "actviz.c", "actviz.sub.e"]]
    assert (
        describe(found[0], graph) == "actviz.a -> actviz.b -> actviz.c -> actviz.sub.e -> actviz.a"
    )


def test_actviz_has_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 40 and "actviz.ui.worker" in graph  # the walk found the package
    found = [describe(c, graph) for c in cycles(graph)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_every_package_is_installed() -> None:
    # setuptools lists packages by hand (resources/ installs as actviz.resources): a package
    # missing from the list imports in a checkout but not after a plain `pip install .`.
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {module_name(p.parent) for p in PKG.rglob("__init__.py")}
    assert on_disk - listed == set()
