"""What sessions (folders, names, shown) and reports (tiles, names) keep of the dictionaries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def session_part(session: Any) -> dict[str, Any]:
    """``{"concepts": {layer: {folder, names, shown, data}}}`` of saved dictionaries, or {}."""
    saved = {layer: att.to_json() for layer, att in session.concepts.items() if att.folder}
    return {"concepts": saved} if saved else {}


def restore_session_part(session: Any, parts: Any) -> list[str]:
    """Attach a session's dictionaries again (detaching others); what could not be restored."""
    from actviz.analysis.concepts.dictionary import load
    from actviz.workspace.attached_concepts import AttachedConcepts

    saved = parts.get("concepts") or {}
    for layer in list(session.concepts):
        if layer not in saved:
            session.set_concepts(layer, None)
    notes = []
    tree = session.tree
    for layer, entry in saved.items() if isinstance(saved, dict) else ():
        folder = str((entry or {}).get("folder", ""))
        if tree is None or layer not in tree:
            notes.append(f"concepts of {layer}: no such layer")
            continue
        try:
            concepts = load(folder)
        except (OSError, ValueError) as exc:
            notes.append(f"concepts of {layer} not restored: {exc}")
            continue
        names = {int(k): str(v) for k, v in (entry.get("names") or {}).items()}
        att = AttachedConcepts(
            concepts, folder, names, bool(entry.get("shown", True)), None,
            str(entry.get("data", "")),
        )  # fmt: skip
        session.set_concepts(layer, att)
    return notes


def report_part(
    session: Any, tiles: Mapping[str, Any], panels: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Each layer's concept ``tiles``, its dictionary and named concepts, for the report; a
    text model's layer as its panel in ``panels`` shows it (tokens x concepts), labelled."""
    from actviz.analysis.concepts.tiles import concept_label
    from actviz.display.colormaps import colorize
    from actviz.io.export.typeset import heat_png

    figures = []
    for layer, att in session.concepts.items():
        shown = tiles.get(layer)
        if shown is None:
            continue
        c = att.concepts
        fvu = f", held-out FVU {c.heldout_fvu:.3f}" if c.heldout_fvu is not None else ""
        k = f", k = {c.k}" if c.k is not None else ""
        top = ", ".join(concept_label(i, att.names) for i in shown.mosaic.tile_channels[:8])
        caption = (
            f"Concepts of {layer}: {c.d_sae} concepts ({c.architecture}{k}{fvu}) from "
            f"{att.folder or 'memory'}; {shown.active} fire on this input, most active: {top}"
        )
        view = getattr((panels or {}).get(layer), "token_view", None)
        if view is not None and view.columns is not None:  # 1 x T strips would not read
            cols = [str(c) for c in view.columns or ()]
            title = f"{layer} · tokens x concepts"
            picture = heat_png(view.heat, view.tokens, title=title, cols=cols, bars=view.norms)
            figures.append((caption, np.asarray(picture.convert("RGB"))))
            continue
        figures.append((caption, colorize(shown.mosaic.image)))
    return {"figures": figures} if figures else {}
