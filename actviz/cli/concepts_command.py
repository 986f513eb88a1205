"""``actviz concepts train|show``: learn a dictionary on a layer (a SAELens folder), or draw its
top concepts with heatmaps. torch is imported inside :func:`run` only.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actviz.cli.command_kit import Opener, Say, Throttle, add_data_args, budget_arg, existing


def add_parser(sub: Any, add_model_args: Callable[[argparse.ArgumentParser, bool], None]) -> None:
    """Add the ``concepts`` command (``train`` and ``show``) to the ``actviz`` parser."""
    p = sub.add_parser(
        "concepts",
        help="sparse dictionaries on a layer: train one on a dataset, or draw its top concepts",
    )
    what = p.add_subparsers(dest="concepts_command", required=True)
    t = what.add_parser("train", help="learn a dictionary on a layer's activations")
    add_model_args(t, True)
    add_data_args(t, workers=False)
    t.add_argument("--layer", "-l", required=True, help="the layer (or blocks.N.hook_resid_*)")
    t.add_argument("--out", "-o", required=True, help="folder for cfg.json + sae_weights")
    t.add_argument("--n", type=int, help="concepts (default: 8 x the layer's channels)")
    t.add_argument("--k", type=int, default=16, help="active concepts per vector (default 16)")
    t.add_argument(
        "--architecture", choices=("topk", "batchtopk", "relu"), default="topk",
        help="topk (default), batchtopk (saved as jumprelu) or relu with --l1",
    )  # fmt: skip
    t.add_argument("--l1", type=float, default=1.0, help="L1 coefficient of relu training")
    t.add_argument("--epochs", type=int, default=5, help="passes over the vectors (default 5)")
    t.add_argument("--batch-size", type=int, default=1024, help="vectors per step (1024)")
    t.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (1e-3)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument(
        "--memory-budget", default="512MiB",
        help="most memory the kept vectors may take, e.g. 256MiB (default 512MiB)",
    )  # fmt: skip
    t.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (0)")
    s = what.add_parser("show", help="a sheet of the top concepts with their top images")
    add_model_args(s, True)
    s.add_argument("--concepts", "-c", required=True, help="a dictionary folder (SAELens)")
    add_data_args(s, workers=False)
    s.add_argument("--layer", "-l", help="the layer it reads (default: its hook_name)")
    s.add_argument("--out", "-o", required=True, help="the sheet (.png)")
    s.add_argument("--top", type=int, default=24, help="concepts shown (default 24)")
    s.add_argument("--k", type=int, default=6, help="top images per concept (default 6)")
    s.add_argument(
        "--by", choices=("max", "rate"), default="max",
        help="order: max (strongest top image first, default) or rate (most images first)",
    )  # fmt: skip
    s.add_argument("--tile", type=int, default=64, help="image size in the sheet (px)")
    s.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (0)")
    s.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")


def _train(args: argparse.Namespace, open_model: Callable, progress: Callable) -> int:
    from actviz.analysis.concepts.training import TrainProgress, train
    from actviz.io.errors import InputError

    existing(args.data)
    for name in ("k", "epochs", "batch_size", "n"):  # --n may be left out (None)
        if (value := getattr(args, name)) is not None and value < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    budget = budget_arg(args.memory_budget, least=1 << 16)
    loaded = open_model(args)
    say = Throttle(progress)

    def step(p: TrainProgress) -> None:
        eta = f", {p.eta_s:.0f} s left" if p.eta_s is not None and p.done < p.total else ""
        if p.stage == "collect":
            say(f"collecting: {p.done}/{p.total} images, {p.vectors:,} vectors{eta}",
                p.done == p.total)  # fmt: skip
        else:
            fvu = f", FVU {p.fvu:.3f}" if p.fvu is not None else ""
            say(f"training: epoch {p.epoch}, step {p.done}/{p.total}{fvu}{eta}",
                p.done == p.total)  # fmt: skip

    try:
        concepts = train(
            args.data,
            args.layer,
            model=loaded,
            n_concepts=args.n,
            k=args.k,
            architecture=args.architecture,
            l1=args.l1,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            seed=args.seed,
            memory_budget=budget,
            num_workers=args.workers,
            progress=step,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    concepts.save(args.out)
    info = concepts.info
    fvu = "?" if concepts.heldout_fvu is None else f"{concepts.heldout_fvu:.3f}"
    l0 = "?" if concepts.l0 is None else f"{concepts.l0:.1f}"
    dead = "?" if concepts.dead_fraction is None else f"{100 * concepts.dead_fraction:.1f}%"
    print(
        f"trained {concepts.d_sae} concepts on {info.get('kept', 0):,} of "
        f"{info.get('vectors_seen', 0):,} vectors of {args.layer!r} ({concepts.d_in} values "
        f"each) in {info.get('seconds', 0):.1f} s: FVU {fvu} ({info.get('fvu_on')}), L0 {l0}, "
        f"dead {dead}; wrote {args.out}"
    )
    return 0


def _show(args: argparse.Namespace, open_model: Callable, progress: Callable) -> int:
    from actviz.analysis.concepts.concept_scan import scan_concepts
    from actviz.analysis.concepts.concept_sheet import concept_sheet
    from actviz.analysis.concepts.dictionary import load
    from actviz.io.errors import InputError

    existing(args.data)
    if args.k < 1 or args.top < 1 or args.tile < 8:
        raise InputError("--k and --top must be at least 1, --tile at least 8")
    try:
        concepts = load(args.concepts)
    except (OSError, ValueError) as exc:
        raise InputError(f"--concepts: {exc}") from None
    loaded = open_model(args)
    say = Throttle(progress)
    try:
        result = scan_concepts(
            loaded,
            args.data,
            concepts,
            args.layer,
            k=args.k,
            num_workers=args.workers,
            cache=not args.no_cache,
            progress=lambda d, n: say(f"scanned {d}/{n} images", d == n),
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if result.from_cache:
        progress(f"from the cache: {result.cache_path}")
    sheet = concept_sheet(
        loaded,
        concepts,
        result,
        top=args.top,
        by=args.by,
        tile=args.tile,
        progress=lambda i, n: say(f"drawing concept {i + 1}/{n}"),
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out)
    dead = len(result.dead())
    print(
        f"{min(args.top, concepts.d_sae)} of {concepts.d_sae} concepts over {result.count} "
        f"images ({dead} never fired); wrote {out}"
    )
    return 0


def run(args: argparse.Namespace, open_model: Opener, progress: Say) -> int:
    """Run ``actviz concepts train|show``; progress lines go to stderr, results to stdout."""
    if args.concepts_command == "train":
        return _train(args, open_model, progress)
    return _show(args, open_model, progress)
