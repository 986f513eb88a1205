"""Command line of the benchmark suite: tables on stdout, one JSON object as the last line."""

from __future__ import annotations

import argparse
import json
import platform

import torch


def machine() -> str:
    return (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__}, Python {platform.python_version()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m actviz.bench", description=__doc__)
    parser.add_argument("what", nargs="?", default="all", choices=["all", "capture"])
    parser.add_argument("--quick", action="store_true", help="fewer pairs, smaller models")
    parser.add_argument("--pairs", type=int, default=None, help="paired runs per figure")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from actviz.bench import capture_bench

    pairs = args.pairs or (5 if args.quick else 15)
    models = ("resnet18",) if args.quick else ("resnet18", "resnet50")
    print(f"machine: {machine()}")
    results = capture_bench.run(models, pairs=pairs, size=224)
    capture_bench.print_table(results)
    summary = {
        k: round(v, 4)
        for k, v in results.items()
        if k.startswith("capture_") and isinstance(v, float)
    }
    print(json.dumps(summary))
    return 0
