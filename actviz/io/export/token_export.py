"""Export of the sequence views (token heat maps, attention, rollout, logit lens) from the
window's own prepared result, so files show the window's arrays, maps and levels."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from actviz.display.prepared import RunResult
from actviz.display.token_maps import token_labels
from actviz.io.export.typeset import heat_png, safe_name, tile_sheet


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
        layer = result.layers.get(name)
        view = layer.tokens if layer is not None else None
        if view is None:
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
    if result.logit_lens is not None:
        lens = result.logit_lens
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
    return tile_sheet(parts, size, min(columns, len(parts)), gap=0, margin=0)
