"""The plugins bench section: its figures exist and its 'installed' set-up is found."""

from __future__ import annotations

from importlib.metadata import PathDistribution
from pathlib import Path

from actviz.bench import plugins_bench


def test_the_render_figures_are_measured(qapp):
    got = plugins_bench.render(repeats=3, shape=(8, 6, 6))
    for key in ("plugin_view_render_p95_ms", "plugin_view_prepare_p95_ms", "panel_render_p95_ms"):
        assert got[key] > 0
    assert got["plugin_view_render_p95_ms"] >= got["plugin_view_prepare_p95_ms"]


def test_the_installed_setup_declares_both_examples(tmp_path):
    site, *sources = plugins_bench._site_with_examples(tmp_path)
    found = {}
    for info in Path(site).glob("*.dist-info"):
        dist = PathDistribution(info)
        found[dist.metadata["Name"]] = [ep.value for ep in dist.entry_points]
    assert found == {
        "actviz-correlation": ["actviz_correlation:plugin"],
        "actviz-wav": ["actviz_wav:plugin"],
    }
    assert all(
        (Path(s) / p).is_dir()
        for s, p in zip(sources, ("actviz_correlation", "actviz_wav"), strict=True)
    )
