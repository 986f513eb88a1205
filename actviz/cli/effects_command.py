"""``actviz effects``: every channel of the given layers ranked by its effect on the target
(``effects.json`` and a bar chart per layer). torch is imported inside :func:`run` only."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from actviz.cli import command_kit as kit


def add_parser(sub: Any, add_model_args: kit.ModelArgs) -> None:
    """Add the ``effects`` sub-command to the ``actviz`` parser."""
    p = sub.add_parser(
        "effects",
        help="rank channels by their effect on the prediction: effects.json + a chart per layer",
    )
    add_model_args(p, True)
    p.add_argument("--input", "-i", required=True, help="image, tensor file or random:NxCxHxW")
    p.add_argument("--layers", "-l", required=True, help="comma-separated layer names")
    p.add_argument("--out", "-o", required=True, help="output folder")
    p.add_argument("--target", "-t", help="class index or class name (default: the top-1 class)")
    p.add_argument(
        "--verify",
        type=int,
        default=0,
        metavar="K",
        help="also measure the exact effect of the top K channels of each layer (default 0)",
    )
    p.add_argument(
        "--baseline",
        default="zero",
        help="what a channel is set to: zero (default), input:FILE (patch: that input's "
        "activations) or scan:FOLDER (each channel's mean over a scan of those images)",
    )
    p.add_argument("--batch", type=int, default=16, help="channels per exact forward pass")
    p.add_argument("--top", type=int, default=32, help="channels drawn per chart (default 32)")


def run(args: argparse.Namespace, open_model: kit.Opener, progress: kit.Say) -> int:
    """Run ``actviz effects``; ``progress`` writes a line to stderr, results go to stdout."""
    import actviz
    from actviz.analysis.effects.channel_effects import effects
    from actviz.analysis.effects.effect_results import effects_chart
    from actviz.io.errors import InputError
    from actviz.io.export.typeset import safe_name
    from actviz.io.input_files import open_input

    if not (layers := kit.layer_names(args.layers) or []):
        raise InputError("--layers: give at least one layer name (see `actviz info`)")
    if args.verify < 0 or args.batch < 1 or args.top < 1:
        raise InputError("--verify must be >= 0, --batch and --top >= 1")
    loaded = open_model(args)
    inp = open_input(args.input, loaded_model=loaded)
    target = kit.target_arg(args.target, loaded)
    kind, _, rest = args.baseline.partition(":")
    if args.baseline.strip().lower() == "zero":
        baseline: Any = "zero"
    elif kind == "input" and rest:
        other = open_input(rest, loaded_model=loaded)
        progress(f"running the baseline input {other.description} ...")
        baseline = actviz.capture(loaded.model, other.value, layers, gradients=False)
    elif kind == "scan" and rest:
        from actviz.data.scan import scan

        baseline = scan(
            loaded, rest, layers, progress=kit.scan_progress(progress, " for the baseline")
        )
    else:
        raise InputError(f"--baseline: zero, input:FILE or scan:FOLDER, not {args.baseline!r}")
    progress(f"estimating the effects of every channel of {len(layers)} layer(s) ...")
    result = effects(
        loaded.model,
        inp.value,
        layers,
        target=target,
        baseline=baseline,
        method="exact" if args.verify else "estimate",
        channels=args.verify if args.verify else None,
        batch=args.batch,
        progress=lambda done, total: progress(f"exact: {done}/{total} channels"),
    )
    kit.say_each(progress, result.warnings)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = result.to_dict(top=args.top)
    data.update({"model": loaded.name, "input": str(args.input)})
    name = ""
    cats = loaded.categories
    if result.target_index is not None and cats and 0 <= result.target_index < len(cats):
        name = f" ({cats[result.target_index]})"
        data["target"]["name"] = cats[result.target_index]
    files = [out / "effects.json"]
    files[0].write_text(json.dumps(data, indent=1), encoding="utf-8")
    for layer in result.layers:
        path = out / f"effects_{safe_name(layer)}.png"
        effects_chart(result, layer, args.top).save(path)
        files.append(path)
    print(f"target: {result.target_description}{name} = {result.target_value:.4g}")
    for layer in result.layers:
        shown = ", ".join(
            f"{r.channel} ({r.estimate:+.3g}"
            + ("" if r.exact is None else f", exact {r.exact:+.3g}")
            + ")"
            for r in result.top(layer, 5)
        )
        rho = result.rank_correlation(layer)
        rho_text = f"; rank correlation {rho:.2f}" if math.isfinite(rho) else ""
        print(f"{layer}: top channels {shown}{rho_text}")
    print(f"wrote {len(files)} files to {args.out}")
    return 0
