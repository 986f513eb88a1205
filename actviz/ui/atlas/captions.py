"""The Atlas tab's texts, plain functions of the fitted map (a dot, the map, the selection)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from actviz.data.atlas_map import NO_ATLAS_NOTE
from actviz.ui.atlas.view import EMPTY_TEXT

__all__ = [
    "colour_caption",
    "describe_row",
    "map_summary",
    "no_map_text",
    "selection_text",
    "separating_texts",
]


def describe_row(atlas: Any, row: int, categories: Any, *, thumbnail: str | None = None) -> str:
    """HTML naming row ``row``'s image: file, class, prediction (``thumbnail``: the URI of a
    picture above it)."""
    emb = atlas.embeddings
    path = str(emb.sources[row])
    lines = [f"<b>{html.escape(Path(path).name)}</b>", html.escape(path)]
    if emb.labels is not None and emb.class_names and emb.labels[row] >= 0:
        lines.append(f"class: {html.escape(emb.class_names[int(emb.labels[row])])}")
    if atlas.predictions is not None and atlas.predictions[row] >= 0:
        p = int(atlas.predictions[row])
        name = categories[p] if categories and p < len(categories) else str(p)
        lines.append(f"prediction: {html.escape(name)}")
    head = f'<img src="{html.escape(thumbnail)}"><br>' if thumbnail else ""
    return head + "<br>".join(lines)


def map_summary(atlas: Any) -> str:
    """``layer4: 400 images (PCA) · axes explain 31% of the variance``."""
    p = atlas.projection
    share = ""
    if p.explained is not None:
        share = f" · axes explain {100 * float(np.sum(p.explained)):.0f}% of the variance"
    scan = atlas.scan
    total = len(scan.sources) - len(scan.skipped)
    # A cancelled scan's map is of the images scanned so far: said.
    images = f"{len(atlas.coords):,} image{'' if len(atlas.coords) == 1 else 's'}"
    if int(scan.count) < total:
        images = f"{len(atlas.coords):,} of {total:,} images, a partial scan"
    if p.fitted_on is not None:  # a million points: UMAP fitted on a sample
        share += f" · fitted on {p.fitted_on:,} sampled points, the others placed by the fit"
    return f"{atlas.layer}: {images} ({p.method.upper()}){share}"


def selection_text(atlas: Any, rows: np.ndarray) -> str:
    """``Selection: 12 of 400 images · cat 9, dog 3`` (its three largest classes)."""
    if not len(rows):
        return "Selection: none"
    emb = atlas.embeddings
    text = f"Selection: {len(rows):,} of {len(atlas.coords):,} images"
    if emb.labels is not None and emb.class_names:
        labels = np.asarray(emb.labels)[rows]
        labels = labels[(labels >= 0) & (labels < len(emb.class_names))]
        counts = np.bincount(labels, minlength=len(emb.class_names))
        top = [int(c) for c in np.argsort(-counts, kind="stable")[:3] if counts[c] > 0]
        if top:
            text += " · " + ", ".join(f"{emb.class_names[c]} {counts[c]}" for c in top)
            others = len(np.flatnonzero(counts)) - len(top)
            text += f", +{others} classes" if others > 0 else ""
    return text


def separating_texts(split: Any, layer: str) -> tuple[str, str]:
    """A separating channel's line in the list and its tooltip."""
    text = f"ch {split.channel}: d {split.score:+.2f} ({split.mean_in:.3g} vs {split.mean_out:.3g})"
    tip = (
        f"Channel {split.channel} of {layer}: mean {split.mean_in:.4g} in the "
        f"selection, {split.mean_out:.4g} outside; d = the difference over the pooled "
        "standard deviation. Click: its channel view"
    )
    return text, tip


def colour_caption(mode: str, channel: int) -> str:
    """What the map is coloured by, for a report's caption."""
    if mode == "Channel":
        return f"channel {channel}'s mean activation"
    return {"Correct": "correctness"}.get(mode, mode.lower())


def no_map_text(scan: Any) -> str:
    """Why the tab has no map of ``scan`` (None: nothing scanned yet)."""
    if scan is None:
        return EMPTY_TEXT
    # A scan whose embeddings were over the memory budget says so.
    for note in getattr(scan, "warnings", ()) or ():
        if str(note).startswith(NO_ATLAS_NOTE):
            return str(note)
    return "The scan has no embeddings: scan the dataset again (Data > Scan a dataset…)"
