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
  installed; the process's first fit, which includes numba compiling umap's code (what a
  user waits for the first time), and a second, warm fit are both printed. Not run with
  ``--quick`` (the compile alone takes minutes on two busy cores).
* ``atlas_pan_p95_ms``: a 50,000-point pyqtgraph ``ScatterPlotItem`` (10 classes, one brush
  each, as an atlas colours classes) in a 1280 x 720 ``PlotWidget``, offscreen: each frame
  moves the view by a step (``ViewBox.translateBy``, what a drag does) and runs the event
  loop once, which paints the scene; the 95th percentile of the frame times (target <= 30 ms).
  ``atlas_pan_raster_p95_ms`` is the same pan with the points painted as one image a frame
  (:func:`actviz.data.atlas_image.splat_dots`), a comparison for the window's choice.
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

__all__ = ["pan_frames", "pca_seconds", "run", "scan_embed_pairs", "umap_seconds"]

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
    from actviz.io.models import open_model

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
    from actviz.data.atlas import project

    x = _vectors(n, d)
    project(x[:500])  # first-call costs (LAPACK's workspace)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        project(x, "pca")
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def umap_seconds(n: int = 10_000, d: int = 512) -> dict[str, float]:
    """Import, first (compiling) and second UMAP fit of ``n x d`` vectors, in seconds."""
    t0 = time.perf_counter()
    import umap  # noqa: F401  (timed: numba and umap's modules)

    imported = time.perf_counter() - t0
    from actviz.data.atlas import project

    x = _vectors(n, d)
    t0 = time.perf_counter()
    first = project(x, "umap", seed=0)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    first.transform(x[:10].astype(np.float32) + 0.01)
    transform_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    project(x, "umap", seed=1)
    warm_s = time.perf_counter() - t0
    return {"import_s": imported, "first_s": first_s, "warm_s": warm_s, "transform_s": transform_s}


def pan_frames(
    points: int = 50_000,
    frames: int = 120,
    size: tuple[int, int] = (1280, 720),
    raster: bool = False,
) -> list[float]:
    """Seconds per frame of panning a ``points``-point scatter (see the module doc).

    ``raster``: instead of a ``ScatterPlotItem``, one item that paints every frame as a single
    image drawn by :func:`actviz.data.atlas_image.splat_dots` (a comparison, not the target).
    """
    from actviz.bench.ui_bench import ensure_qt_app

    app = ensure_qt_app()
    import pyqtgraph as pg

    from actviz.data.atlas_image import class_colours

    rng = np.random.default_rng(0)
    labels = np.arange(points) % 10
    centres = rng.normal(0, 5, (10, 2))
    xy = centres[labels] + rng.normal(0, 1, (points, 2))
    widget = pg.PlotWidget()
    widget.resize(*size)
    painted = [0]
    if raster:
        item = _raster_item(xy, class_colours(10)[labels], painted)
    else:
        brushes = [pg.mkBrush(*(int(v) for v in c)) for c in class_colours(10)]
        item = pg.ScatterPlotItem(
            x=xy[:, 0], y=xy[:, 1], size=5, pen=None, brush=[brushes[i] for i in labels]
        )
        original = item.paint

        def counting_paint(*args: Any) -> Any:
            painted[0] += 1
            return original(*args)

        item.paint = counting_paint  # type: ignore[method-assign]
    widget.addItem(item)
    widget.show()
    times: list[float] = []
    try:
        app.processEvents()
        vb = widget.getPlotItem().getViewBox()
        vb.scaleBy((0.6, 0.6))  # zoomed in a little, so a pan brings points in and out
        app.processEvents()
        span = vb.viewRange()[0][1] - vb.viewRange()[0][0]
        step = span / 60
        for i in range(frames + 3):
            # Back and forth, as a drag would go.
            dx = step if (i // 30) % 2 == 0 else -step
            t0 = time.perf_counter()
            vb.translateBy(x=dx, y=dx / 2)
            app.processEvents()
            dt = time.perf_counter() - t0
            if i >= 3:
                times.append(dt)
    finally:
        widget.close()
        widget.deleteLater()
        app.processEvents()
    if painted[0] < frames // 2:
        raise RuntimeError(f"the scatter painted {painted[0]} times in {frames} frames")
    return times


def _raster_item(xy: np.ndarray, rgb: np.ndarray, painted: list[int]) -> Any:
    """A pyqtgraph item that paints its points as one image, splatted in numpy each frame."""
    import pyqtgraph as pg
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QImage

    from actviz.data.atlas_image import splat_dots

    bgr = np.ascontiguousarray(rgb[:, ::-1]) if sys.byteorder == "little" else rgb

    class RasterDots(pg.GraphicsObject):
        def __init__(self) -> None:
            super().__init__()
            lo, hi = xy.min(axis=0), xy.max(axis=0)
            self._rect = QRectF(lo[0], lo[1], hi[0] - lo[0], hi[1] - lo[1])
            self._buffer: np.ndarray | None = None

        def boundingRect(self) -> QRectF:
            return self._rect

        def paint(self, painter: Any, *_args: Any) -> None:
            painted[0] += 1
            t = painter.transform()  # data -> device pixels
            w, h = painter.device().width(), painter.device().height()
            if self._buffer is None or self._buffer.shape[:2] != (h, w):
                self._buffer = np.zeros((h, w, 4), dtype=np.uint8)
            buf = self._buffer
            buf[:] = 0
            x = xy[:, 0] * t.m11() + xy[:, 1] * t.m21() + t.dx()
            y = xy[:, 0] * t.m12() + xy[:, 1] * t.m22() + t.dy()
            splat_dots(x, y, bgr, w, h, 5, out=buf)
            # Qt's native premultiplied ARGB (BGRA bytes here; alpha 0 or 255, so the same
            # premultiplied or not): drawn without a conversion of the whole image.
            image = QImage(buf.data, w, h, w * 4, QImage.Format.Format_ARGB32_Premultiplied)
            painter.save()
            painter.resetTransform()
            painter.drawImage(0, 0, image)
            painter.restore()

    return RasterDots()


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
    from actviz.data.atlas import umap_available

    workers = min(2, os.cpu_count() or 1)
    models: tuple[tuple[str, int, int], ...] = (("demo", 64, 128 if quick else 1000),)
    if not quick:
        models += (("resnet18", 112, 400),)
    if images is not None:
        models = tuple((m, size, images) for m, size, _ in models)
    pairs = 3
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
        u = umap_seconds()
        print(
            f"  UMAP of 10,000 x 512: first fit {u['first_s']:.1f} s (numba compiling included; "
            f"import {u['import_s']:.1f} s before it), warm fit {u['warm_s']:.1f} s, placing 10 "
            f"new points {u['transform_s']:.2f} s (target <= 60 s)"
        )
        summary["atlas_umap_s"] = u["first_s"]
        summary["atlas_umap_warm_s"] = u["warm_s"]

    times = pan_frames(pan_points, frames or (40 if quick else 120))
    p95 = _p95(times) * 1e3
    print(
        f"  pan a {pan_points:,}-point scatter (1280x720): p50 {statistics.median(times) * 1e3:.1f} ms, "
        f"p95 {p95:.1f} ms, max {max(times) * 1e3:.1f} ms per frame (target p95 <= 30 ms)"
    )
    summary["atlas_pan_p95_ms"] = p95
    # For comparison (not the target): the same points painted as one image a frame.
    times = pan_frames(pan_points, frames or (40 if quick else 120), raster=True)
    raster = _p95(times) * 1e3
    print(
        f"  (the same points as one numpy-splatted image a frame: p50 "
        f"{statistics.median(times) * 1e3:.1f} ms, p95 {raster:.1f} ms)"
    )
    summary["atlas_pan_raster_p95_ms"] = raster
