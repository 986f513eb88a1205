"""A window's investigation as a :class:`~actviz.workspace.session_file.SessionState`, and back."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from actviz.workspace.session_file import (
    InputSource,
    PinState,
    SessionState,
    input_source_of,
    model_source_of,
    weights_to_keep,
)

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.edit_kinds import Edit
    from actviz.display.prepared import RunResult
    from actviz.ui.host import WindowHost
    from actviz.workspace.session_state import RunRequest, Session


def gather_state(host: WindowHost, *, with_model: bool = True) -> SessionState:
    """What ``host`` shows, as a :class:`SessionState` (``with_model``: the model's source now)."""
    s = host.session
    result = s.result
    pins = tuple(PinState(p.label, float(p.pinned_at), p.result.capture) for p in s.pins)
    parts = dict(host.session_parts())
    view = host.channel_view
    name = getattr(view, "name", "")
    shown = bool(name) and view.isVisibleTo(host.dialog_parent())
    # Every edit of the board (switched off ones too), by layer, in the order made.
    edits: dict[str, list[Edit]] = {}
    for entry in s.edits:
        edits.setdefault(entry.layer, []).append(entry.edit)
    state = SessionState(
        input=None if s.input is None else input_source_of(s.input),
        ticked=tuple(s.ticked),
        target=s.target,
        categories=tuple(s.categories) if s.categories else None,
        colormap=s.colormap,
        normalize=s.normalize,
        gradcam_layer=s.gradcam_layer,
        input_as_list=bool(s.input_as_list),
        channel_pages=dict(s.channel_pages),
        page_channels=dict(s.page_channels),
        channel_view={"layer": str(name), "channel": int(view.channel)} if shown else None,
        edits={layer: tuple(made) for layer, made in edits.items()},
        pins=pins,
        comparison=parts.pop("comparison", None),
        scan_key=parts.pop("scan_key", None),
        layout=host.layout_state(),
        capture=None if result is None else result.capture,
        settings=parts,
    )
    return model_part(state, ModelOpened.of(s)) if with_model else state


@dataclasses.dataclass(frozen=True)
class ModelOpened:
    """How the model was opened, taken on the GUI thread (it may change while a save runs)."""

    loaded: Any
    open_args: Mapping[str, Any]

    @classmethod
    def of(cls, session: Session) -> ModelOpened | None:
        """None for a module given in memory (it has no source to open again)."""
        loaded = session.loaded_model
        if loaded is None or loaded.model is not session.model or loaded.kind == "module":
            return None
        return cls(loaded, dict(session.model_open_args))


def model_part(state: SessionState, opened: ModelOpened | None) -> SessionState:
    """``state`` with how to open the model again (hashes the checkpoint: off the GUI thread)."""
    if opened is None:
        return state
    source = model_source_of(opened.loaded, **open_args(opened.open_args))
    return dataclasses.replace(state, model=source, model_weights=weights_to_keep(opened.loaded))


def open_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """``open_model``'s arch, weights and trust as the session recorded them (defaults filled)."""
    weights = args.get("weights", "DEFAULT")
    return {"arch": args.get("arch"), "weights": weights, "trust": bool(args.get("trust", False))}


def prepare_saved(
    state: SessionState, request: RunRequest
) -> tuple[RunResult | None, list[tuple[PinState, RunResult]]]:
    """The saved and pinned runs' arrays prepared as ``request`` shows them (worker thread)."""
    from actviz.display.prepare import prepare

    spec = request.display_spec()
    result = None if state.capture is None else prepare(state.capture, spec, model=request.model)
    pins = [
        (pin, prepare(pin.capture, spec, model=request.model))
        for pin in state.pins
        if pin.capture is not None
    ]
    return result, pins


def apply_view(host: WindowHost, state: SessionState) -> list[str]:
    """Put ``state``'s input, target, views, pages and edits on the window; lines not restored."""
    s = host.session
    notes: list[str] = []
    inp: InputSource | None = state.input
    if inp is not None:  # its fields are set_input's arguments
        s.set_input(**{f.name: getattr(inp, f.name) for f in dataclasses.fields(inp)})
    try:
        s.set_input_as_list(bool(state.input_as_list))
    except ValueError as exc:  # the input cannot be fed that way to this model
        notes.append(f"input layout not restored: {exc}")
    host.set_view_settings(colormap=state.colormap, normalize=state.normalize)
    if state.gradcam_layer is None or (s.tree is not None and state.gradcam_layer in s.tree):
        s.set_view(gradcam_layer=state.gradcam_layer)
    host.set_target_text("auto" if state.target is None else str(state.target))
    tree = s.tree
    for saved, put in ((state.channel_pages, s.set_channel_page),
                       (state.page_channels, s.set_page_channels)):  # fmt: skip
        for layer, n in saved.items():
            if tree is None or layer in tree:
                put(layer, int(n))
    labels = {id(p.capture): p.label for p in state.pins if p.capture is not None}
    for layer, edits in state.edits.items():
        if tree is not None and layer not in tree:
            notes.append(f"edit on {layer} not restored: the model has no such layer")
            continue
        for edit in edits:
            source = id(getattr(edit, "source", None))  # labels holds no id(None)
            s.edits.add(layer, edit, f"pin {labels[source]}" if source in labels else "")
    return notes


def restore_pins(
    session: Session, pins: Sequence[tuple[PinState, RunResult]], budget: int | None = None
) -> list[str]:
    """Pin the prepared pinned runs again, with their saved labels and times."""
    notes = []
    for state, result in pins:
        try:
            pin = session.pins.pin(result, state.label, budget=budget)
        except ValueError as exc:  # PinRefused: over the memory budget
            notes.append(f"pin {state.label!r} not restored: {exc}")
            continue
        pin.pinned_at = state.pinned_at
    return notes
