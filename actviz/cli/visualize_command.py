"""``actviz visualize``: what each channel of a layer wants to see, written as PNGs, a contact
sheet and ``visualize.json``. Torch is imported inside :func:`run` only (a cheap parser)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path
from typing import Any

from actviz.cli.command_kit import ModelArgs, Opener, Say

_DEFAULT_CHANNELS = 16
#: Images per forward pass (all channels in one batch can take tens of GB with gradients).
_DEFAULT_BATCH = 16


def parse_channels(text: str) -> list[int]:
    """``"0-3,7,9-10"`` -> ``[0, 1, 2, 3, 7, 9, 10]`` (order kept, repeats dropped);
    ValueError for a part that is not a number or a range ``a-b`` with ``a <= b``."""
    out: list[int] = []
    for part in text.split(","):
        if not (part := part.strip()):
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(
                f"--channels: {part!r} is not a channel or a range like 0-15"
            ) from None
        if a < 0 or b < a:
            raise ValueError(f"--channels: {part!r} is not a range from low to high")
        out.extend(c for c in range(a, b + 1) if c not in out)
    if not out:
        raise ValueError("--channels: no channel given")
    return out


def add_parser(sub: Any, add_model_args: ModelArgs) -> None:
    """Add the ``visualize`` sub-command to ``sub``."""
    p = sub.add_parser(
        "visualize",
        help="synthesise the image each channel responds to most (feature visualisation)",
        description="Optimise one image per channel so that the channel's activation is as high "
        "as it gets (Fourier parameterisation, decorrelated colour, robustness transforms, the "
        "model's own normalisation). Writes one PNG per channel, a numbered contact sheet and "
        "visualize.json.",
    )
    add_model_args(p, True)
    p.add_argument("--layer", "-l", help="module name (see `actviz info`); not with --target")
    p.add_argument(
        "--channels",
        "-c",
        help=f"channels, e.g. 0-15 or 3,7,9-12 (default: the first {_DEFAULT_CHANNELS}); with "
        "--target, the classes",
    )
    p.add_argument(
        "--objective",
        choices=("channel", "neuron", "layer"),
        default="channel",
        help="channel mean (default), its centre neuron, or the layer's mean square "
        "(DeepDream: one image, no --channels)",
    )
    p.add_argument(
        "--target", action="store_true", help="maximise the class logits given by --channels"
    )
    p.add_argument("--negative", action="store_true", help="minimise the objective instead")
    p.add_argument("--steps", type=int, default=256, help="optimisation steps (default 256)")
    p.add_argument("--size", type=int, default=128, help="image side in pixels (default 128)")
    p.add_argument(
        "--batch",
        type=int,
        default=_DEFAULT_BATCH,
        help=f"images per forward pass (default {_DEFAULT_BATCH}; more is faster on a GPU and "
        "takes more memory)",
    )
    p.add_argument("--lr", type=float, default=0.05, help="Adam's learning rate (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="random start and transforms (default 0)")
    p.add_argument(
        "--param",
        choices=("fourier", "pixel"),
        default="fourier",
        help="the image's parameters: its 1/f-scaled spectrum (default) or plain pixels",
    )
    p.add_argument("--no-decorrelate", action="store_true", help="plain RGB, no colour mixing")
    p.add_argument(
        "--transforms",
        choices=("standard", "none"),
        default="standard",
        help="robustness transforms each step: pad, jitter, scale, rotate (default), or none",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the user's cache folder"
    )
    p.add_argument("--out", "-o", required=True, help="output folder")


def run(args: argparse.Namespace, open_model: Opener, progress: Say) -> int:
    """Run ``actviz visualize``; 0 on success (errors are raised, the CLI prints them)."""
    from actviz.analysis.visualize.feature_vis import VisualizeSettings, layer_channels, visualize
    from actviz.analysis.visualize.picture_files import write_visualization

    if args.target and args.layer:
        raise ValueError("give --layer or --target, not both")
    if not args.target and not args.layer:
        raise ValueError("give --layer (see `actviz info --model ...` for names) or --target")
    channels = parse_channels(args.channels) if args.channels else None
    deepdream = args.objective == "layer" and not args.target
    if deepdream and channels is not None:
        # Each "channel" would be the same objective from another seed, misnamed as a channel.
        raise ValueError(
            "--objective layer maximises the whole layer (no channels): leave out --channels "
            "(one image; --seed for another)"
        )
    # Checked before the model opens; options named as VisualizeSettings' fields fill them.
    given = {f.name: getattr(args, f.name) for f in fields(VisualizeSettings) if f.name in args}
    settings = VisualizeSettings(**given, decorrelate=not args.no_decorrelate)
    if args.batch is not None and args.batch < 1:
        raise ValueError(f"--batch: batch must be at least 1 image per pass, not {args.batch}")
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out: cannot make the folder {args.out}: {exc.strerror}") from None
    loaded = open_model(args)
    from actviz.io.export.reproduce import run_source

    # Random weights differ in every process: their cache entries could never be read again.
    random_weights = run_source(loaded, None).state is not None
    if deepdream:
        channels = [0]
    elif channels is None:
        if args.target:
            count = len(loaded.categories or ()) or _DEFAULT_CHANNELS
        else:
            count = layer_channels(loaded, args.layer, size=args.size)
        channels = list(range(min(count, _DEFAULT_CHANNELS)))
    kind = "(the whole layer)" if deepdream else "channels"
    what = "classes" if args.target else f"{args.layer} {kind}"
    progress(f"visualising {len(channels)} {what} ({args.steps} steps, {args.size} px) ...")
    shown = [0]

    def report(done: int, total: int) -> None:  # about twenty lines whatever the step count
        if done == total or done * 20 // total > shown[0]:
            shown[0] = done * 20 // total
            progress(f"  step {done}/{total}")

    vis = visualize(
        loaded,
        None if args.target else args.layer,
        channels,
        settings,
        batch=args.batch,
        target=channels if args.target else None,
        cache=not (args.no_cache or random_weights),
        progress=report,
    )
    if cached := sum(vis.from_cache):
        progress(f"{cached} of {len(channels)} from the cache")
    files = write_visualization(vis, args.out, {"model": loaded.name, "source": args.model})
    for i, c in enumerate(vis.channels):
        if deepdream:
            print(f"{args.layer}: final mean square {vis.activations[i]:.4g}")
            continue
        categories = loaded.categories or []
        name = f" ({categories[c]})" if args.target and c < len(categories) else ""
        print(f"{c}{name}: final activation {vis.activations[i]:.4g}")
    print(f"wrote {len(files)} files to {args.out} in {vis.elapsed_s:.1f} s")
    return 0
