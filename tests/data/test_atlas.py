"""actviz.atlas: projections equal to their definitions, exact neighbours, separating channels."""

from __future__ import annotations

import numpy as np
import pytest

import actviz
from actviz.data import scan
from actviz.data.atlas_map import cosine_top, project, separating_channels, umap_available
from tests.data.conftest import FakeUMAP, tiny_net


def _clustered(n: int = 300, d: int = 24, seed: int = 0) -> np.ndarray:
    """Three blobs with distinct variances along their axes (well-separated eigenvalues)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 4, (3, d))
    scales = np.linspace(3, 0.2, d)
    return centres[np.arange(n) % 3] + rng.normal(0, 1, (n, d)) * scales


def _svd_projection(x: np.ndarray, dims: int) -> np.ndarray:
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:dims].T


def _equal_up_to_sign(a: np.ndarray, b: np.ndarray, atol: float) -> None:
    for j in range(a.shape[1]):
        sign = 1.0 if np.dot(a[:, j], b[:, j]) >= 0 else -1.0
        np.testing.assert_allclose(a[:, j], sign * b[:, j], atol=atol)


@pytest.mark.parametrize(
    ("n", "d", "dims"), [(300, 24, 2), (300, 24, 3), (400, 128, 2), (400, 128, 5), (20, 64, 2)]
)
def test_pca_coordinates_equal_numpys_svd_projection_up_to_sign(n, d, dims):
    x = _clustered(n, d)
    p = actviz.atlas.project(x, method="pca", dims=dims)
    assert p.method == "pca" and p.coords.shape == (n, dims)
    _equal_up_to_sign(p.coords, _svd_projection(x, dims), atol=1e-4)
    # orthonormal axes, variance shares in decreasing order
    np.testing.assert_allclose(p.components @ p.components.T, np.eye(dims), atol=1e-9)
    assert np.all(np.diff(p.explained) <= 0) and 0 < p.explained.sum() <= 1
    # float16 vectors (what a scan stores) project like their float64 values
    half = x.astype(np.float16)
    _equal_up_to_sign(
        project(half, dims=dims).coords, _svd_projection(half.astype(np.float64), dims), 1e-4
    )


def test_a_new_vector_is_placed_with_the_fitted_basis():
    x = _clustered()
    p = project(x, "pca")
    new = np.random.default_rng(1).normal(0, 3, (5, x.shape[1]))
    expected = (new - x.mean(axis=0)) @ p.components.T
    np.testing.assert_allclose(p.transform(new), expected, atol=1e-10)
    np.testing.assert_allclose(p.transform(new[2]), expected[2], atol=1e-10)
    # the fitted vectors land where the fit put them
    np.testing.assert_allclose(p.transform(x[:7]), p.coords[:7], atol=1e-10)
    with pytest.raises(ValueError, match="fitted on 24"):
        p.transform(new[:, :5])


def test_project_refuses_what_it_cannot_do():
    x = _clustered(30, 4)
    with pytest.raises(ValueError, match="unknown projection"):
        project(x, "tsne")
    with pytest.raises(ValueError, match="dims"):
        project(x, dims=5)
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        project(x)


def test_neighbours_equal_a_brute_force_cosine_search(image_folder):
    net = tiny_net()
    result = scan(net, image_folder, ["1", "4"], k=3, num_workers=0, embeddings=True)
    for layer in ("1", "4"):
        emb = result.embeddings(layer)
        v = emb.vectors.astype(np.float64)
        unit = v / np.linalg.norm(v, axis=1, keepdims=True)
        for q in (0, 17, 41):
            query = v[q] * 2.5 + 0.01  # not one of the rows
            sims = unit @ (query / np.linalg.norm(query))
            order = np.lexsort((np.arange(len(sims)), -sims))[:7]
            got = result.neighbours(layer, query, k=7)
            assert [n.index for n in got] == [int(emb.indices[i]) for i in order]
            assert [n.source for n in got] == [emb.sources[i] for i in order]
            np.testing.assert_allclose([n.similarity for n in got], sims[order], atol=1e-6)
    # More than there are: every image, best first.
    assert len(result.neighbours("4", result.embeddings("4").vectors[0], k=500)) == 60


def test_cosine_top_breaks_ties_by_row_and_handles_zero_vectors():
    v = np.array([[1, 0], [0, 1], [2, 0], [0, 0], [1, 0]], dtype=np.float16)
    rows, sims = cosine_top(v, np.array([3.0, 0.0]), k=4)
    assert rows.tolist() == [0, 2, 4, 1] and sims.tolist() == [1.0, 1.0, 1.0, 0.0]
    rows, _ = cosine_top(v, np.array([0.0, 0.0]), k=2)
    assert rows.tolist() == [0, 1]  # all zero: data order
    with pytest.raises(ValueError, match="3 values"):
        cosine_top(v, np.zeros(3), k=1)


def test_separating_channels_rank_the_channel_that_splits_the_selection():
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (200, 8))
    selected = np.arange(0, 200, 4)
    x[selected, 5] += 3.0  # channel 5 is high in the selection
    x[selected, 2] -= 1.5  # channel 2 lower
    splits = separating_channels(x, selected, k=3)
    assert [s.channel for s in splits[:2]] == [5, 2]
    assert splits[0].score > 2 and splits[1].score < -1
    mask = np.zeros(200, bool)
    mask[selected] = True
    assert splits[0].mean_in == pytest.approx(x[mask, 5].mean())
    assert splits[0].mean_out == pytest.approx(x[~mask, 5].mean())
    assert separating_channels(x, mask, k=3) == splits
    with pytest.raises(ValueError, match="not none or all"):
        separating_channels(x, [], k=3)


def test_separating_channels_without_spread_rank_by_the_difference():
    # Two images, one selected: no channel has spread, every score is infinite; the
    # channels went in channel order, whatever their difference.
    x = np.array([[0.1, 0.5, 0.3, 0.2], [0.2, 0.1, 0.3, 0.9]])
    splits = separating_channels(x, [0], k=4)
    assert [s.channel for s in splits] == [3, 1, 0, 2]
    assert [s.score for s in splits] == [-np.inf, np.inf, -np.inf, 0.0]


@pytest.mark.slow  # numba compiles umap's code on the first fit and transform: minutes
@pytest.mark.skipif(not umap_available(), reason="umap-learn (actviz[atlas]) not installed")
def test_umap_projects_and_places_new_points_near_their_cluster():
    x = _clustered(150, 12)
    p = project(x, method="umap", dims=2, seed=0)
    assert p.method == "umap" and p.coords.shape == (150, 2) and np.isfinite(p.coords).all()
    again = project(x, method="umap", dims=2, seed=0)
    np.testing.assert_allclose(p.coords, again.coords, atol=1e-5)  # the seed fixes the layout
    placed = p.transform(x[:6] + 0.01)
    assert placed.shape == (6, 2)
    # each new point lands nearer its own blob's centre than the other blobs'
    centres = np.array([p.coords[np.arange(150) % 3 == c].mean(axis=0) for c in range(3)])
    nearest = np.argmin(((placed[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    assert nearest.tolist() == [0, 1, 2, 0, 1, 2]


def test_umap_without_umap_learn_says_how_to_get_it(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_umap(name, *args, **kwargs):
        if name == "umap":
            raise ImportError("no umap")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_umap)
    with pytest.raises(ImportError, match=r"actviz\[atlas\]"):
        project(_clustered(20, 4), method="umap")


def test_build_atlas_gives_a_window_everything_about_one_layer(image_folder):
    net = tiny_net()
    result = scan(net, image_folder, ["4", "7"], k=3, num_workers=0, embeddings=True)
    atlas = actviz.atlas.build_atlas(result, "4", logits="7")
    emb = result.embeddings("4")
    np.testing.assert_array_equal(atlas.coords, project(emb.vectors).coords)
    np.testing.assert_array_equal(atlas.labels, emb.labels)
    logits = result.embeddings("7").vectors
    np.testing.assert_array_equal(atlas.predictions, np.argmax(logits, axis=1))
    np.testing.assert_array_equal(atlas.correct(), atlas.predictions == emb.labels)
    np.testing.assert_array_equal(atlas.channel(2), emb.vectors[:, 2].astype(np.float32))
    # A live input: its capture lands where its scanned image did, and is its own nearest.
    from actviz.io.input_files import open_input

    x = open_input(result.sources[11], model=net).value
    cap = actviz.capture(net, x, ["4"], gradients=False)
    np.testing.assert_allclose(atlas.place(cap), atlas.coords[11], atol=2e-3)
    assert atlas.nearest(cap, k=1)[0].index == 11
    # the window's run result carries its capture
    from types import SimpleNamespace

    np.testing.assert_array_equal(atlas.place(SimpleNamespace(capture=cap)), atlas.place(cap))
    c = int(np.argmax(emb.vectors.astype(np.float64).std(axis=0)))
    selected = np.argsort(emb.vectors[:, c])[-15:]  # the images where channel c is highest
    assert atlas.separating(selected, k=1)[0].channel == c


def test_points_in_a_lasso_are_those_inside_its_shape():
    from actviz.data.atlas_map import points_in_polygon

    # An L: the unit square's left column and bottom row of a 2 x 2 grid of cells.
    shape = np.array([[0, 0], [2, 0], [2, 1], [1, 1], [1, 2], [0, 2]], dtype=float)
    g = np.linspace(0.05, 1.95, 20)
    xx, yy = np.meshgrid(g, g)
    pts = np.stack([xx.ravel(), yy.ravel()], axis=1)
    want = (pts[:, 0] < 1) | (pts[:, 1] < 1)
    np.testing.assert_array_equal(points_in_polygon(pts, shape), want)
    # The same shape drawn the other way round, and from another vertex.
    np.testing.assert_array_equal(points_in_polygon(pts, np.roll(shape[::-1], 2, axis=0)), want)
    # A triangle against the half-plane tests that define it; points far away are out.
    tri = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 3.0]])
    rng = np.random.default_rng(0)
    p = rng.uniform(-1, 5, (2000, 2))
    inside = (p[:, 0] > 0) & (p[:, 1] > 0) & (3 * p[:, 0] + 4 * p[:, 1] < 12)
    np.testing.assert_array_equal(points_in_polygon(p, tri), inside)
    # A line or a point is no shape.
    assert not points_in_polygon(p, tri[:2]).any()
    with pytest.raises(ValueError):
        points_in_polygon(np.zeros(3), tri)


def test_umap_narrows_wide_vectors_by_pca_and_places_new_ones_through_it(monkeypatch):
    import sys
    import types

    fake = types.ModuleType("umap")
    fake.UMAP = FakeUMAP
    monkeypatch.setitem(sys.modules, "umap", fake)
    FakeUMAP.seen.clear()
    x = _clustered(300, 64)
    p = project(x, "umap", seed=3)
    model = FakeUMAP.seen[-1]
    # 64 values go through PCA to 50, with 200 epochs unless asked otherwise.
    assert model.fitted.shape == (300, 50) and model.fitted.dtype == np.float32
    assert model.options["n_epochs"] == 200 and model.options["n_neighbors"] == 15
    # Its neighbours are found exactly, in the 50 values it is given, itself first.
    knn, dist, index = model.options["precomputed_knn"]
    assert knn.shape == dist.shape == (300, 15) and knn.dtype == np.int32
    assert (knn[:, 0] == np.arange(300)).all() and np.abs(dist[:, 0]).max() < 1e-3
    brute = np.linalg.norm(model.fitted[:, None].astype(float) - model.fitted[None], axis=-1)
    np.testing.assert_allclose(dist, np.sort(brute, axis=1)[:, :15], rtol=1e-4, atol=1e-3)
    assert index.query(model.fitted[:2], 15)[0].tolist() == knn[:2].tolist()
    pca = project(x, "pca", dims=50)
    np.testing.assert_allclose(model.fitted, pca.coords, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(p.coords, 2 * pca.coords[:, :2], rtol=1e-5, atol=1e-4)
    new = np.random.default_rng(2).normal(0, 3, (4, 64))
    np.testing.assert_allclose(p.transform(new), 2 * pca.transform(new)[:, :2], atol=1e-4)
    assert p.transform(new[0]).shape == (2,)
    with pytest.raises(ValueError, match="fitted on 64"):
        p.transform(new[:, :50])
    # Narrow vectors, or pca_dims=0, go in as they are; options reach umap.
    project(x[:, :20], "umap", n_epochs=50)
    assert FakeUMAP.seen[-1].fitted.shape == (300, 20)
    assert FakeUMAP.seen[-1].options["n_epochs"] == 50
    q = project(x, "umap", pca_dims=0)
    assert (
        FakeUMAP.seen[-1].fitted.shape == (300, 64) and "pca_dims" not in FakeUMAP.seen[-1].options
    )
    np.testing.assert_allclose(q.transform(new), 2 * new[:, :2], rtol=1e-6)


def test_umap_of_many_vectors_fits_a_sample_and_places_the_rest(monkeypatch, tmp_path):
    import sys
    import types

    from actviz.data import atlas_map as atlas

    fake = types.ModuleType("umap")
    fake.UMAP = FakeUMAP
    monkeypatch.setitem(sys.modules, "umap", fake)
    monkeypatch.setattr(atlas, "UMAP_FIT_MAX", 100)
    monkeypatch.setattr(atlas, "_PLACE_CHUNK", 64)
    FakeUMAP.seen.clear()
    x = _clustered(500, 8).astype(np.float16)
    rows = np.memmap(tmp_path / "rows.f16", dtype="<f2", mode="w+", shape=x.shape)
    rows[:] = x
    p = project(rows, "umap", seed=5)
    model = FakeUMAP.seen[-1]
    assert len(FakeUMAP.seen) == 1 and model.fitted.shape == (100, 8)  # fitted on 100 only
    assert p.fitted_on == 100 and p.coords.shape == (500, 2)
    # Every point is where the fit puts it: sampled ones by the fit, others by its transform.
    np.testing.assert_allclose(p.coords, 2 * x[:, :2].astype(np.float64), rtol=1e-3)
    # The sample is seeded: the same fit again, another with another seed.
    again = project(rows, "umap", seed=5)
    np.testing.assert_array_equal(FakeUMAP.seen[-1].fitted, model.fitted)
    assert again.fitted_on == 100
    project(rows, "umap", seed=6)
    assert not np.array_equal(FakeUMAP.seen[-1].fitted, model.fitted)
    assert project(rows[:100], "umap").fitted_on is None  # at the limit: every vector


@pytest.mark.slow  # importing umap-learn (numba, pynndescent) takes 5-15 s on two busy cores
@pytest.mark.skipif(not umap_available(), reason="umap-learn (actviz[atlas]) not installed")
def test_umaps_compiled_functions_are_kept_on_disk():
    import umap  # noqa: F401  (imports its numba functions; nothing is compiled here)
    from numba.core.caching import NullCache
    from umap import layouts, umap_

    from actviz.data.atlas_map import cache_umap_compiles

    cache_umap_compiles()
    for fn in (umap_.smooth_knn_dist, umap_.compute_membership_strengths, layouts.clip):
        assert not isinstance(fn._cache, NullCache), fn
    assert cache_umap_compiles() == 0  # once is enough


def test_exact_neighbours_equal_a_brute_force_search():
    from actviz.data.atlas_map import ExactNeighbours

    rng = np.random.default_rng(4)
    data = rng.normal(0, 1, (500, 7))
    queries = rng.normal(0, 1, (30, 7))
    idx, dist = ExactNeighbours(data).query(queries, 6)
    d = np.linalg.norm(queries[:, None] - data[None], axis=-1)
    np.testing.assert_array_equal(idx, np.argsort(d, axis=1)[:, :6])
    np.testing.assert_allclose(dist, np.sort(d, axis=1)[:, :6], rtol=1e-6)
    assert idx.dtype == np.int32 and dist.dtype == np.float32
    # More neighbours asked than there are vectors: all of them.
    assert ExactNeighbours(data[:4]).query(queries[:1], 9)[0].shape == (1, 4)
