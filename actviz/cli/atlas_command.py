"""``actviz atlas``: a layer's map of a dataset (``atlas.png``, ``.npz``, ``.json``) through the
scan's cache. torch is imported inside :func:`run` only, so the parser stays cheap."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from actviz.cli import command_kit as kit


def add_parser(sub: Any, add_model_args: kit.ModelArgs) -> None:
    """Add the ``atlas`` sub-command to the ``actviz`` parser."""
    p = sub.add_parser(
        "atlas",
        help="map a dataset as one layer sees it: atlas.png (by class), atlas.npz, atlas.json",
    )
    add_model_args(p, True)
    kit.add_data_args(p, workers=False)
    p.add_argument("--layer", "-l", required=True, help="the layer whose space is mapped")
    p.add_argument("--out", "-o", required=True, help="output folder")
    p.add_argument(
        "--method",
        choices=("pca", "umap"),
        default="pca",
        help="projection: pca (exact, default) or umap (needs pip install 'actviz[atlas]')",
    )
    p.add_argument("--dims", type=int, default=2, help="dimensions of the coordinates (default 2)")
    p.add_argument("--seed", type=int, default=0, help="UMAP's random seed (default 0)")
    kit.add_data_args(p, data=False)
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument(
        "--memory-budget",
        help="most memory the embeddings may take, e.g. 512MiB (default: ACTVIZ_MEMORY_BUDGET "
        "or 1 GiB)",
    )
    p.add_argument("--size", default="1280x720", help="atlas.png size WIDTHxHEIGHT")


def run(args: argparse.Namespace, open_model: kit.Opener, progress: kit.Say) -> int:
    """Run ``actviz atlas``; ``progress`` writes a line to stderr, results go to stdout."""
    import numpy as np

    from actviz.data.atlas_image import atlas_image
    from actviz.data.atlas_map import project, umap_available
    from actviz.data.scan import estimate_memory, scan
    from actviz.io.errors import InputError
    from actviz.workspace.budget import default_budget

    data = kit.existing(args.data)
    if args.method == "umap" and not umap_available():
        raise InputError("--method umap needs umap-learn: pip install 'actviz[atlas]'")
    if args.dims < 1:
        raise InputError(f"--dims must be at least 1, got {args.dims}")
    try:
        w, h = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise InputError(f"--size: WIDTHxHEIGHT, e.g. 1280x720, not {args.size!r}") from None
    if w < 200 or h < 150:
        raise InputError(f"--size: at least 200x150, got {args.size!r}")
    budget = kit.budget_arg(args.memory_budget) if args.memory_budget else default_budget()
    loaded = open_model(args)
    layer = args.layer
    try:
        need = estimate_memory(loaded, data, [layer])
    except ValueError as exc:  # an unknown layer
        raise InputError(str(exc)) from None
    progress(need.describe())
    result = scan(
        loaded,
        data,
        [layer],
        batch_size=args.batch_size,
        progress=kit.scan_progress(progress),
        cache=not args.no_cache,
        num_workers=args.workers,
        embeddings=True,
        memory_budget=budget,
    )
    kit.report_scan(result, progress)
    emb = result.embeddings(layer)
    if len(emb) == 0:
        raise InputError(f"layer {layer!r} gave no vector for any image")
    dims = min(args.dims, emb.vectors.shape[1])
    progress(f"projecting {len(emb)} vectors of {emb.vectors.shape[1]} values ({args.method}) ...")
    t0 = time.perf_counter()
    proj = project(emb.vectors, method=args.method, dims=dims, seed=args.seed)
    fit_s = time.perf_counter() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = list(emb.class_names or ())
    labels = emb.labels if emb.labels is not None else np.full(len(emb), -1, dtype=np.int64)
    coords2 = proj.coords if proj.dims >= 2 else np.column_stack([proj.coords[:, 0], labels])
    title = f"{loaded.name}: {layer or '(model)'}, {len(emb)} images, {args.method.upper()}"
    if proj.explained is not None:
        title += f" ({100 * float(proj.explained[:2].sum()):.0f}% of the variance)"
    atlas_image(coords2, labels, names, title=title, size=(w, h)).save(out / "atlas.png")
    np.savez_compressed(
        out / "atlas.npz",
        vectors=emb.vectors,
        coords=proj.coords,
        indices=emb.indices,
        sources=np.array([str(s) for s in emb.sources]),
        labels=labels,
        class_names=np.array(names, dtype=str),
    )
    summary = {
        "model": loaded.name,
        "data": str(data.resolve()),
        "layer": layer,
        "method": args.method,
        "dims": proj.dims,
        "seed": args.seed,
        "images": len(emb),
        "values_per_image": int(emb.vectors.shape[1]),
        "axis": emb.axis,
        "skipped": [{"source": s, "reason": r} for s, r in result.skipped],
        "class_names": names or None,
        "class_counts": (
            {n: int((labels == i).sum()) for i, n in enumerate(names)} if names else None
        ),
        "explained_variance": (
            None if proj.explained is None else [float(v) for v in proj.explained]
        ),
        "fit_s": round(fit_s, 3),
        "memory": need.describe(),
        "from_cache": result.from_cache,
        "cache_path": str(result.cache_path) if result.cache_path else None,
        "files": {"picture": "atlas.png", "arrays": "atlas.npz"},
    }
    (out / "atlas.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(
        f"mapped {len(emb)} images of {layer!r} ({emb.vectors.shape[1]} values each, "
        f"{args.method}); wrote atlas.png, atlas.npz, atlas.json to {args.out}"
    )
    return 0
