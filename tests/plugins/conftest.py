"""Installing plugins. The two example plugins are installed with pip, as a user installs
them: CI puts them into the test environment (``pip install -e examples/...``); elsewhere the
tests install them once per worker with ``pip install --target`` into a folder put on
``sys.path``. The plugins that tests write on the fly are installed as pip would leave them,
without pip: a ``*.dist-info`` folder with ``METADATA`` and ``entry_points.txt`` on
``sys.path`` is what ``importlib.metadata`` reads, so the window finds them exactly as it
finds one installed with ``pip install``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: The example plugins: distribution name -> (package, entry point name, version).
EXAMPLE_PLUGINS = {
    "actviz-correlation": ("actviz_correlation", "correlation", "0.1.0"),
    "actviz-wav": ("actviz_wav", "wav", "0.1.0"),
}
PACKAGES = {package for package, _, _ in EXAMPLE_PLUGINS.values()}


def write_dist_info(site: Path, dist: str, version: str, entry_points: Mapping[str, str]) -> Path:
    """``<site>/<dist>-<version>.dist-info`` declaring ``entry_points`` in ``actviz.plugins``."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[actviz.plugins]\n{lines}")
    return info


@pytest.fixture
def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """``install_plugin(dist, entry_points, source=None, version="0.1.0")``: a distribution
    with these ``actviz.plugins`` entry points, its modules read from ``source`` (a folder
    put on ``sys.path``). Modules it imported are forgotten when the test ends."""
    site = tmp_path / "site-packages"
    site.mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(site))
    before = set(sys.modules)

    def install(
        dist: str,
        entry_points: Mapping[str, str],
        source: Path | None = None,
        version: str = "0.1.0",
    ) -> Path:
        if source is not None:
            monkeypatch.syspath_prepend(str(source))
        return write_dist_info(site, dist, version, entry_points)

    yield install
    for name in set(sys.modules) - before:
        if name.startswith(("actviz_", "broken_", "plugin_", "test_energy")):
            sys.modules.pop(name, None)


def installed_by_pip(dist: str) -> bool:
    """Whether ``dist`` is installed in this environment, by pip, from this repository."""
    try:
        found = distribution(dist)
    except PackageNotFoundError:
        return False
    url = found.read_text("direct_url.json") or ""
    return (found.read_text("INSTALLER") or "").strip() == "pip" and str(EXAMPLES / dist) in url


@pytest.fixture(scope="session")
def examples_site(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """``None`` where pip installed both examples into this environment (CI does); otherwise
    a folder into which ``pip install --target`` installed them, for the tests to put on
    ``sys.path``. pip builds from copies: it writes ``build/`` beside the sources, and two
    workers building the same folder at once would trip over each other."""
    if all(installed_by_pip(dist) for dist in EXAMPLE_PLUGINS):
        return None
    root = tmp_path_factory.mktemp("examples")
    sources = []
    for dist in EXAMPLE_PLUGINS:
        sources.append(root / dist)
        shutil.copytree(
            EXAMPLES / dist, sources[-1], ignore=shutil.ignore_patterns("build", "*.egg-info")
        )
    site = root / "site-packages"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site)]
    done = subprocess.run([*pip, *map(str, sources)], capture_output=True, text=True)
    assert done.returncode == 0, f"pip could not install the examples:\n{done.stderr}"
    return site


@pytest.fixture
def installed_examples(
    install_plugin: Callable[..., Path],
    examples_site: Path | None,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """Both example plugins installed with pip; returns their entry point names by
    distribution."""
    if examples_site is not None:
        monkeypatch.syspath_prepend(str(examples_site))
    # Imported from elsewhere before (the bench imports the sources): found afresh, as installed.
    for name in [n for n in sys.modules if n.split(".")[0] in PACKAGES]:
        monkeypatch.delitem(sys.modules, name)
    return {dist: entry for dist, (_, entry, _) in EXAMPLE_PLUGINS.items()}
