"""Dataset scan: images/s of ``actviz.scan`` against a bare forward loop, and its extra memory.

The benchmark writes a synthetic folder of small JPEG images into a temporary directory
(removed after). For each model, pairs of runs alternate: a bare ``torch.no_grad()`` forward
loop over the very DataLoader a scan uses (same dataset, preprocessing, batch size, workers,
collate) and ``actviz.scan`` with its cache on (in a scratch cache folder, emptied before each
scan so that every scan runs in full), in an order that flips every pair.
``scan_throughput_ratio`` is the median of the per-pair ratios of images/s (target >= 0.90),
the worst over the models.

The bare loop runs at torch's default thread count, as a user's loop would. The scan chooses
its own (it tries fewer threads when its loader workers and torch's threads oversubscribe the
cores, see :mod:`actviz.core.threads`); when it ends on another count, each pair also runs the
bare loop at that count, and ``scan_overhead_ratio`` (same median, worst over the models) is
the scan against that like-for-like loop: what the scan's own work (hooks, reductions, merges,
cache writes, trial batches) costs.

Memory, measured after the throughput pairs (and the window's lag): glibc's allocator is first
set to hand freed blocks back to the OS at once (``mallopt``: fixed mmap and trim thresholds).
With its default, which keeps freed memory cached and moves its thresholds as it goes, the peak
of identical runs moved between -13 and +10 MiB (two batches of images either way), far more
than the 20 KiB the demo's target allows; pinned, the same runs agree within 0.1 MiB. The
setting slows allocation (why throughput is measured first). Then, on the first
:data:`MEMORY_BATCHES` batches of the folder, after one warm-up of each: pairs of the
like-for-like bare loop (at the thread count the scan ended on, opening its data inside the
pass as the scan does) and a scan, each pass's peak
resident set (``VmHWM``, reset through ``/proc/self/clear_refs``) above the resident set it
started from (after a full garbage collection); the growth is the median of the per-pair
differences (scan's rise - bare loop's rise), reported against the model's own footprint (its parameter and buffer
bytes; target <= 10 %). Where the peak cannot be reset, RSS sampled once per batch stands in;
where ``mallopt`` is missing (not glibc), the allocator is left as it is (the row says which).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader

from actviz.core.threads import torch_threads

__all__ = ["MEMORY_BATCHES", "ScanBenchRow", "make_folder", "print_table", "run"]

#: Batches of the folder the memory passes read (the growth does not depend on how many: no
#: per-image state is kept).
MEMORY_BATCHES = 20
#: Bytes above which glibc serves a block by ``mmap`` (returned at ``free``) and the heap top
#: it trims, in the memory passes.
_PINNED_THRESHOLD = 128 << 10

_LAYERS = {
    "demo": ["features.block1", "features.block2", "features.block3", "features.block4", "fc"],
    "resnet18": ["layer1", "layer2", "layer3", "layer4", "fc"],
}


@dataclass
class ScanBenchRow:
    model: str
    size: int
    batch_size: int
    workers: int
    images: int
    bare_ips: list[float] = field(default_factory=list)
    scan_ips: list[float] = field(default_factory=list)
    #: the bare loop at the scan's thread count (== bare_ips where the scan kept the default)
    same_ips: list[float] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    ratio: float = float("nan")
    overhead: float = float("nan")
    footprint: int = 0
    #: per memory pair: the scan's peak above its start - the bare loop's
    growths: list[int] = field(default_factory=list)
    peak_method: str = ""

    @property
    def rss_growth(self) -> int:
        return int(statistics.median(self.growths)) if self.growths else 0

    @property
    def rss_growth_frac(self) -> float:
        return self.rss_growth / self.footprint if self.footprint else float("nan")

    def row(self) -> str:
        return (
            f"  {self.model:<9} {self.size:>4}px batch {self.batch_size:>3} "
            f"workers {self.workers}  bare {statistics.median(self.bare_ips):7.1f}/s  "
            f"scan {statistics.median(self.scan_ips):7.1f}/s  ratio {self.ratio:6.3f}  "
            f"(scan threads {'/'.join(str(t) for t in sorted(set(self.threads)))}; bare at "
            f"those {statistics.median(self.same_ips):7.1f}/s, ratio {self.overhead:6.3f})  "
            f"RSS growth {self.rss_growth / 2**20:+6.1f} MiB "
            f"({self.rss_growth_frac:+.1%} of the model's {self.footprint / 2**20:.2f} MiB; "
            f"pairs {', '.join(f'{g / 2**10:+.0f}' for g in self.growths)} KiB)"
        )


def make_folder(root: Path, count: int, size: int, seed: int = 0) -> Path:
    """``count`` ``size`` x ``size`` JPEGs (smooth colour fields with noise) in 10 class folders."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for i in range(count):
        folder = root / f"class{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        a, b, c = rng.random(3, dtype=np.float32)
        base = np.stack([a * xx + (1 - a) * yy, b * yy, c * (1 - xx)], axis=-1) * 255
        noise = rng.normal(0, 20, (size, size, 3)).astype(np.float32)
        pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:05d}.jpg", quality=90)
    return root


def _hwm_reset() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _status_kib(key: str) -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _pin_allocator() -> bool:
    """Make glibc return freed blocks to the OS at once (process-wide, for good): the peak
    resident set then follows what is alive. False where ``mallopt`` is missing."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    return bool(
        mallopt(m_mmap_threshold, _PINNED_THRESHOLD)
        and mallopt(m_trim_threshold, _PINNED_THRESHOLD)
    )


class _Peak:
    """Peak RSS of a block: VmHWM after a reset, else the largest RSS seen by ``sample()``.

    ``start`` is the RSS when the block began, after a full garbage collection (what the
    previous pass left in reference cycles, the scan's result among it, is freed first).
    """

    def __init__(self) -> None:
        gc.collect()
        self.hwm = _hwm_reset()
        self.peak = self.start = _status_kib("VmRSS")

    def sample(self) -> None:
        if not self.hwm:
            self.peak = max(self.peak, _status_kib("VmRSS"))

    def result(self) -> int:
        return _status_kib("VmHWM") if self.hwm else max(self.peak, _status_kib("VmRSS"))


def _bare(net: nn.Module, loader: DataLoader, on_batch: Callable[[], None] | None = None) -> float:
    """Images/s of a plain no_grad forward loop over ``loader``."""
    n = 0
    start = time.perf_counter()
    with torch.no_grad():
        for _indices, batch, _bad in loader:
            if batch is not None:
                net(batch)
                n += len(batch)
            if on_batch is not None:
                on_batch()
    return n / (time.perf_counter() - start)


def _model(name: str) -> tuple[nn.Module, Any]:
    from actviz.io.models.loading import open_model

    if name == "demo":
        loaded = open_model("demo")
        return loaded.model, loaded
    import torchvision

    net = getattr(torchvision.models, name)(weights=None).eval()
    return net, net  # a bare module: images are fed at their own size (the folder's)


def run(
    models: Sequence[str] = ("demo", "resnet18"),
    images: int = 2000,
    size: int = 112,
    batch_size: int = 32,
    pairs: int = 3,
    workers: int | None = None,
    window: bool = False,
) -> dict[str, Any]:
    """Measure scan throughput against a bare loop, and the scan's extra peak memory;
    ``window``: also the GUI timer lag while the window scans the folder (:func:`window_lag`)."""
    from actviz.data.sources import resolve_model

    workers = min(2, os.cpu_count() or 1) if workers is None else workers
    tmp = Path(tempfile.mkdtemp(prefix="actviz-scan-bench-"))
    saved_cache = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    rows: list[ScanBenchRow] = []
    models_run: list[tuple[ScanBenchRow, nn.Module, Any, Any, list[str]]] = []
    cache_root = tmp / "cache"
    try:
        folder = make_folder(tmp / "images", images, size)
        for name in models:
            net, source = _model(name)
            spec = resolve_model(source)
            layers = _LAYERS.get(name) or [n for n, _ in net.named_children()][-1:]
            footprint = sum(t.numel() * t.element_size() for t in net.state_dict().values())
            row = ScanBenchRow(name, size, batch_size, workers, images, footprint=footprint)
            _throughput(row, net, source, spec, folder, layers, pairs, cache_root)
            rows.append(row)
            models_run.append((row, net, source, spec, layers))
        lag = window_lag(folder, batch_size) if window else {}
        # Last: pinning the allocator slows allocation for the rest of the process.
        pinned = _pin_allocator()
        subset = sorted(folder.rglob("*.jpg"))[: MEMORY_BATCHES * batch_size]
        for row, net, source, spec, layers in models_run:
            _memory(row, net, source, spec, subset, layers, pairs, cache_root, pinned)
    finally:
        if saved_cache is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved_cache
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "rows": rows,
        "scan_throughput_ratio": min(r.ratio for r in rows),
        "scan_overhead_ratio": min(r.overhead for r in rows),
        "scan_rss_growth_frac": max(r.rss_growth_frac for r in rows),
        "scan_rss_growth_mib": max(r.rss_growth for r in rows) / 2**20,
        "window_lag": lag,
    }


def _loader(data: Any, batch_size: int, workers: int) -> DataLoader:
    from actviz.data.sources import collate

    return DataLoader(
        data.dataset, batch_size=batch_size, shuffle=False, num_workers=workers, collate_fn=collate
    )


def _scan_pass(
    source: Any, data: Any, layers: list[str], row: ScanBenchRow, cache_root: Path, peak: Any
) -> tuple[float, int]:
    """One full scan (its cache emptied first): images/s and the thread count it ended on."""
    from actviz.data.scan import scan

    shutil.rmtree(cache_root, ignore_errors=True)
    t0 = time.perf_counter()
    result = scan(
        source,
        data,
        layers,
        k=9,
        batch_size=row.batch_size,
        num_workers=row.workers,
        progress=None if peak is None else (lambda *_: peak.sample()),
    )
    return result.count / (time.perf_counter() - t0), int(result.threads or 0)


def _throughput(
    row: ScanBenchRow,
    net: nn.Module,
    source: Any,
    spec: Any,
    folder: Path,
    layers: list[str],
    pairs: int,
    cache_root: Path,
) -> None:
    """Pairs of bare loop and scan over the whole folder (and the bare loop at the scan's
    thread count where it chose another): the row's images/s and ratios."""
    from actviz.data.scan import scan
    from actviz.data.sources import open_data

    loader = _loader(open_data(folder, spec), row.batch_size, row.workers)
    _bare(net, loader)  # warm-up: page cache, allocator, first-call costs
    # The same for the scan: its first call imports the scan's modules (cache, sheets).
    warm = sorted(folder.rglob("*.jpg"))[: 2 * row.batch_size]
    scan(source, warm, layers, k=9, batch_size=row.batch_size, num_workers=0)
    ratios, overheads = [], []
    default_threads = torch.get_num_threads()
    for i in range(pairs):
        got: dict[str, float] = {}
        threads = 0
        # The order flips every pair, so a drift of the machine's speed during the run does
        # not favour either side.
        for what in ("bare", "scan") if i % 2 == 0 else ("scan", "bare"):
            if what == "bare":
                got[what] = _bare(net, loader)
            else:
                got[what], threads = _scan_pass(source, folder, layers, row, cache_root, None)
                row.threads.append(threads)
        got["same"] = got["bare"]
        if threads and threads != default_threads:
            with torch_threads(threads):
                got["same"] = _bare(net, loader)
        row.bare_ips.append(got["bare"])
        row.scan_ips.append(got["scan"])
        row.same_ips.append(got["same"])
        ratios.append(got["scan"] / got["bare"])
        overheads.append(got["scan"] / got["same"])
    row.ratio = statistics.median(ratios)
    row.overhead = statistics.median(overheads)


def _memory(
    row: ScanBenchRow,
    net: nn.Module,
    source: Any,
    spec: Any,
    files: list[Path],
    layers: list[str],
    pairs: int,
    cache_root: Path,
    pinned: bool,
) -> None:
    """Pairs of like-for-like bare loop and scan over ``files``, each pass's peak resident
    set: the row's growths (after one warm-up of each, so one-off imports and buffers sized
    on first use are not counted)."""
    from actviz.data.sources import open_data

    paths = [str(p) for p in files]
    # Like for like: torch's buffers differ with the thread count, so the bare loop runs at
    # the count the scan ended on (the throughput scans' most common at first).
    threads = (statistics.mode(row.threads) if row.threads else 0) or torch.get_num_threads()

    def bare_pass(peak: _Peak | None) -> None:
        # The bare loop opens its data inside the measured pass, as the scan does: both hold
        # a list of the files (and the scan their size/time signatures) from then on. Opened
        # before the pass, the scan alone was charged for it (about 150 bytes an image, 95 KB
        # here), which made the demo's pairs two-valued: 0-16 or 80-100 KiB.
        loader = _loader(open_data(paths, spec), row.batch_size, row.workers)
        with torch_threads(threads):
            _bare(net, loader, None if peak is None else peak.sample)

    bare_pass(None)
    _scan_pass(source, paths, layers, row, cache_root, None)
    for i in range(pairs):
        peaks: dict[str, int] = {}
        for what in ("bare", "scan") if i % 2 == 0 else ("scan", "bare"):
            peak = _Peak()
            if what == "bare":
                bare_pass(peak)
            else:
                threads = _scan_pass(source, paths, layers, row, cache_root, peak)[1] or threads
            peaks[what] = peak.result() - peak.start
            row.peak_method = ("VmHWM" if peak.hwm else "RSS per batch") + (
                ", allocator pinned" if pinned else ", allocator as it is"
            )
        row.growths.append(peaks["scan"] - peaks["bare"])


def window_lag(
    folder: Path, batch_size: int = 32, timeout_s: float = 600.0
) -> dict[str, dict[str, float]]:
    """GUI timer lag while the window scans ``folder`` with the demo model (all its blocks and
    ``fc``): once with the window idle, once beside live mode on the demo (the case where the
    scan competes with the window's own work for the cores). Each scan starts afresh (its
    cache folder, under the benchmark's scratch ``XDG_CACHE_HOME``, is emptied); a scan
    taking over ``timeout_s`` raises ``TimeoutError``."""
    from actviz.bench.ui_bench import (
        LagProbe,
        delete_widgets,
        ensure_qt_app,
        scratch_settings,
        wait_until,
    )
    from actviz.ui.dataset.dialog import ScanSpec
    from actviz.ui.live.frames import TensorFrames
    from actviz.ui.window.main_window import MainWindow

    ensure_qt_app()
    w = MainWindow(settings=scratch_settings(), auto_run=False)
    live = None
    out: dict[str, dict[str, float]] = {}
    try:
        w.resize(1280, 720)
        w.show()
        if not w.files.open_model_source("demo", wait=True):
            raise RuntimeError("the demo model did not open")
        done: list[Any] = []
        failed: list[str] = []
        scans = w.features["dataset"].scans
        scans.scan_finished.connect(done.append)
        scans.scan_failed.connect(failed.append)  # said at once, not after the wait
        spec = ScanSpec(str(folder), tuple(_LAYERS["demo"]), k=9, batch_size=batch_size)
        for case in ("idle", "beside live"):
            if case == "beside live":
                live = w.features["live"].controller
                torch.manual_seed(0)
                live.set_source(TensorFrames(torch.rand(8, 3, 64, 64), "bench"))
                live.set_speed(30.0)
                live.play()
                wait_until(lambda lv=live: lv.frames_shown >= 2, 60.0)
            cache = os.environ.get("XDG_CACHE_HOME")
            if cache:
                shutil.rmtree(Path(cache) / "actviz", ignore_errors=True)
            done.clear()
            probe = LagProbe(5)
            probe.start()
            t0 = time.perf_counter()
            w.features["dataset"].start(spec)
            finished = wait_until(lambda: bool(done or failed), timeout_s)
            seconds = time.perf_counter() - t0
            probe.stop()
            if failed:
                raise RuntimeError(f"the window's scan failed ({case}): {failed[0]}")
            if not finished:
                raise TimeoutError(f"the window's scan did not finish ({case})")
            out[case] = {**probe.summary(), "images_per_s": done[0].count / seconds}
            if live is not None:
                out[case]["live_frames"] = float(live.frames_shown)
                live.pause()
    finally:
        if live is not None:
            live.shutdown()
        delete_widgets(w)
    return out


def print_table(results: dict[str, Any]) -> None:
    rows = results["rows"]
    if rows:
        r = rows[0]
        print(
            f"dataset scan: {r.images} synthetic {r.size}px JPEGs, k=9, cache on; "
            f"peak memory by {r.peak_method}, on the first "
            f"{MEMORY_BATCHES * r.batch_size} images"
        )
    for row in rows:
        print(row.row())
    for case, lag in results.get("window_lag", {}).items():
        print(
            f"  GUI timer lag while the window scans (demo, {case}): p50 {lag['p50_ms']:.1f} / "
            f"p99 {lag['p99_ms']:.1f} / max {lag['max_ms']:.1f} ms, "
            f"{lag['images_per_s']:.0f} images/s ({lag['n']} samples)"
        )
