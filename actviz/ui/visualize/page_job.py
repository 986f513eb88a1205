"""The job that fills a page of "What channels want", run on the page's worker: the cache's
pictures first, then (when computing) the others synthesised a few channels at a time, each
optimisation step first giving way to the window's runs and live frames."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from actviz.analysis.visualize.feature_vis import VisualizeSettings, layer_channels, visualize

__all__ = ["CHUNK", "YIELD_S", "page_job"]

#: Channels synthesised together (one batch): small enough that tiles appear every few
#: seconds, large enough that a GPU is kept busy.
CHUNK = 4
#: The longest one optimisation step of the page waits for the capture worker's job (a run, a
#: live frame) to end before it goes on beside it: the window's own work comes first, and a
#: page beside live mode still moves.
YIELD_S = 1.0


def page_job(
    target: Any,
    layer: str,
    channels: list[int],
    settings: VisualizeSettings,
    *,
    compute: bool,
    need_total: bool,
    emit: Callable[[str, Any], None],
    set_progress: Callable[[tuple[int, int]], None],
    capture_worker: Any,
) -> Callable[[Any, Any], None]:
    """The job (``job(should_stop, report)``) filling ``channels`` of ``layer`` of model
    ``target`` with ``settings``.

    ``emit("total", n)`` tells the layer's channel count (with ``need_total``), ``emit("part",
    vis)`` each :class:`~actviz.analysis.visualize.visualization.Visualization` found or made;
    ``set_progress((done, total))`` counts the optimisation steps."""
    steps = settings.steps

    def job(should_stop: Any, report: Any) -> None:
        def stop_or_yield() -> bool:
            # Before each step: the window's run or live frame first (a bounded wait).
            if capture_worker.is_busy():
                deadline = time.monotonic() + YIELD_S
                while capture_worker.is_busy() and time.monotonic() < deadline:
                    if should_stop():
                        return True
                    time.sleep(0.002)
            return bool(should_stop())

        todo = channels
        if need_total:
            total = layer_channels(target, layer, size=settings.size[0])
            emit("total", total)
            todo = [c for c in todo if c < total]
        found = visualize(target, layer, todo, settings, cache=True, only_cached=True)
        if found.channels:
            emit("part", found)
        if not compute:
            return
        todo = [c for c in todo if c not in found.channels]
        chunks = [todo[i : i + CHUNK] for i in range(0, len(todo), CHUNK)]
        for n, part in enumerate(chunks):

            def step(done: int, _total: int, n: int = n) -> None:
                set_progress((n * steps + done, len(chunks) * steps))
                report(f"Visualising channels: step {n * steps + done}")

            vis = visualize(
                target, layer, part, settings, cache=True, progress=step, should_stop=stop_or_yield
            )
            emit("part", vis)

    return job
