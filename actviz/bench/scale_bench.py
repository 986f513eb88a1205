"""Scale: distributed scans (gloo), a million images with bounded memory, offloaded models.

* ``scan_dist_ratio``: images/s of a 2-rank gloo scan (one torch thread each, no loader
  workers: each rank reads its own shard) over a single-process scan with two threads, both in
  fresh processes, timed on rank 0 from a barrier to the merged result; worst of ResNet-18
  (random init, 112 px images) and the demo model. Target >= 0.9.
* ``scan_scale``: synthetic 16x16 images (made in memory by :class:`SyntheticImages`, no files)
  through a tiny conv net (:func:`actviz.bench.tiny_models.tiny_conv`) on 2 ranks, embeddings
  of two layers on disk (``embeddings_dir``), rank 0 saving the scan file beside them
  (:func:`actviz.data.scan_file.save_scan`): each rank's peak RSS at N and at N / 10
  (``scan_scale_rss_ratio``, target <= 1.2), the scan folder's size, then in fresh processes:
  PCA of every point of the widest layer (``scan_scale_pca_s``, target <= 10 s, and the memory
  it takes above the opened scan), the explorer window (offscreen) opening the scan file and
  painting its atlas (``scan_scale_window_s``: from Data > Open a saved scan… to the map
  painted), and, when umap-learn is installed, UMAP of every point as the atlas fits it (on a
  sample, the rest placed by its transform).
  N = 1,000,000; with ``--quick`` N = 20,000 (said in the table).
* ``offload_capture_ratio``: a 5-layer capture (forward only; the layers' outputs and inputs are
  recorded, as by default) / a bare forward, both on the same model (5 convolutions of 32
  channels, 8 images of 64x64) with most of it offloaded to disk by accelerate: the median of
  the ratios of interleaved pairs (order flipped every pair; 41 pairs, 15 with ``--quick``),
  wall time, after warm-up captures that let the record pool settle (core/pool.py: the model's
  captures fault, so its records are kept warm under the heap pin). Target <= 1.1. Beside it:
  the same in CPU time with one thread (``offload_capture_cpu_ratio``, what other tenants of
  a shared machine move least), the extra microseconds per recorded tensor, the same without the inputs, and
  the model whole, which tell the records' part from accelerate's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from actviz.bench.timing import StealMeter
from actviz.bench.tiny_models import conv_stack, tiny_conv

__all__ = ["SyntheticImages", "run"]


class SyntheticImages(Dataset):
    """``n`` deterministic ``(3, size, size)`` float images made on demand (nothing stored but a
    bank of 512): item ``i`` is bank image ``i % 512`` scaled by a factor from ``i``."""

    def __init__(self, n: int, size: int = 16, seed: int = 0) -> None:
        self.n = int(n)
        g = torch.Generator().manual_seed(seed)
        self.bank = torch.rand(512, 3, size, size, generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.bank[i % 512] * (0.5 + ((i * 2654435761) % 1000) / 1000.0)


def _rank(rank: int, world: int, init: str, job: dict, out: str) -> None:
    import torch.distributed as dist

    from actviz.data.scan import scan

    torch.set_num_threads(job["threads"])
    os.environ["XDG_CACHE_HOME"] = job["cache"]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        if job["kind"] == "folder":
            from actviz.bench.scan_bench import _LAYERS, _model

            net, source = _model(job["model"])
            data, layers, extra = job["folder"], _LAYERS[job["model"]], {}
        else:
            source = tiny_conv()
            data, layers = SyntheticImages(job["n"]), ["1", "3"]
            extra = {"embeddings": True, "embeddings_dir": job["rows"]}
        dist.barrier()
        t0 = time.perf_counter()
        result = scan(
            source, data, layers, batch_size=job["batch"], num_workers=0, cache=False, **extra
        )
        elapsed = time.perf_counter() - t0
        saved = 0.0
        if rank == 0 and job["kind"] == "synthetic":
            # The scan file the window opens: top-k arrays and statistics beside the rows.
            from actviz.data.scan_file import save_scan

            t0 = time.perf_counter()
            save_scan(result, job["rows"])
            saved = time.perf_counter() - t0
        peak = _peak()
        with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
            json.dump({"s": elapsed, "count": result.count, "peak": peak, "save_s": saved}, fh)
    finally:
        dist.destroy_process_group()


def _launch(world: int, job: dict, tmp: Path) -> list[dict]:
    import torch.multiprocessing as mp

    out = Path(tempfile.mkdtemp(dir=tmp))
    init = f"file://{out / 'rdv'}"
    mp.start_processes(
        _rank, args=(world, init, job, str(out)), nprocs=world, join=True, start_method="spawn"
    )
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def dist_ratio(quick: bool, tmp: Path) -> dict[str, Any]:
    from actviz.bench.scan_bench import make_folder

    images = 128 if quick else 512
    folder = make_folder(tmp / "images", images, 112)
    rows = {}
    for model in ("resnet18", "demo"):
        job = {"kind": "folder", "model": model, "folder": str(folder), "batch": 16}
        job["cache"] = str(tmp / "cache")
        single = _launch(1, dict(job, threads=2), tmp)[0]
        dist2 = _launch(2, dict(job, threads=1), tmp)[0]
        one, two = images / single["s"], images / dist2["s"]
        rows[model] = (one, two, two / one)
    return rows


def _rss() -> int:
    """This process's resident bytes now (``/proc/self/statm``)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak() -> int:
    """This process's peak resident bytes: ``VmHWM``, the high-water mark of its own memory
    since it started (``ru_maxrss`` is not: on Linux a child started by fork and exec keeps
    the parent's figure at the fork when that was higher, so every rank and child of this
    benchmark would read the benchmark's own peak)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(mode: str, folder: Path, timeout: float = 600) -> dict:
    """Run :func:`_main` ``mode`` on ``folder`` in a fresh process (its own peak RSS, and the
    window's Qt set-up kept out of the benchmark's process); its JSON line."""
    import subprocess
    import sys

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", ACTVIZ_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "actviz.bench.scale_bench", mode, str(folder)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scale_bench {mode} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _pca_child(folder: Path) -> dict:
    """PCA of every point of the scan's widest embedding layer, as the atlas fits it: its
    seconds and the memory it took above the process's resident size before."""
    from actviz.data.atlas_map import project
    from actviz.data.scan_file import open_scan

    scan = open_scan(folder)
    layer = max(scan.embedding_layers, key=lambda name: scan.pooled[name].shape[1])
    vectors = scan.pooled[layer]
    before = _rss()
    t0 = time.perf_counter()
    proj = project(vectors, "pca")
    seconds = time.perf_counter() - t0
    return {
        "layer": layer,
        "points": len(proj.coords),
        "dim": int(vectors.shape[1]),
        "s": seconds,
        "rss_before": before,
        "peak": _peak(),
    }


def _umap_child(folder: Path) -> dict:
    """UMAP of every point as the atlas fits it (over
    :data:`~actviz.data.atlas_map.UMAP_FIT_MAX` points: fitted on a sample, the rest
    placed by its ``transform``; needs umap-learn)."""
    from actviz.data.atlas_map import project
    from actviz.data.scan_file import open_scan

    scan = open_scan(folder)
    layer = max(scan.embedding_layers, key=lambda name: scan.pooled[name].shape[1])
    t0 = time.perf_counter()
    proj = project(scan.pooled[layer], "umap")
    return {"s": time.perf_counter() - t0, "fitted_on": proj.fitted_on, "peak": _peak()}


def _window_child(folder: Path) -> dict:
    """Open the saved scan in the explorer window (Data > Open a saved scan…, the Atlas tab
    shown): seconds from choosing the folder to the atlas painted."""
    from actviz.bench.ui_bench import (
        delete_widgets,
        ensure_qt_app,
        scratch_dir,
        scratch_settings,
        wait_until,
    )
    from actviz.ui.window.main_window import MainWindow

    started = time.perf_counter()
    app = ensure_qt_app()
    window = MainWindow(settings=scratch_settings(), auto_run=False)
    window.resize(1280, 800)
    window.show()
    feature = window.features["atlas"]
    window.host.show_tab(feature.view)
    app.processEvents()
    started = time.perf_counter() - started
    wait_until(lambda: False, 0.3)  # the window's first layout and paint, before the clock
    before = _rss()
    t0 = time.perf_counter()
    # Data > Open a saved scan… with the folder chosen.
    if not window.features["dataset"].open_saved_scan(str(folder)):
        raise RuntimeError(f"the window did not open the scan in {folder}")
    opened = time.perf_counter() - t0
    scan = window.session.scan
    built = wait_until(
        lambda: feature.atlas is not None and feature.atlas.scan is scan, timeout_s=300
    )
    fitted = time.perf_counter() - t0
    app.processEvents()
    image = feature.view.grab()  # the map painted (its raster of every point)
    drawn = time.perf_counter() - t0
    out = {
        "window_s": started,
        "open_s": opened,
        "fit_s": fitted,
        "drawn_s": drawn,
        "built": bool(built),
        "points": 0 if feature.atlas is None else len(feature.atlas.coords),
        "painted": not image.isNull(),
        "rss_before": before,
        "peak": _peak(),
    }
    # A folder without a scan is refused with a message, and the scan shown stays.
    empty = Path(scratch_dir()) / "no-scan"
    empty.mkdir(exist_ok=True)
    out["refused"] = not window.features["dataset"].open_saved_scan(str(empty))
    out["kept"] = window.session.scan is scan
    delete_widgets(window)
    return out


def scale(quick: bool, tmp: Path) -> dict[str, Any]:
    """``scan_scale``: the synthetic scan at N / 10 and N images on 2 ranks, then its scan
    file opened in fresh processes (PCA alone; the window's atlas; UMAP on a sample)."""
    from actviz.data.atlas_map import umap_available

    big = 20_000 if quick else 1_000_000
    out: dict[str, Any] = {"n": big}
    for n in (big // 10, big):
        rows = tmp / f"rows{n}"
        job = {"kind": "synthetic", "n": n, "batch": 256, "threads": 1, "rows": str(rows)}
        job["cache"] = str(tmp / "cache")
        ranks = _launch(2, job, tmp)
        out[n] = {"peak": [r["peak"] for r in ranks], "s": ranks[0]["s"]}
        out[n]["save_s"] = ranks[0]["save_s"]
        if n != big:
            shutil.rmtree(rows, ignore_errors=True)
    folder = tmp / f"rows{big}"
    out["bytes"] = sum(p.stat().st_size for p in folder.iterdir())
    out["scan_bytes"] = sum(
        p.stat().st_size for p in folder.iterdir() if p.name in ("scan.json", "scan.npz")
    )
    out["pca"] = _child("pca", folder)
    out["window"] = _child("window", folder)
    out["umap"] = _child("umap", folder) if umap_available() else None
    return out


def offload_ratio(quick: bool, tmp: Path) -> dict[str, Any]:
    """``offload_capture_ratio`` and, interleaved with it in this process, what explains it:
    the same capture without the layers' inputs, and the same model whole (not placed)."""
    import actviz
    from actviz.bench.timing import paired
    from actviz.core import pool

    net = conv_stack()
    size = sum(p.numel() * 4 for p in net.parameters())
    big = actviz.load_model(
        net, device_map="auto", max_memory={"cpu": size // 3}, offload_folder=tmp / "off"
    )
    whole = conv_stack()
    x = torch.rand(8, 3, 64, 64)
    layers = [str(i) for i in range(0, 10, 2)]
    pairs = 15 if quick else 41
    out: dict[str, Any] = {"placed": dict(big.hf_device_map)}
    threads = torch.get_num_threads()
    with torch.no_grad():
        for key, model, keep, clock in (
            ("offloaded", big, True, None),
            ("offloaded_cpu", big, True, time.process_time),
            ("offloaded_no_inputs", big, False, None),
            ("whole", whole, True, None),
        ):
            # CPU time with one thread: what another thread's waits (spinning on a busy
            # machine) leave out.
            torch.set_num_threads(1 if clock else threads)
            out[key] = paired(
                key,
                lambda m=model: m(x),
                lambda m=model, k=keep: actviz.capture(
                    m, x, layers, gradients=False, keep_inputs=k
                ),
                pairs=pairs,
                # The record pool settles after a few captures (core/pool.py).
                warmup=6,
                clock=clock,
            )
        torch.set_num_threads(threads)
        cap = actviz.capture(big, x, layers, gradients=False)
        out["record_bytes"] = cap.nbytes
        out["tensors"] = sum(1 + len(r.inputs) for n in layers for r in cap.calls(n))
        out["records"] = (
            "copies" if pool.wanted(big) else "pinned" if pool.pinned(big) else "references"
        )
    return out


def run(quick: bool, summary: dict) -> None:
    """Print the scale table and put its figures in ``summary``."""
    tmp = Path(tempfile.mkdtemp(prefix="actviz-scale-bench-"))
    try:
        steal = StealMeter()
        if importlib.util.find_spec("accelerate") is None:  # an extra: the rest still runs
            print("offload_capture_ratio: skipped (needs accelerate: pip install 'actviz[big]')")
        else:
            off = offload_ratio(quick, tmp)
            report_offload(off, steal.fraction(), summary)
        rows = dist_ratio(quick, tmp)
        for model, (one, two, r) in rows.items():
            print(
                f"scan_dist {model:9s} 1 proc x 2 threads {one:7.1f} img/s | "
                f"2 ranks x 1 thread {two:7.1f} img/s | ratio {r:.3f}"
            )
        summary["scan_dist_ratio"] = min(r for _, _, r in rows.values())
        s = scale(quick, tmp)
        report_scale(s, quick, summary)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report_offload(off: dict[str, Any], share: float | None, summary: dict) -> None:
    """Print ``offload_capture_ratio``'s lines (``share``: the steal share meanwhile) and put
    its figures in ``summary``."""
    placed = off["placed"]
    disk = sum(v == "disk" for v in placed.values())
    o, c, n, w = (off[k] for k in ("offloaded", "offloaded_cpu", "offloaded_no_inputs", "whole"))
    print(
        f"offload_capture_ratio {o.ratio:.3f} (5 layers and their inputs, "
        f"{off['record_bytes'] / 2**20:.0f} MiB of records ({off['records']}); "
        f"{disk}/{len(placed)} modules on disk; bare {o.base_ms:.2f} ms, capture "
        f"{o.test_ms:.2f} ms, +{o.diff_ms * 1e3 / off['tensors']:.0f} us per recorded "
        f"tensor, {o.pairs} interleaved pairs, {torch.get_num_threads()} threads, wall)"
    )
    steal_text = "unknown" if share is None else f"{share:.1%}"
    print(
        f"  in CPU time, 1 thread: {c.ratio:.3f} (bare {c.base_ms:.2f} ms, capture "
        f"{c.test_ms:.2f} ms, +{c.diff_ms * 1e3 / off['tensors']:.0f} us per recorded tensor);"
        f" steal {steal_text} of the machine's time meanwhile"
    )
    print(
        f"  same, outputs only (keep_inputs=False): {n.ratio:.3f}; the same model whole "
        f"(not placed): {w.ratio:.3f} (bare {w.base_ms:.2f} ms, capture {w.test_ms:.2f} ms)"
    )
    summary["offload_capture_ratio"] = o.ratio
    summary["offload_capture_cpu_ratio"] = c.ratio
    summary["offload_capture_outputs_ratio"] = n.ratio
    summary["offload_whole_capture_ratio"] = w.ratio


def report_scale(s: dict[str, Any], quick: bool, summary: dict) -> None:
    """Print ``scan_scale``'s lines and put its figures in ``summary``."""
    n = s["n"]
    small, large = s[n // 10], s[n]
    rss = max(b / a for a, b in zip(small["peak"], large["peak"], strict=True))
    note = " (--quick: not the million)" if quick else ""
    mib = 2**20
    pca, win = s["pca"], s["window"]
    print(
        f"scan_scale {n} images{note}, 2 ranks: peak RSS per rank "
        f"{[round(p / mib) for p in large['peak']]} MiB vs "
        f"{[round(p / mib) for p in small['peak']]} MiB at {n // 10} (ratio {rss:.3f}); "
        f"scan {large['s']:.1f} s; scan file saved in {large['save_s']:.2f} s"
    )
    print(
        f"  scan folder {s['bytes'] / mib:.1f} MiB (rows {(s['bytes'] - s['scan_bytes']) / mib:.1f}"
        f" MiB float16, scan.json + scan.npz {s['scan_bytes'] / mib:.2f} MiB)"
    )
    print(
        f"  PCA of all {pca['points']} points x {pca['dim']} (layer {pca['layer']}) "
        f"{pca['s']:.2f} s, peak RSS {pca['peak'] / mib:.0f} MiB "
        f"({(pca['peak'] - pca['rss_before']) / mib:.0f} MiB above the opened scan)"
    )
    print(
        f"  window (Data > Open a saved scan…): scan shown {win['open_s']:.2f} s, atlas of {win['points']} points "
        f"fitted {win['fit_s']:.2f} s, painted {win['drawn_s']:.2f} s after the open began "
        f"(peak RSS {win['peak'] / mib:.0f} MiB, {(win['peak'] - win['rss_before']) / mib:.0f}"
        f" MiB above the idle window; the window itself took {win['window_s']:.1f} s to start)"
    )
    umap = s.get("umap")
    if umap is None:
        print("  UMAP on a sample: umap-learn is not installed: not measured")
    else:
        fitted = umap["fitted_on"] or n
        print(f"  UMAP of {n} points (fitted on {fitted}, the rest placed) {umap['s']:.1f} s")
    summary.update(
        scan_scale_images=n,
        scan_scale_rss_ratio=rss,
        scan_scale_bytes=s["bytes"],
        scan_scale_open_s=win["open_s"],
        scan_scale_window_s=win["drawn_s"],
        scan_scale_pca_s=pca["s"],
        scan_scale_pca_mib=(pca["peak"] - pca["rss_before"]) / mib,
        scan_scale_s=large["s"],
        scan_scale_umap_s=None if umap is None else umap["s"],
    )


def _main(argv: list[str]) -> int:
    """``python -m actviz.bench.scale_bench pca|window|umap FOLDER``: one JSON line."""
    modes = {"pca": _pca_child, "window": _window_child, "umap": _umap_child}
    if len(argv) != 2 or argv[0] not in modes:
        print("usage: python -m actviz.bench.scale_bench pca|window|umap FOLDER")
        return 2
    print(json.dumps(modes[argv[0]](Path(argv[1]))))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
