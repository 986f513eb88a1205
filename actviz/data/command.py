"""``actviz scan``: scan a dataset from the command line (the parser lines live in actviz.cli)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actviz.io.errors import InputError

__all__ = ["cmd_scan"]


def cmd_scan(
    args: argparse.Namespace,
    open_model: Callable[[argparse.Namespace], Any],
    say: Callable[[str], None],
) -> int:
    """Run ``actviz scan``: cache, one contact sheet per layer, ``scan.json``.

    Parameters
    ----------
    args
        ``--model ... --data DIR [--layers L1,L2] --k 9 --out OUT`` (see ``actviz scan -h``);
        without ``--layers``, every leaf module is scanned (as ``actviz export`` captures).
    open_model
        The CLI's model opener (prints what it opens).
    say
        Writes a progress line to stderr.
    """
    from actviz.core.capture import leaf_names
    from actviz.data.scan import scan
    from actviz.data.sheet import write_scan

    data = Path(args.data)
    if not data.exists():
        raise InputError(f"{args.data}: no such folder or file")
    layers = [s.strip() for s in (args.layers or "").split(",") if s.strip()]
    if args.layers is not None and not layers:
        raise InputError("--layers: give at least one layer name (see `actviz info`)")
    if args.k < 1:
        raise InputError(f"--k must be at least 1, got {args.k}")
    loaded = open_model(args)
    if not layers:
        layers = leaf_names(loaded.model)
        say(f"scanning every leaf module: {len(layers)} layers (--layers picks some)")
    last = [0.0]

    def progress(done: int, total: int, rate: float) -> None:
        now = time.perf_counter()
        if done < total and now - last[0] < 1.0:
            return
        last[0] = now
        eta = f", {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
        say(f"scanned {done}/{total} images ({rate:.0f} images/s{eta})")

    result = scan(
        loaded,
        data,
        layers,
        k=args.k,
        batch_size=args.batch_size,
        progress=progress,
        cache=not args.no_cache,
        num_workers=args.workers,
    )
    if result.from_cache:
        say(f"from the cache: {result.cache_path}")
    for w in result.warnings:
        say(f"warning: {w}")
    for source, reason in result.skipped:
        say(f"skipped {source}: {reason}")
    files = write_scan(
        loaded,
        result,
        args.out,
        tile=args.tile,
        extra={"model": loaded.name, "data": str(data.resolve())},
        progress=lambda i, n, layer: say(f"[{i + 1}/{n}] contact sheet of {layer}"),
    )
    skipped = f", {len(result.skipped)} skipped" if result.skipped else ""
    print(
        f"scanned {result.count} images{skipped}; wrote {len(files)} files to {args.out}"
        + (f" (cache: {result.cache_path})" if result.cache_path else "")
    )
    return 0
