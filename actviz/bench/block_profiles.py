"""Where the GUI thread spent each block of a stress case: a profile per block, then the
functions that took the most time over all of them.

``python -m actviz.bench.block_profiles --case resnet18 --seed 9201 --actions 1600 --out DIR``
runs the case (:mod:`actviz.testing.stress_cases`) with a profiler on the GUI thread that the
lag probe restarts at each of its 5 ms ticks: a tick late by more than ``--over-ms`` saves the
profile of exactly that blocked stretch as ``DIR/b001_123ms_<pid>.prof``. The summary lists
actviz's functions by their time summed over the blocks, with how many blocks they were in.

The profiler slows Python calls (about 1.5x; generators and small calls more), so the blocks are
longer than in a plain run and call-heavy code reads heavier than it is: use it to find where a
block goes, and time a fix without it.
"""

from __future__ import annotations

import argparse
import glob
import os
import pstats
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

#: Loaded by the case's processes (``sitecustomize``): patches the lag probe once stress loads.
_HOOK = """
import cProfile, os, sys, time
OUT, OVER = os.environ["ACTVIZ_BLOCK_PROFILES"], float(os.environ["ACTVIZ_BLOCK_OVER_MS"]) / 1e3


def _patch():
    from actviz.bench import ui_bench
    tick, stop, state = ui_bench.LagProbe._on_timeout, ui_bench.LagProbe.stop, {"n": 0}

    def timed_tick(self):
        profile, last, now = state.get("profile"), state.get("last"), time.perf_counter()
        if profile is not None:
            profile.disable()
            if last is not None and now - last - self.interval_s > OVER:
                state["n"] += 1
                name = f"b{state['n']:03d}_{(now - last) * 1e3:.0f}ms_{os.getpid()}.prof"
                profile.dump_stats(os.path.join(OUT, name))
        tick(self)
        state["last"], state["profile"] = time.perf_counter(), cProfile.Profile()
        state["profile"].enable()

    def untimed_stop(self, *args, **kwargs):
        if state.get("profile") is not None:
            state["profile"].disable()
        state["profile"] = state["last"] = None
        return stop(self, *args, **kwargs)

    ui_bench.LagProbe._on_timeout, ui_bench.LagProbe.stop = timed_tick, untimed_stop


class _AfterStress:
    def find_spec(self, name, path, target=None):
        if name != "actviz.testing.stress":
            return None
        import importlib.machinery
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        spec.loader.exec_module = lambda module: (run(module), _patch())
        return spec


sys.meta_path.insert(0, _AfterStress())
"""


def summary(folder: str | Path, top: int = 40) -> list[tuple[float, int, str]]:
    """actviz's functions (outside ``testing/`` and ``bench/``) by their time summed over the
    profiles in ``folder``: ``(seconds, blocks, "module.py:line(name)")``, most first."""
    total: Counter[str] = Counter()
    blocks: Counter[str] = Counter()
    for path in glob.glob(str(Path(folder) / "*.prof")):
        for (file, line, name), row in pstats.Stats(path).stats.items():
            if "/actviz/" in file and not any(p in file for p in ("/testing/", "/bench/")):
                label = f"{file.split('/actviz/')[-1]}:{line}({name})"
                total[label] += row[3]
                blocks[label] += 1
    return [(seconds, blocks[label], label) for label, seconds in total.most_common(top)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="resnet18")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actions", type=int, default=500)
    parser.add_argument("--over-ms", type=float, default=80.0)
    parser.add_argument("--out", default="block-profiles")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as hook:
        (Path(hook) / "sitecustomize.py").write_text(_HOOK)
        path = os.pathsep.join(p for p in (hook, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "ACTVIZ_BLOCK_PROFILES": str(out)}
        env["ACTVIZ_BLOCK_OVER_MS"] = str(args.over_ms)
        cmd = [sys.executable, "-m", "actviz.testing.stress_cases", "--case", args.case]
        cmd += ["--seed", str(args.seed), "--actions", str(args.actions), "--no-memory"]
        code = subprocess.call(cmd, env=env)
    found = len(glob.glob(str(out / "*.prof")))
    print(f"{found} blocks over {args.over_ms:.0f} ms profiled in {out}")
    for seconds, count, label in summary(out):
        print(f"{seconds * 1e3:8.0f} ms in {count:3d} blocks  {label}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
