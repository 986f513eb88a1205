"""``actviz scan``: scan a dataset from the command line."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from typing import Any

from actviz.cli import command_kit as kit
from actviz.io.errors import InputError


def add_parser(sub: Any, add_model_args: kit.ModelArgs) -> None:
    """Add the ``scan`` sub-command to the ``actviz`` parser."""
    p = sub.add_parser("scan", help="scan a dataset: per channel, the images that excite it most")
    add_model_args(p, True)
    kit.add_data_args(p, workers=False)
    p.add_argument("--layers", "-l", help=kit.LAYERS_HELP)
    p.add_argument("--k", type=int, default=9, help="top images kept per channel (default 9)")
    p.add_argument("--out", "-o", required=True, help="folder for contact sheets + scan.json")
    kit.add_data_args(p, data=False)
    p.add_argument("--tile", type=int, default=48, help="crop size in the contact sheets")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted scan from the cache (also what a plain run does; with "
        "--resume, say how much was already done); under torchrun each rank resumes its shard",
    )
    p.add_argument(
        "--embeddings-dir",
        help="also record each image's pooled vectors, kept in files in this folder (float16, "
        "memory-mapped; a folder every rank reaches under torchrun), and save the scan there "
        "(scan.json: Data > Open a saved scan… in the window)",
    )


def run(args: argparse.Namespace, open_model: kit.Opener, say: kit.Say) -> int:
    """Run ``actviz scan``: cache, one contact sheet per layer, ``scan.json`` (every leaf without
    ``--layers``); ``open_model`` is the CLI's opener, ``say`` writes progress to stderr."""
    data = kit.existing(args.data)
    layers = kit.layer_names(args.layers or "")
    if args.layers is not None and not layers:
        raise InputError("--layers: give at least one layer name (see `actviz info`)")
    if args.k < 1:
        raise InputError(f"--k must be at least 1, got {args.k}")
    if args.resume and args.no_cache:
        raise InputError("--resume continues from the cache: drop --no-cache")
    group = None  # under torchrun: this process is one rank of the scan, (rank, world)
    if int(os.environ.get("WORLD_SIZE", "1")) >= 2:
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():  # NCCL on this rank's GPU, else gloo
            cuda = str(args.device).startswith("cuda") and torch.cuda.is_available()
            if cuda:
                local = int(os.environ.get("LOCAL_RANK", "0"))
                args.device = f"cuda:{local}"
                torch.cuda.set_device(local)
            dist.init_process_group("nccl" if cuda else "gloo")
        group = dist.get_rank(), dist.get_world_size()
    rank, world = group if group is not None else (0, 1)
    if rank != 0:
        say = io.StringIO().write  # one progress line, rank 0's (it counts every rank's images)
    try:
        from actviz.core.capture import leaf_names
        from actviz.data.scan import scan
        from actviz.data.scan_file import write_scan

        # Ranks other than 0 open the model without the opener's lines on stderr.
        with contextlib.redirect_stderr(io.StringIO()) if rank else contextlib.nullcontext():
            loaded = open_model(args)
        if not layers:
            layers = leaf_names(loaded.model)
            say(f"scanning every leaf module: {len(layers)} layers (--layers picks some)")
        first: list[int] = []
        lines = kit.scan_progress(say, f" on {world} ranks" if world > 1 else "")

        def progress(done: int, total: int, rate: float) -> None:
            if not first:
                first.append(done)
                if args.resume:
                    say(f"resuming: {done} of {total} images were done before")
            lines(done, total, rate)

        rows = getattr(args, "embeddings_dir", None)
        result = scan(
            loaded,
            data,
            layers,
            k=args.k,
            batch_size=args.batch_size,
            progress=progress,
            cache=not args.no_cache,
            num_workers=args.workers,
            embeddings=bool(rows),
            embeddings_dir=rows,
        )
        if rank != 0:
            return 0  # rank 0 has the merged scan and writes it
        if rows:
            from actviz.data.scan_file import save_scan

            say(f"saved the scan in {save_scan(result, rows).parent} (the window opens it)")
        kit.report_scan(result, say)
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
    finally:
        if group is not None:
            import torch.distributed as dist

            dist.destroy_process_group()
