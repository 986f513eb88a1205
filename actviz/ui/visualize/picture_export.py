"""The pictures the window shows, handed out: File > Export visualisations' files and the
report's figures ("What it wants" for the channel shown, the page of "What channels want")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["report_figures", "write_pictures"]


def write_pictures(session: Any, pictures: dict[str, Any], folder: str | Path) -> list[Path]:
    """Write each of ``pictures`` (a sub-folder name: its
    :class:`~actviz.analysis.visualize.visualization.Visualization`, or None) into its
    sub-folder of ``folder``: a PNG per channel, a contact sheet and ``visualize.json`` with
    the settings, ``session``'s model and how to make them again. Returns the files written."""
    from actviz.analysis.visualize.picture_cache import model_fingerprint
    from actviz.analysis.visualize.picture_files import reproduce, write_visualization

    loaded = session.loaded_model
    source = getattr(loaded, "source", None) if loaded is not None else None
    model = session.model
    extra: dict[str, Any] = {
        "model": getattr(loaded, "name", None) or type(model).__name__,
        "source": source,
    }
    if model is not None:
        # Remembered from the cache's look-ups: no second hashing of the weights.
        extra["weights"] = model_fingerprint(model)
    note = ""
    if loaded is not None and source:
        from actviz.io.export.reproduce import run_source

        # Random weights (a torchvision name without weights, model code): reopening the
        # source gives other weights, so its command line would make other pictures.
        if run_source(loaded, None).state is not None:
            note = (
                f"{extra['model']} has random weights: opening {source!r} again gives "
                "other weights and other pictures; the call makes these with these "
                "weights (the fingerprint above)"
            )
            source = None
    files: list[Path] = []
    for sub, vis in pictures.items():
        if vis is not None:
            again = reproduce(vis, source)
            if note:
                again["note"] = note
            files += write_visualization(vis, Path(folder) / sub, {**extra, "reproduce": again})
    return files


def report_figures(shown: Any, page: Any) -> list[tuple[str, Any]]:
    """The report's figures: the channel's picture ``shown`` and the ``page`` as a
    numbered sheet (each None: left out), with their captions."""
    figures = []
    if shown is not None:
        caption = (
            f"What {shown.layer} ch {shown.channels[0]} wants "
            f"({shown.settings['objective']}, {shown.settings['steps']} steps)"
        )
        figures.append((caption, shown.image_uint8(0)))
    if page is not None:
        from actviz.analysis.visualize.picture_files import contact_sheet

        s = page.settings
        caption = (
            f"What {page.layer} ch {page.channels[0]}-{page.channels[-1]} want "
            f"({s['objective']}, {s['steps']} steps)"
        )
        figures.append((caption, contact_sheet(page)))
    return figures
