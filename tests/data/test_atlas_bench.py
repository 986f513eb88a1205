"""The atlas benchmark section runs and reports every figure (tiny sizes; no time asserted)."""

from __future__ import annotations

import math

from actviz.bench import atlas_bench
from actviz.data.atlas_map import umap_available


def test_atlas_bench_reports_its_figures_at_tiny_sizes(capsys, qtbot):
    summary: dict = {}
    atlas_bench.run(True, summary, images=8, pca_shape=(300, 16), pan_points=2000, frames=6)
    out = capsys.readouterr().out
    assert "scan with / without embeddings" in out and "demo" in out
    assert summary["scan_embed_ratio"] > 0 and math.isfinite(summary["scan_embed_ratio"])
    assert 0 < summary["atlas_pca_s"] < 60
    assert 0 < summary["atlas_pan_p95_ms"] < 60_000
    assert 0 < summary["atlas_zoom_p95_ms"] < 60_000
    assert 0 < summary["atlas_pan_scatter_p95_ms"] < 60_000
    # --quick never runs UMAP; without umap-learn the table says it is missing
    assert summary["atlas_umap_s"] is None
    if not umap_available():
        assert "umap-learn is not installed" in out


def test_panning_the_map_moves_one_image_and_zooming_splats_again(qtbot):
    times, renders = atlas_bench.pan_frames(points=500, frames=5)
    assert len(times) == 5 and all(t > 0 for t in times)
    # The view zoomed in 0.6x before the pan: every dot fits one image, splatted once.
    assert renders == 0
    times, renders = atlas_bench.pan_frames(points=500, frames=5, zoom=True)
    assert len(times) == 5 and renders == 5


def test_the_scatter_comparison_paints_every_frame(qtbot):
    times, renders = atlas_bench.pan_frames(points=500, frames=5, item="scatter")
    assert len(times) == 5 and all(t > 0 for t in times) and renders == 0
