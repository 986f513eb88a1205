"""Writing a capture to disk (no Qt): per layer the mosaics, their one-pixel-per-value
``_1x.png`` and the raw ``.npz``; saliency, Grad-CAM and ``summary.json``; two runs' comparison
(:func:`write_comparison`) and the sequence views (:func:`write_sequence_views`). All are drawn
from the window's own preparation, so files show the window's arrays, maps and levels."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from actviz.core.capture import Capture
from actviz.core.compare import Comparison
from actviz.core.structures import shapes
from actviz.core.targets import resolve_target
from actviz.display import colormaps
from actviz.display.attention import capture_attention
from actviz.display.attribution import TokenSaliency, input_embedding, token_input
from actviz.display.difference import DIFFERENCE_CMAP, prediction_change, prepare_difference
from actviz.display.logit_lens import token_texts
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec, PreparedLayer, RunResult
from actviz.display.token_maps import sequence_layout, token_labels
from actviz.io.errors import ActvizError
from actviz.io.export import typeset
from actviz.io.export.reproduce import RunSource, edit_fields, record_arrays, write_reproduce
from actviz.io.export.typeset import heat_png, layer_pictures, safe_name
from actviz.io.files import check_out_folder

ProgressFn = Callable[[int, int, str], None]


def write_pages(out: Path, stem: str, pictures: Sequence[tuple[str, Image.Image]]) -> list[Path]:
    """Save :func:`~actviz.io.export.typeset.layer_pictures` pictures as ``<stem><suffix>.png``."""
    written = []
    for suffix, picture in pictures:
        written.append(out / f"{stem}{suffix}.png")
        picture.save(written[-1])
    return written


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return list(v) if isinstance(v, tuple) else v


def export_capture(
    cap: Capture,
    out_dir: str | Path,
    *,
    model_name: str = "",
    input_name: str = "",
    input_path: str = "",
    frame: int | None = None,
    perturbation: Mapping[str, Any] | None = None,
    layers: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
    source: RunSource | None = None,
    layer_writers: Sequence[Callable[[Path, str, PreparedLayer, DisplaySpec], list[Path]]] = (),
    **display: Any,
) -> list[Path]:
    """Write everything about ``cap`` to ``out_dir``; returns every file written, summary.json last.

    Parameters
    ----------
    model_name, input_name, input_path, frame, perturbation
        Recorded in summary.json (``input_name``: the frame that ran; ``frame`` from 0, None
        outside a sequence).
    source
        How the model and input were opened, for ``reproduce.py``.
    layer_writers
        Plugins' layer views: ``write(out, base, prepared_layer, spec) -> files written``.
    progress
        Called as ``progress(done, total, what)``.
    display
        How to draw (``image``, ``categories``, ``cmap``, ``normalize``, ``gradcam_layer``) and
        the sequence views' inputs, as :func:`prepare_export` takes them."""
    out = check_out_folder(out_dir)
    report = progress or (lambda _done, _total, _what: None)
    names = list(layers) if layers is not None else list(cap.names)
    if missing := [n for n in names if n not in cap.names]:
        # A TorchScript model, a layer that did not run: the capture says why in a warning.
        why = f" ({cap.warnings[0]})" if cap.warnings else ""
        shown = ", ".join(repr(n) for n in missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise ActvizError(f"{shown} {'was' if len(missing) == 1 else 'were'} not captured{why}")
    out.mkdir(parents=True, exist_ok=True)
    cap, prepared = prepare_export(cap, names, **display)
    spec = prepared.spec
    cmap, normalize, image, categories = spec.colormap, spec.normalize, spec.image, spec.categories
    written: list[Path] = []
    layer_summary: dict[str, Any] = {}
    npz_files: dict[str, str] = {}  # for reproduce.py
    total = len(names) + 1
    for i, name in enumerate(names):
        report(i, total, name)
        recs = cap.calls(name)
        rec = recs[0]
        base = safe_name(name)
        entry: dict[str, Any] = {"type": rec.module_type, "calls": len(recs), "files": []}
        layer = prepared.layers.get(name)
        features = layer_pictures(name, "features", layer, rec.grad, cmap, normalize)
        files = write_pages(out, f"{base}_features", features)
        if features:
            entry |= {k: _jsonable(v) for k, v in layer.stats.items() if k not in ("name", "type")}
            for write in layer_writers:
                files += write(out, base, layer, prepared.spec)
        # Painted and scaled as the window paints |gradient| under the same choice.
        grads = layer_pictures(name, "grad", layer, rec.grad, cmap, normalize)
        files += write_pages(out, f"{base}_grad", grads)
        if arrays := record_arrays(recs):
            files.append(out / f"{base}.npz")
            np.savez_compressed(files[-1], **arrays)
            npz_files[name] = files[-1].name
        entry["files"] = [p.name for p in files]
        written += files
        layer_summary[name] = entry
    report(len(names), total, "saliency and Grad-CAM")
    pictures, attribution = typeset.attribution_images(cap, prepared, image, spec.gradcam_layer)
    for key in ("saliency", "gradcam"):
        written += _save_attribution(out, key, pictures, attribution)
    index, kind, label = cap.target_index, prepared.prediction_kind, None
    if index is not None and categories and 0 <= index < len(categories):
        label = str(categories[index])
    elif index is not None and kind == "token":
        label = token_texts(prepared.spec.tokenizer, [index])[0]
    target = {
        "description": cap.target_description,
        "text": prepared.target_text,
        "kind": kind,
        "index": index,
        "label": label,
        "value": _jsonable(cap.target_value),
        "chosen": _how_chosen(cap),
    }
    if (tokens := prepared.token_saliency) is not None:
        shares = tokens.shares()
        rows = [
            {"index": i, "token": t, "saliency": float(tokens.values[i]), "share": float(shares[i])}
            for i, t in enumerate(tokens.tokens)
        ]
        record = {
            "what": "|gradient x input embedding| per token, summed over the embedding dimension",
            "layer": tokens.layer,
            "sample": tokens.sample,
            "target": target["text"],
            "tokens": rows,
        }
        (out / "token_saliency.json").write_text(json.dumps(record, indent=1, ensure_ascii=False))
        with (out / "token_saliency.csv").open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["index", "token", "saliency", "share"])
            writer.writeheader()
            writer.writerows(rows)
        attribution["token_saliency"] = ["token_saliency.json", "token_saliency.csv"]
        written += [out / "token_saliency.json", out / "token_saliency.csv"]
    written += write_reproduce(out, cap, source, names, npz_files)
    sequence_files, sequence_summary = write_sequence_views(prepared, out, names)
    written += sequence_files
    written += _save_attribution(out, "rollout", pictures, attribution)
    if image is not None:
        inp = out / "input.png"
        Image.fromarray(np.ascontiguousarray(image)).save(inp)
        written.append(inp)
    summary = {
        "model": model_name,
        "input": input_name,
        "input_path": input_path,
        "frame": frame,
        "frame_number": frame + 1 if frame is not None else None,
        "perturbation": dict(perturbation or {}),
        "input_shapes": shapes(cap.inputs),
        "output_shapes": shapes(cap.output),
        "target": target,
        "prediction": [
            {"index": i, "label": label, "probability": p} for i, label, p in prepared.predictions
        ],
        # The capture ran with its edits: its prediction (and every map) is the edited run's.
        "prediction_of": "the edited run (the edits listed under 'edits' applied)"
        if cap.edits
        else "the run without edits",
        "edits": [
            {"layer": layer, "edit": e.describe(), **edit_fields(e)}
            for layer, items in cap.edits.items()
            for e in items
        ],
        "layers": layer_summary,
        "attribution": attribution,
        **sequence_summary,
        "warnings": list(cap.warnings),
        "elapsed_s": cap.elapsed_s,
        "files": [p.name for p in written],
    }
    path = out / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=_jsonable))
    written.append(path)
    report(total, total, "done")
    return written


def prepare_export(
    cap: Capture,
    names: Sequence[str],
    *,
    image: np.ndarray | None = None,
    categories: Sequence[str] | None = None,
    cmap: str = colormaps.DEFAULT_ACTIVATION_CMAP,
    normalize: str = "channel",
    gradcam_layer: str | None = None,
    tokens: Sequence[str] | None = None,
    model: Any = None,
    tokenizer: Any = None,
    logit_lens: Any = None,
    layout: Any = None,
    token_saliency: TokenSaliency | None = None,
) -> tuple[Capture, RunResult]:
    """The capture and its preparation (the window's exact path) for export and the report:
    ``image`` the ``(H, W, 3)`` uint8 input for the saliency and Grad-CAM overlays; ``cmap`` and
    ``normalize`` as the window paints ("auto": per layer; |gradient| mosaics share one range);
    ``gradcam_layer`` by default the last captured layer with a spatial output; ``tokens``,
    ``model``, ``tokenizer``, ``logit_lens``, ``layout``, ``token_saliency`` for the sequence
    views (:func:`write_sequence_views`), not recomputed when given. ``ValueError`` for an unknown
    normalisation or colour map."""
    if normalize not in ("channel", "shared"):
        raise ValueError(f"normalize must be 'channel' or 'shared', not {normalize!r}")
    if cmap != colormaps.AUTO and cmap not in colormaps.COLORMAPS:
        raise ValueError(
            f"unknown colour map {cmap!r}; choose from "
            f"{', '.join([colormaps.AUTO, *colormaps.COLORMAPS])}"
        )
    spec = DisplaySpec(
        layers=tuple(names),
        normalize=normalize,
        image=image,
        categories=tuple(categories) if categories else None,
        gradcam_layer=gradcam_layer,
        colormap=cmap,
        tokens=tuple(str(t) for t in tokens) if tokens else None,
        layout=layout or (sequence_layout(model) if model is not None else None),
        tokenizer=tokenizer,
    )
    if model is not None and cap.extra.get("attention") is None:
        if (attention := capture_attention(model, cap.inputs)) is not None:
            cap = replace(cap, extra={**cap.extra, "attention": attention})
    prepared = prepare(cap, spec, eager_hist=(), model=model)
    if prepared.logit_lens is None and logit_lens is not None:
        prepared = replace(prepared, logit_lens=logit_lens)
    if prepared.token_saliency is None and token_saliency is not None:
        prepared = replace(prepared, token_saliency=token_saliency)
    return cap, prepared


def _how_chosen(cap: Capture) -> str:
    if cap.target_value is None:
        return "none"
    if cap.target_description.startswith("custom target"):
        return "custom"
    try:
        default = resolve_target(cap.output, None)
    except (ValueError, TypeError, RuntimeError):
        return "picked"  # the output has no default target, so this one was named
    # "class 7" (named) or "top-1 logit (class 7)" (default): a picked index counts as picked.
    return "top prediction" if default.description == cap.target_description else "picked"


def with_input_embedding(
    model: torch.nn.Module, inputs: Any, layers: Sequence[str] | None
) -> list[str] | None:
    """The layers to capture for an export of ``layers``: for token ids the input embedding first
    (a text input's saliency is read there); otherwise ``layers`` as they are."""
    if layers is None or not token_input(inputs):
        return None if layers is None else list(layers)
    embedding = input_embedding(model)
    return list(layers) if embedding is None or embedding in layers else [embedding, *layers]


def _save_attribution(
    out: Path,
    key: str,
    pictures: Mapping[str, tuple[Image.Image, np.ndarray]],
    attribution: dict[str, Any],
) -> list[Path]:
    if key not in pictures:
        return []
    picture, values = pictures[key]
    path = out / f"{key}.png"
    picture.save(path)
    np.save(out / f"{key}.npy", values)
    attribution[key] = path.name
    return [path, out / f"{key}.npy"]


def write_comparison(
    cap_a: Capture,
    cap_b: Capture,
    out_dir: str | Path,
    *,
    comparison: Comparison,
    normalize: str = "channel",
    categories: Sequence[str] | None = None,
    runs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Path]:
    """Write ``compare.json`` and the difference PNGs (A minus B) of every layer ``comparison``
    compared; ``runs`` (``{"a": {...}, "b": {...}}``) is recorded as is. Returns the files
    written, ``compare.json`` last."""
    if normalize not in ("channel", "shared"):
        raise ValueError(f"normalize must be 'channel' or 'shared', not {normalize!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(d.name for d in comparison.layers))
    spec = DisplaySpec(
        layers=tuple(names),
        normalize=normalize,
        page_channels={n: typeset.EXPORT_PAGE_CHANNELS for n in names},
    )
    prepared = prepare_difference(cap_a, cap_b, spec)
    written: list[Path] = []
    files: dict[str, list[str]] = {}
    for name, layer in prepared.items():
        if layer.view is None:
            continue
        title = f"{name or '(model)'} · {layer.module_type} · A - B"
        # Readable PNGs and the panel's own pixels (_1x), always symmetric about 0 here.
        pictures = layer_pictures(
            name, "features", layer, None, DIFFERENCE_CMAP, normalize, title=title, symmetric=True
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


def write_sequence_views(
    result: RunResult, out: Path, names: Sequence[str]
) -> tuple[list[Path], dict]:
    """The sequence views of ``result`` written into ``out``: ``(files, summary.json entry)``."""
    written: list[Path] = []
    summary: dict[str, Any] = {}
    if tokens := result.spec.tokens:
        summary["tokens"] = list(tokens)
    token_files: dict[str, list[str]] = {}
    for name in names:
        if (view := getattr(result.layers.get(name), "tokens", None)) is None:
            continue
        base = safe_name(name)
        parts = [
            heat_png(view.heat, view.tokens, title=f"{name} · tokens x features", bars=view.norms)
        ]
        arrays = {"heat": view.heat, "norms": view.norms, "tokens": np.asarray(view.tokens)}
        if view.grad_heat is not None:
            how = {"bars": view.grad_norms, "gradient": True, "symmetric": False}
            parts.append(
                heat_png(view.grad_heat, view.tokens, title=f"|d target / d {name}|", **how)
            )
            arrays.update(grad_heat=view.grad_heat, grad_norms=view.grad_norms)
        png = out / f"{base}_tokens.png"
        _grid(parts, columns=1).save(png)  # the two maps have the same rows: one height
        npz = out / f"{base}_tokens.npz"
        np.savez_compressed(npz, **arrays)
        written += [png, npz]
        token_files[name] = [png.name, npz.name]
    if token_files:
        summary["token_layers"] = token_files
    if (attention := result.attention) is not None and attention.layers:
        files = []
        sample = result.spec.sample
        for name in attention.layers:
            heads = attention.heads(name, sample)
            labels = token_labels(heads.shape[-1], tokens, result.spec.layout)
            rows = token_labels(heads.shape[-2], tokens, result.spec.layout)
            maps = [(attention.mean(name, sample), f"mean of {heads.shape[0]} heads")]
            maps += [(h, f"head {i}") for i, h in enumerate(heads)]
            parts = [
                heat_png(
                    heat,
                    rows,
                    cols=labels,
                    title=f"{name} · {what}",
                    symmetric=False,
                    levels=(0.0, float(heat.max()) or 1.0),
                )
                for heat, what in maps
            ]
            png = out / f"attention_{safe_name(name)}.png"
            _grid(parts).save(png)
            written.append(png)
            files.append(png.name)
        npz = out / "attention.npz"
        np.savez_compressed(npz, **{safe_name(n): attention.probs[n] for n in attention.layers})
        written.append(npz)
        summary["attention"] = {"layers": list(attention.layers), "files": [*files, npz.name]}
    if (lens := result.logit_lens) is not None:
        path = out / "logit_lens.json"
        table = {
            "layers": list(lens.layers),
            "tokens": list(lens.tokens) if lens.tokens else None,
            "positions": [
                [
                    {"layer": layer, "top": [{"id": i, "text": t, "p": p} for i, t, p in top]}
                    for layer, top in lens.rows(pos)
                ]
                for pos in range(lens.positions)
            ],
        }
        path.write_text(json.dumps(table, indent=1))
        written.append(path)
        summary["logit_lens"] = path.name
    return written, summary


def _grid(parts: list[Image.Image], columns: int = 4) -> Image.Image:
    size = (max(p.width for p in parts), max(p.height for p in parts))
    return typeset.tile_sheet(parts, size, min(columns, len(parts)), gap=0, margin=0)
