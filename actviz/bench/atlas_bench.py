"""Dataset atlas: the cost of recording embeddings in a scan, projecting them, and panning the map.

* ``scan_embed_ratio``: images/s of ``actviz.scan`` recording every scanned layer's pooled
  vectors against the same scan without them (target >= 0.95). Pairs of the two scans
  alternate over one synthetic folder (the scan bench's), each with its cache emptied first
  and on, so both write every batch, and each choosing its batch size as the window and the
  command line let it (the one-image probe that sizes the batches also finds the
  embeddings' widths); the figure is the median of the per-pair ratios, the worst over the
  models.
* ``atlas_pca_s``: :func:`actviz.atlas.project` (exact PCA) of 10,000 x 512 float16 vectors
  (target <= 1 s), the median of a few fits.
* ``atlas_umap_s``: the same vectors through UMAP (target <= 60 s), when ``umap-learn`` is
  installed: the first fit in a new process, with numba's cache of compiled code filled by
  an earlier process (what a user waits for in every session after the first).
  ``atlas_umap_cold_s``: the first fit of that earlier process, which starts from an empty
  cache (the first use on a machine: numba compiles). Both processes use a cache folder of
  their own, so the user's cache neither helps nor changes. The second fit in the process
  (``atlas_umap_warm_s``), placing 10 new points and each step's CPU seconds are printed.
  Not run with ``--quick`` (minutes on two busy cores).
* ``atlas_pan_p95_ms``: the Atlas tab's map item (:class:`actviz.ui.atlas.view.RasterDots`,
  50,000 dots in 10 classes) in a 1280 x 720 ``PlotWidget``, offscreen: each frame moves the
  view by a step (``ViewBox.translateBy``, what a drag does) and runs the event loop once,
  which paints the scene; the 95th percentile of the frame times (target <= 30 ms). The item
  splats its dots into one image per zoom level and a pan moves that image; how many frames
  splatted anew is printed. ``atlas_zoom_p95_ms``: the same with each frame zooming by 5%
  (every frame splats). ``atlas_pan_scatter_p95_ms``: the pan of a pyqtgraph
  ``ScatterPlotItem`` with a brush per point, a comparison for the window's choice.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "pan_frames",
    "pca_seconds",
    "run",
    "scan_embed_pairs",
    "umap_fresh_processes",
    "umap_seconds",
]

_LAYERS = {
    "demo": ["features.block1", "features.block2", "features.block3", "features.block4", "fc"],
    "resnet18": ["layer1", "layer2", "layer3", "layer4", "fc"],
}


def _vectors(n: int, d: int, seed: int = 0) -> np.ndarray:
    """``n`` float16 vectors in 10 clusters (a layer's pooled vectors look clustered)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 2, (10, d))
    return (centres[np.arange(n) % 10] + rng.normal(0, 1, (n, d))).astype(np.float16)


def scan_embed_pairs(
    model: str,
    folder: Path,
    pairs: int,
    batch_size: int | None,
    workers: int,
    cache_root: Path,
) -> dict[str, Any]:
    """Alternate scans without and with embeddings over ``folder``: images/s and the median
    per-pair ratio (with / without)."""
    import torchvision

    from actviz.data.scan import scan
    from actviz.io.models.loading import open_model

    source: Any = open_model("demo") if model == "demo" else None
    if source is None:
        source = getattr(torchvision.models, model)(weights=None).eval()
    layers = _LAYERS[model]
    files = sorted(folder.rglob("*.jpg"))

    def one(embed: bool) -> float:
        shutil.rmtree(cache_root, ignore_errors=True)
        t0 = time.perf_counter()
        result = scan(
            source,
            folder,
            layers,
            batch_size=batch_size,
            num_workers=workers,
            embeddings=embed,
        )
        return result.count / (time.perf_counter() - t0)

    # Warm-up: imports, page cache, first-call costs of both paths.
    warm = files[:64]
    scan(source, warm, layers, batch_size=batch_size, num_workers=0)
    scan(
        source,
        warm,
        layers,
        batch_size=batch_size,
        num_workers=0,
        embeddings=True,
        cache=False,
    )
    plain, embed, ratios = [], [], []
    for i in range(pairs):
        got = {}
        for what in (False, True) if i % 2 == 0 else (True, False):
            got[what] = one(what)
        plain.append(got[False])
        embed.append(got[True])
        ratios.append(got[True] / got[False])
    return {
        "model": model,
        "images": len(files),
        "plain_ips": statistics.median(plain),
        "embed_ips": statistics.median(embed),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
    }


def pca_seconds(n: int = 10_000, d: int = 512, repeats: int = 3) -> float:
    """Median seconds of :func:`actviz.atlas.project` (PCA, 2-D) on ``n x d`` float16 vectors."""
    from actviz.data.atlas_map import project

    x = _vectors(n, d)
    project(x[:500])  # first-call costs (LAPACK's workspace)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        project(x, "pca")
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def umap_seconds(n: int = 10_000, d: int = 512) -> dict[str, float]:
    """In this process: import, first and second UMAP fit of ``n x d`` vectors and placing 10
    new ones, in seconds (``*_cpu_s``: this process's CPU seconds, which other programs on a
    busy machine do not inflate)."""
    t0 = time.perf_counter()
    import umap  # noqa: F401  (timed: numba and umap's modules)

    imported = time.perf_counter() - t0
    from actviz.data.atlas_map import project

    x = _vectors(n, d)
    out = {"import_s": imported}

    def timed(name: str, step: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        got = step()
        out[f"{name}_s"] = time.perf_counter() - t0
        out[f"{name}_cpu_s"] = time.process_time() - c0
        return got

    fitted = timed("first", lambda: project(x, "umap", seed=0))
    timed("transform", lambda: fitted.transform(x[:10].astype(np.float32) + 0.01))
    timed("warm", lambda: project(x, "umap", seed=1))
    return out


def umap_fresh_processes(n: int = 10_000, d: int = 512) -> dict[str, dict[str, float]]:
    """:func:`umap_seconds` in two new processes sharing an empty numba cache folder: the
    first compiles what numba caches (what the first use on a machine waits for), the second
    loads it (every later session)."""
    import json
    import subprocess

    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="actviz-numba-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for name in ("cold", "cached"):
            done = subprocess.run(
                [sys.executable, "-m", "actviz.bench.atlas_bench", "umap", str(n), str(d)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            out[name] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def pan_frames(
    points: int = 50_000,
    frames: int = 120,
    size: tuple[int, int] = (1280, 720),
    item: str = "map",
    zoom: bool = False,
) -> tuple[list[float], int]:
    """Seconds per frame of panning a ``points``-point scatter (see the module doc), and how
    many times the item splatted its dots anew (the map's item; 0 for the scatter).

    ``item``: ``"map"``, the Atlas tab's own item (:class:`actviz.ui.atlas.view.RasterDots`:
    one image, moved by a pan); ``"scatter"``, a ``ScatterPlotItem`` with a brush per point
    (a comparison). ``zoom``: each frame zooms in or out by 5% instead (what a wheel does).
    """
    from actviz.bench.ui_bench import delete_widgets, ensure_qt_app

    app = ensure_qt_app()
    import pyqtgraph as pg

    from actviz.data.atlas_image import class_colours
    from actviz.ui.atlas.view import RasterDots

    if item not in ("map", "scatter"):
        raise ValueError(f"item must be 'map' or 'scatter', got {item!r}")
    rng = np.random.default_rng(0)
    labels = np.arange(points) % 10
    centres = rng.normal(0, 5, (10, 2))
    xy = centres[labels] + rng.normal(0, 1, (points, 2))
    widget = pg.PlotWidget()
    widget.resize(*size)
    painted = [0]
    shown: Any
    if item == "map":
        shown = RasterDots()
        shown.set_data(xy, class_colours(10)[labels])
    else:
        brushes = [pg.mkBrush(*(int(v) for v in c)) for c in class_colours(10)]
        shown = pg.ScatterPlotItem(
            x=xy[:, 0], y=xy[:, 1], size=5, pen=None, brush=[brushes[i] for i in labels]
        )
    original = shown.paint

    def counting_paint(*args: Any) -> Any:
        painted[0] += 1
        return original(*args)

    shown.paint = counting_paint  # type: ignore[method-assign]
    widget.addItem(shown)
    widget.show()
    times: list[float] = []
    renders = 0
    try:
        app.processEvents()
        vb = widget.getPlotItem().getViewBox()
        vb.scaleBy((0.6, 0.6))  # zoomed in a little, so a pan brings points in and out
        app.processEvents()
        before = 0
        span = vb.viewRange()[0][1] - vb.viewRange()[0][0]
        step = span / 60
        for i in range(frames + 3):
            # Back and forth, as a drag (or a wheel) would go.
            back = (i // 30) % 2 == 1
            if i == 3:
                before = getattr(shown, "renders", 0)  # the measured frames' splats only
            t0 = time.perf_counter()
            if zoom:
                vb.scaleBy((1.05, 1.05) if back else (1 / 1.05, 1 / 1.05))
            else:
                dx = -step if back else step
                vb.translateBy(x=dx, y=dx / 2)
            app.processEvents()
            dt = time.perf_counter() - t0
            if i >= 3:
                times.append(dt)
        renders = getattr(shown, "renders", 0) - before
    finally:
        delete_widgets(widget)
    if painted[0] < frames // 2:
        raise RuntimeError(f"the scatter painted {painted[0]} times in {frames} frames")
    return times, renders


def _p95(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]


def run(
    quick: bool,
    summary: dict,
    *,
    images: int | None = None,
    pca_shape: tuple[int, int] = (10_000, 512),
    pan_points: int = 50_000,
    frames: int | None = None,
) -> None:
    """The atlas section of ``python -m actviz.bench``: prints a table, fills ``summary``.

    The keyword arguments shrink it (the smoke test): ``images`` per scan folder, the PCA's
    ``(n, d)``, the scatter's points and the pan's frames.
    """
    from actviz.bench.scan_bench import make_folder
    from actviz.data.atlas_map import umap_available

    workers = min(2, os.cpu_count() or 1)
    models: tuple[tuple[str, int, int], ...] = (("demo", 64, 128 if quick else 1000),)
    if not quick:
        models += (("resnet18", 112, 400),)
    if images is not None:
        models = tuple((m, size, images) for m, size, _ in models)
    # Three pairs of a scan that loader processes feed read 0.91 to 1.08 on a quiet machine:
    # seven make the median hold still (0.97 to 1.01).
    pairs = 3 if quick else 7
    tmp = Path(tempfile.mkdtemp(prefix="actviz-atlas-bench-"))
    saved_cache = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    rows = []
    try:
        for name, size, count in models:
            folder = make_folder(tmp / f"images-{name}", count, size)
            # Loader processes only where the scan itself would start them (a few batches).
            w = workers if count > 64 else 0
            rows.append(scan_embed_pairs(name, folder, pairs, None, w, tmp / "cache" / "actviz"))
    finally:
        if saved_cache is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved_cache
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{'atlas: scan with / without embeddings':<44} {'plain/s':>9} {'embed/s':>9} {'ratio':>7}"
    )
    for r in rows:
        pairs_text = ", ".join(f"{v:.3f}" for v in r["ratios"])
        print(
            f"  {r['model']:<10} {r['images']:>5} images{'':<20} {r['plain_ips']:9.1f} "
            f"{r['embed_ips']:9.1f} {r['ratio']:7.3f}  (pairs {pairs_text})"
        )
    summary["scan_embed_ratio"] = min(r["ratio"] for r in rows)

    n, d = pca_shape
    pca = pca_seconds(n, d, repeats=1 if quick else 3)
    print(f"  PCA of {n:,} x {d} float16 vectors: {pca:.3f} s (target <= 1 s)")
    summary["atlas_pca_s"] = pca

    if not umap_available():
        print("  UMAP: umap-learn is not installed (pip install 'actviz[atlas]'): not measured")
        summary["atlas_umap_s"] = None
    elif quick:
        print("  UMAP: not measured with --quick (numba compiles umap's code: minutes)")
        summary["atlas_umap_s"] = None
    else:
        u = umap_fresh_processes()
        cold, cached = u["cold"], u["cached"]
        print(
            f"  UMAP of 10,000 x 512 in a new process: first fit {cached['first_s']:.1f} s "
            f"(CPU {cached['first_cpu_s']:.1f} s; import {cached['import_s']:.1f} s before it), "
            f"second fit {cached['warm_s']:.1f} s, placing 10 new points "
            f"{cached['transform_s']:.2f} s (target <= 60 s)"
        )
        print(
            f"    the first process on a machine (numba compiles, then caches): import "
            f"{cold['import_s']:.1f} s, first fit {cold['first_s']:.1f} s "
            f"(CPU {cold['first_cpu_s']:.1f} s)"
        )
        summary["atlas_umap_s"] = cached["first_s"]
        summary["atlas_umap_cold_s"] = cold["first_s"]
        summary["atlas_umap_warm_s"] = cached["warm_s"]

    n_frames = frames or (40 if quick else 120)
    times, renders = pan_frames(pan_points, n_frames)
    p95 = _p95(times) * 1e3
    print(
        f"  pan the Atlas tab's {pan_points:,}-dot map (1280x720): p50 "
        f"{statistics.median(times) * 1e3:.1f} ms, p95 {p95:.1f} ms, max "
        f"{max(times) * 1e3:.1f} ms per frame, dots splatted {renders} times in {n_frames} "
        "frames (target p95 <= 30 ms)"
    )
    summary["atlas_pan_p95_ms"] = p95
    times, renders = pan_frames(pan_points, n_frames, zoom=True)
    zoom = _p95(times) * 1e3
    print(
        f"  zoom it (5% a frame, every frame splatted: {renders}): p50 "
        f"{statistics.median(times) * 1e3:.1f} ms, p95 {zoom:.1f} ms"
    )
    summary["atlas_zoom_p95_ms"] = zoom
    # For comparison (not the target): a ScatterPlotItem with a brush per point.
    times, _ = pan_frames(pan_points, n_frames, item="scatter")
    scatter = _p95(times) * 1e3
    print(
        f"  (the same pan of a ScatterPlotItem, a brush per point: p50 "
        f"{statistics.median(times) * 1e3:.1f} ms, p95 {scatter:.1f} ms)"
    )
    summary["atlas_pan_scatter_p95_ms"] = scatter


if __name__ == "__main__":  # python -m actviz.bench.atlas_bench umap N D: one UMAP timing
    if len(sys.argv) == 4 and sys.argv[1] == "umap":
        import json

        print(json.dumps(umap_seconds(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        sys.exit("usage: python -m actviz.bench.atlas_bench umap N D")
