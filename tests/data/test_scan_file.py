"""A finished scan saved in a folder and opened again without the model or the data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from actviz.data import scan
from actviz.data.atlas_map import build_atlas
from actviz.data.scan_file import open_scan, save_scan
from actviz.data.scan_result import _rows_with_vectors
from tests.data.conftest import LAYERS, tiny_net, write_images


def assert_same_scan(a, b) -> None:
    assert (a.layers, a.k, a.count, a.skipped) == (b.layers, b.k, b.count, b.skipped)
    assert a.sources == b.sources and a.class_names == b.class_names
    for layer in a.layers:
        ra, rb = a.results[layer], b.results[layer]
        for key in ("values", "indices", "locations", "positive"):
            np.testing.assert_array_equal(getattr(ra, key), getattr(rb, key))
        np.testing.assert_array_equal(ra.stats.std, rb.stats.std)
        assert ra.spatial == rb.spatial and ra.stats.count == rb.stats.count
        assert a.top(layer, 1) == b.top(layer, 1)
    assert a.embedding_layers == b.embedding_layers
    for layer in a.embedding_layers:
        ea, eb = a.embeddings(layer), b.embeddings(layer)
        np.testing.assert_array_equal(ea.vectors, np.asarray(eb.vectors))
        np.testing.assert_array_equal(ea.indices, eb.indices)
        assert ea.axis == eb.axis and ea.sources == eb.sources


def test_saved_folder_scan_opens_equal_with_embeddings_mapped(tmp_path: Path):
    folder = tmp_path / "images"
    write_images(folder, 12)
    a = scan(tiny_net(), folder, LAYERS, k=3, batch_size=4, cache=False, embeddings=["4", "7"])
    assert a.class_names and isinstance(a.sources[0], str) and a.labels is not None
    path = save_scan(a, tmp_path / "saved")
    assert path.name == "scan.json" and json.loads(path.read_text())["count"] == 12
    b = open_scan(tmp_path / "saved")
    assert_same_scan(a, b)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert isinstance(b.pooled["4"], np.memmap) and not b.pooled["4"].flags.writeable
    assert b.from_cache and b.cache_path is None
    # The atlas of the opened scan is the atlas of the scan.
    np.testing.assert_allclose(
        build_atlas(a, "4").coords, build_atlas(b, "4").coords, rtol=1e-6, atol=1e-6
    )


def test_rows_written_by_the_scan_stay_and_dataset_sources_are_not_stored(tmp_path: Path):
    rows = tmp_path / "rows"
    data = torch.rand(40, 3, 8, 8)
    a = scan(
        tiny_net(),
        data,
        ["4"],
        k=2,
        batch_size=16,
        cache=False,
        embeddings=True,
        embeddings_dir=rows,
    )
    before = (rows / "4.f16").stat().st_mtime_ns
    save_scan(a, rows)
    assert (rows / "4.f16").stat().st_mtime_ns == before  # not rewritten
    meta = json.loads((rows / "scan.json").read_text())
    assert meta["sources"] == {"range": 40}
    b = open_scan(rows)
    assert b.sources == tuple(range(40))
    assert_same_scan(a, b)


def test_not_a_scan_is_refused(tmp_path: Path):
    (tmp_path / "scan.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="not a saved actviz scan"):
        open_scan(tmp_path)
    with pytest.raises(FileNotFoundError):
        open_scan(tmp_path / "nothing")


def test_rows_with_vectors_reads_in_blocks(monkeypatch):
    monkeypatch.setattr("actviz.data.scan_result._BLOCK_VALUES", 6)  # two rows a block
    full = np.ones((10, 3), np.float16)
    full[[0, 4, 9]] = np.nan
    full[5, 1] = np.nan  # one NaN value: the row still has a vector
    np.testing.assert_array_equal(_rows_with_vectors(full), [1, 2, 3, 5, 6, 7, 8])
    assert _rows_with_vectors(np.zeros((0, 3), np.float16)).size == 0


def test_the_scale_bench_opens_a_saved_scan_in_the_window_and_maps_every_point(tmp_path: Path):
    """scan_scale's children: PCA of all points, and the explorer window (offscreen) opening
    the scan folder through Data > Open a saved scan… and painting its atlas."""
    from actviz.bench.scale_bench import _child

    data = torch.rand(300, 3, 8, 8)
    rows = tmp_path / "rows"
    a = scan(
        tiny_net(),
        data,
        ["4", "7"],
        k=2,
        batch_size=64,
        cache=False,
        embeddings=True,
        embeddings_dir=rows,
    )
    save_scan(a, rows)
    pca = _child("pca", rows, timeout=300)
    assert (pca["points"], pca["dim"], pca["layer"]) == (300, 6, "4")
    assert pca["peak"] >= pca["rss_before"] > 0
    win = _child("window", rows, timeout=300)
    assert win["built"] and win["painted"] and win["points"] == 300
    assert 0 <= win["open_s"] <= win["fit_s"] <= win["drawn_s"]
    assert win["refused"] and win["kept"]  # a folder without scan.json: refused, scan stays


def test_the_scale_bench_umap_child_maps_every_point_fitting_a_sample(monkeypatch, tmp_path):
    import sys
    import types

    from actviz.bench.scale_bench import _umap_child
    from actviz.data import atlas_map as atlas
    from tests.data.conftest import FakeUMAP

    fake = types.ModuleType("umap")
    fake.UMAP = FakeUMAP
    monkeypatch.setitem(sys.modules, "umap", fake)
    monkeypatch.setattr(atlas, "UMAP_FIT_MAX", 50)
    rows = tmp_path / "rows"
    data = torch.rand(120, 3, 8, 8)
    a = scan(
        tiny_net(),
        data,
        ["4"],
        k=2,
        batch_size=64,
        cache=False,
        embeddings=True,
        embeddings_dir=rows,
    )
    save_scan(a, rows)
    got = _umap_child(rows)
    assert got["fitted_on"] == 50 and FakeUMAP.seen[-1].fitted.shape[0] == 50
