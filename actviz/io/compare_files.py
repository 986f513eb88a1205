"""Writing a comparison of two runs: ``compare.json`` and per layer the difference PNGs of
:func:`actviz.display.difference.prepare_difference` (``_1x``: the window's very pixels)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from actviz.core.compare import Comparison, compare
from actviz.core.records import Capture
from actviz.display.difference import DIFFERENCE_CMAP, prediction_change, prepare_difference
from actviz.display.prepared import DisplaySpec
from actviz.io.errors import ActvizError
from actviz.io.export.capture_export import write_pages
from actviz.io.export.reproduce import args_source, write_compare_reproduce
from actviz.io.export.typeset import EXPORT_PAGE_CHANNELS, layer_page_images, safe_name


def write_comparison(
    cap_a: Capture,
    cap_b: Capture,
    out_dir: str | Path,
    *,
    comparison: Comparison | None = None,
    tol: float = 1e-4,
    normalize: str = "channel",
    categories: Sequence[str] | None = None,
    runs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Path]:
    """Write ``compare.json`` and the difference PNGs (A minus B) of every compared layer;
    ``comparison`` is computed with ``tol`` when None; ``runs`` (``{"a": {...}, "b": {...}}``)
    is recorded as is. Returns the files written, ``compare.json`` last."""
    if normalize not in ("channel", "shared"):
        raise ValueError(f"normalize must be 'channel' or 'shared', not {normalize!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if comparison is None:
        comparison = compare(cap_a, cap_b, tol=tol)
    names = list(dict.fromkeys(d.name for d in comparison.layers))
    spec = DisplaySpec(
        layers=tuple(names),
        normalize=normalize,
        page_channels={n: EXPORT_PAGE_CHANNELS for n in names},
    )
    prepared = prepare_difference(cap_a, cap_b, spec)
    written: list[Path] = []
    files: dict[str, list[str]] = {}
    for name, layer in prepared.items():
        view = layer.view
        if view is None:
            continue
        title = f"{name or '(model)'} · {layer.module_type} · A - B"
        # Readable PNGs and the panel's own pixels (_1x), always symmetric about 0 here.
        pictures = layer_page_images(
            safe_name(name), "features", layer, DIFFERENCE_CMAP, title, normalize, symmetric=True
        )
        mine = write_pages(out, f"diff_{safe_name(name)}", pictures)
        written += mine
        files[name] = [p.name for p in mine]
    change = prediction_change(
        cap_a.output, cap_b.output, categories=categories, target=cap_a.target_index
    )
    data = {
        "runs": {k: dict(v) for k, v in (runs or {}).items()},
        **comparison.to_dict(),
        "predictions": {
            "rows": [r._asdict() for r in change.rows],
            "target": None if change.target is None else change.target._asdict(),
            **{k: getattr(change, k) for k in ("top_a", "top_b", "message")},
        },
        "files": files,
    }
    path = out / "compare.json"
    path.write_text(json.dumps(data, indent=2, allow_nan=False))
    written.append(path)
    return written


def run_compare(
    args: argparse.Namespace,
    open_model: Callable[[argparse.Namespace], Any],
    progress: Callable[[str], None],
    parse_target: Callable[[str | None, Any], int | None],
) -> int:
    """``actviz compare``: the CLI passes its own model opening, progress and target parsing."""
    import actviz
    from actviz.io.input_files import open_input

    if not args.model_b and not args.input_b:
        raise ActvizError(
            "nothing to compare: give --model-b (a second checkpoint) and/or --input-b "
            "(a second input)"
        )
    if not 0 <= args.tol:
        raise ActvizError(f"--tol must be >= 0, not {args.tol}")
    loaded_a = open_model(args)
    loaded_b = loaded_a
    if args.model_b:
        loaded_b = open_model(argparse.Namespace(**{**vars(args), "model": args.model_b}))
    inp_a = open_input(args.input, loaded_model=loaded_a, as_list=args.list_input)
    inp_b = inp_a
    if args.input_b:
        inp_b = open_input(args.input_b, loaded_model=loaded_b, as_list=args.list_input)
    layers = [s.strip() for s in args.layers.split(",") if s.strip()] if args.layers else None
    target = parse_target(args.target, loaded_a)
    caps = []
    for tag, loaded, inp in (("A", loaded_a, inp_a), ("B", loaded_b, inp_b)):
        progress(f"run {tag}: {loaded.name} on {inp.description} ...")
        try:
            cap = actviz.capture(
                loaded.model, inp.value, layers, target=target, gradients=False, keep_inputs=False
            )
        except ValueError as exc:
            raise ActvizError(f"run {tag}: {exc}") from None
        for w in cap.warnings:
            progress(f"warning (run {tag}): {w}")
        caps.append(cap)
    comparison = compare(caps[0], caps[1], tol=args.tol)
    if not comparison.layers:
        raise ActvizError(
            "the runs share no layer with outputs of one shape: compare checkpoints of one "
            "architecture, inputs of one size"
        )
    runs = {
        "a": {"model": args.model, "input": args.input},
        "b": {"model": args.model_b or args.model, "input": args.input_b or args.input},
    }
    files = write_comparison(
        caps[0],
        caps[1],
        args.out,
        comparison=comparison,
        normalize=args.normalize,
        categories=loaded_a.categories,
        runs=runs,
    )
    sources = [
        args_source(loaded, args, inp_src)
        for loaded, inp_src in ((loaded_a, args.input), (loaded_b, args.input_b or args.input))
    ]
    if loaded_b is loaded_a:  # one model: opened once by the script
        sources[1] = replace(sources[1], state=sources[0].state)
    files += write_compare_reproduce(args.out, sources[0], sources[1], layers, args.tol)
    first = comparison.first_divergence
    where = "none" if first is None else f"{first.name} (rel. L2 {first.rel_l2:.3g})"
    print(
        f"compared {len(comparison.layers)} layer calls; first divergence > {args.tol:g}: {where}"
    )
    print(f"wrote {len(files)} files to {args.out}")
    return 0
