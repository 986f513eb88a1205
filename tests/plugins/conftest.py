"""Installing plugins as pip does, without pip: a ``*.dist-info`` folder with ``METADATA`` and
``entry_points.txt`` on ``sys.path`` is what ``importlib.metadata`` reads, so the window finds
a plugin exactly as it finds one installed with ``pip install``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: The example plugins: distribution name -> (package, entry point name, version).
EXAMPLE_PLUGINS = {
    "actviz-correlation": ("actviz_correlation", "correlation", "0.1.0"),
    "actviz-wav": ("actviz_wav", "wav", "0.1.0"),
}


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


@pytest.fixture
def installed_examples(install_plugin: Callable[..., Path]) -> dict[str, str]:
    """Both example plugins installed; returns their entry point names by distribution."""
    for dist, (package, entry, version) in EXAMPLE_PLUGINS.items():
        install_plugin(dist, {entry: f"{package}:plugin"}, EXAMPLES / dist / "src", version)
    return {dist: entry for dist, (_, entry, _) in EXAMPLE_PLUGINS.items()}
