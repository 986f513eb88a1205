"""Memory: live mode keeps only the latest capture, so resident memory stays flat.

A window plays a tensor sequence in live mode; the process's resident set size (VmRSS) is read
after 10 and after 100 shown frames (with a garbage collection first). The figure is their
ratio; a leak of one capture per frame would show as growth proportional to the frame count.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

from actviz.bench.live_bench import LiveRig
from actviz.bench.ui_bench import wait_until
from actviz.core.capture import format_bytes
from actviz.workspace.budget import rss_bytes


@dataclass
class MemoryResult:
    arch: str
    size: int
    rss_at: dict[int, int]
    held_bytes: int
    ratio: float

    def row(self) -> str:
        a, b = sorted(self.rss_at)
        return (
            f"{'  RSS after ' + str(a) + ' / ' + str(b) + ' live frames':<44} "
            f"{format_bytes(self.rss_at[a]):>9} {format_bytes(self.rss_at[b]):>9} {self.ratio:7.3f}x"
        )


def run(
    arch: str = "resnet18",
    size: int = 112,
    n_layers: int = 20,
    checkpoints: tuple[int, int] = (10, 100),
    timeout_s: float = 900.0,
) -> MemoryResult:
    """Play live frames and read RSS at ``checkpoints`` (frames shown)."""
    rig = LiveRig(arch, size, n_layers)
    live = rig.live
    rss_at: dict[int, int] = {}
    try:
        base = live.frames_shown
        live.play()
        for target in checkpoints:
            ok = wait_until(lambda t=target: live.frames_shown - base >= t, timeout_s)
            if not ok:
                raise TimeoutError(f"only {live.frames_shown - base} of {target} frames shown")
            live.pause()
            rig.wait_idle(timeout_s)
            gc.collect()
            rss_at[target] = rss_bytes(max_age_s=0.0) or 0
            live.play()
        live.pause()
        rig.wait_idle(timeout_s)
        held = rig.window.session.result.nbytes if rig.window.session.result is not None else 0
    finally:
        rig.close()
    a, b = checkpoints
    ratio = rss_at[b] / rss_at[a] if rss_at.get(a) else float("nan")
    return MemoryResult(arch, size, rss_at, held, ratio)


def print_table(r: MemoryResult) -> None:
    print(f"memory: live {r.arch} {r.size}px, capture held {format_bytes(r.held_bytes)}")
    print(r.row())
