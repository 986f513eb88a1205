"""Writing a comparison of two runs: ``compare.json`` and per layer the difference PNGs of
:func:`actviz.display.difference.prepare_difference` (``_1x``: the window's very pixels)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from actviz.core.compare import Comparison
from actviz.core.records import Capture
from actviz.display.difference import DIFFERENCE_CMAP, prediction_change, prepare_difference
from actviz.display.prepared import DisplaySpec
from actviz.io.export.capture_export import write_pages
from actviz.io.export.typeset import EXPORT_PAGE_CHANNELS, layer_pictures, safe_name


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
        page_channels={n: EXPORT_PAGE_CHANNELS for n in names},
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
