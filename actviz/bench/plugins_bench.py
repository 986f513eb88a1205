"""Plugins: what installing the two example plugins costs at start-up, and how fast a plugin's
layer view renders beside a built-in layer panel.

* ``plugin_startup_ratio``: fresh processes, interleaved, order flipped every pair; each does
  what ``actviz`` does (a window with the installed plugins, the demo model and its first
  sample, the automatic first run) and prints the time of the first painted result. One kind
  has ``examples/actviz-correlation`` and ``examples/actviz-wav`` installed (a ``*.dist-info``
  with their entry points and their sources on ``PYTHONPATH``, as pip leaves them), the other
  has nothing more (where pip installed both into this environment, as CI does, the other
  kind starts with both disabled, as Help > Plugins leaves them: found, not imported). The
  child says how many plugins it loaded, so a ratio of two equal runs is
  never reported. Target: at most 1.05.
* ``plugin_view_render_p95_ms``: the correlation view of a 256-channel 43x43 layer, its
  ``prepare`` (on the GUI thread in the window) plus ``set_data`` and one paint, beside
  ``LayerPanel.set_activation`` plus one paint of the same layer's mosaic
  (``panel_render_p95_ms``, as :mod:`actviz.bench.render_bench` times it).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: distribution -> (package, entry point)
PLUGINS = {
    "actviz-correlation": ("actviz_correlation", "correlation"),
    "actviz-wav": ("actviz_wav", "wav"),
}

__all__ = ["render", "run", "startup"]


def _site_with_examples(root: Path) -> list[str]:
    """Paths that make both examples installed: a site folder with their dist-infos, and
    their sources."""
    site = root / "site"
    for dist, (package, entry) in PLUGINS.items():
        info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
        (info / "entry_points.txt").write_text(f"[actviz.plugins]\n{entry} = {package}:plugin\n")
    return [str(site), *(str(EXAMPLES / dist / "src") for dist in PLUGINS)]


def _installed_here() -> bool:
    """Whether both examples are installed in this environment (CI: ``pip install -e``)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return all(distribution(dist) is not None for dist in PLUGINS)
    except PackageNotFoundError:
        return False


def _time_child(
    extra_path: list[str], timeout_s: float, disabled: tuple[str, ...] = ()
) -> tuple[float, int]:
    """The start-up bench's child with the installed plugins (``disabled``: those off, as
    Help > Plugins leaves them): seconds, plugins active."""
    from actviz.bench.startup_bench import DISABLE_ENV, child_env, time_child

    env = child_env(extra_path)
    env.pop("ACTVIZ_NO_PLUGINS", None)
    env[DISABLE_ENV] = ",".join(disabled)
    args = [sys.executable, "-m", "actviz.bench.startup_bench", "--child", "--plugins"]
    seconds, (loaded, *_) = time_child(args, timeout_s, env)
    return seconds, int(loaded)


def startup(pairs: int = 3, timeout_s: float = 180.0) -> dict[str, Any]:
    """Median start-up with both examples installed against without (see the module docs)."""
    # Installed in this environment already (CI), "without" is both disabled: found and
    # listed, not imported. Otherwise "with" puts them on the child's path.
    here = _installed_here()
    names = tuple(entry for _, entry in PLUGINS.values())
    with tempfile.TemporaryDirectory(prefix="actviz-plugins-bench-") as tmp:
        installed = [] if here else _site_with_examples(Path(tmp))
        setups = [(installed, (), len(PLUGINS)), ([], names if here else (), 0)]
        for paths, off, _ in setups:  # warm the file cache for both
            _time_child(paths, timeout_s, off)
        with_, without = [], []
        for i in range(pairs):
            order = [(*setups[0], with_), (*setups[1], without)]
            if i % 2:
                order.reverse()
            for paths, off, expected, out in order:
                seconds, loaded = _time_child(paths, timeout_s, off)
                if loaded != expected:
                    raise RuntimeError(f"the child loaded {loaded} plugins, not {expected}")
                out.append(seconds)
    ratios = [a / b for a, b in zip(with_, without, strict=True)]
    return {
        "plugin_startup_ratio": statistics.median(ratios),
        "startup_with_plugins_s": statistics.median(with_),
        "startup_without_plugins_s": statistics.median(without),
        "ratios": ratios,
    }


def _p95(times: list[float]) -> float:
    times = sorted(times)
    return times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))] * 1e3


def render(repeats: int = 30, shape: tuple[int, int, int] = (256, 43, 43)) -> dict[str, Any]:
    """p95 ms of the correlation view (prepare + set_data + paint) and of a layer panel
    (set_activation + paint) on the same layer."""
    import numpy as np

    from actviz.bench.render_bench import _mosaics
    from actviz.bench.ui_bench import delete_widgets, ensure_qt_app
    from actviz.plugins import LayerData, ViewContext, ViewSettings
    from actviz.ui.panels.feature_map import LayerPanel

    sys.path.insert(0, str(EXAMPLES / "actviz-correlation" / "src"))
    try:
        from actviz_correlation import plugin
    finally:
        sys.path.pop(0)
    (view,) = plugin.contributions
    app = ensure_qt_app()
    c, h, w = shape
    pair = [_mosaics(c, h, w, "all channels", seed) for seed in (0, 1)]
    datas = [LayerData("bench", "Conv2d", (1, c, h, w), "maps", v.data) for v, _ in pair]
    widget = view.widget(ViewContext("bench", lambda _c: True))
    panel = LayerPanel("bench", module_type="Conv2d")
    panel.set_gradients_visible(False)
    for item in (widget, panel):
        item.resize(700, 700)
        item.show()
    app.processEvents()
    times: dict[str, list[float]] = {"view": [], "prepare": [], "panel": []}
    settings = ViewSettings(page_size=c)
    try:
        for i in range(repeats + 2):
            t0 = time.perf_counter()
            data = view.prepare(datas[i % 2], settings)
            t1 = time.perf_counter()
            widget.set_data(data)
            widget.repaint()
            app.processEvents()
            t2 = time.perf_counter()
            panel.set_activation(*pair[i % 2])
            app.processEvents()
            t3 = time.perf_counter()
            if i >= 2:
                times["prepare"].append(t1 - t0)
                times["view"].append(t2 - t0)
                times["panel"].append(t3 - t2)
    finally:
        delete_widgets(widget, panel)
    assert np.isfinite(data.matrix).all()
    return {
        "plugin_view_render_p95_ms": _p95(times["view"]),
        "plugin_view_prepare_p95_ms": _p95(times["prepare"]),
        "panel_render_p95_ms": _p95(times["panel"]),
        "shape": shape,
    }


def run(quick: bool, summary: dict) -> None:
    """The ``plugins`` section of ``python -m actviz.bench``."""
    if not (EXAMPLES / "actviz-correlation").is_dir():
        print("(plugins: the examples/ folder is not in this install)")
        return
    drawn = render(repeats=15 if quick else 40)
    c, h, w = drawn["shape"]
    print(f"{'render, ' + str(c) + ' ch of ' + str(h) + 'x' + str(w):<44} {'p95 ms':>8}")
    print(
        f"{'  correlation view (prepare + set_data + paint)':<44} {drawn['plugin_view_render_p95_ms']:8.1f}"
    )
    print(
        f"{'    of which prepare (C x C corrcoef)':<44} {drawn['plugin_view_prepare_p95_ms']:8.1f}"
    )
    print(f"{'  layer panel (set_activation + paint)':<44} {drawn['panel_render_p95_ms']:8.1f}")
    started = startup(pairs=3 if quick else 7)
    print(
        f"{'start-up (median of interleaved processes)':<44} {'with s':>8} {'without':>8} {'ratio':>8}"
    )
    print(
        f"{'  two example plugins installed / none':<44} {started['startup_with_plugins_s']:8.2f} "
        f"{started['startup_without_plugins_s']:8.2f} {started['plugin_startup_ratio']:7.3f}x"
    )
    for key in ("plugin_view_render_p95_ms", "plugin_view_prepare_p95_ms", "panel_render_p95_ms"):
        summary[key] = drawn[key]
    for key in ("plugin_startup_ratio", "startup_with_plugins_s", "startup_without_plugins_s"):
        summary[key] = started[key]


if __name__ == "__main__":  # pragma: no cover
    out: dict = {}
    run("--quick" in sys.argv, out)
