"""What a comparison asks for (run B as chosen in the tab) and what the tab says of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actviz.core.capture import format_bytes
from actviz.display.colormaps import AUTO
from actviz.display.prepared import DisplaySpec
from actviz.ui.background_loads import short_source
from actviz.workspace.compare_job import INPUT, MODEL, PIN, CompareOutcome, CompareRequest

__all__ = ["describe_outcome", "request_for", "restore_setup", "setup_of"]


def request_for(
    session: Any,
    source: str,
    *,
    pin_index: int,
    input_text: str,
    input_loader: Callable[..., Any],
    model_b: Any,
    pages: Mapping[str, int],
    page_sizes: Mapping[str, int],
) -> tuple[CompareRequest, str]:
    """The comparison of the session's latest run (A) with run B, and B's label; ValueError
    when run B cannot be had."""
    s = session
    result = s.result
    assert result is not None and result.capture is not None
    cap_a = result.capture
    spec = result.spec
    spec = DisplaySpec(
        layers=tuple(n for n in result.shown if n in cap_a),
        # One scale per layer: per-channel scales would blow float noise up to full colour.
        normalize="shared",
        sample=spec.sample,
        categories=spec.categories,
        channel_pages=dict(pages),
        page_channels=dict(page_sizes),
        colormap=AUTO,
    )
    common = dict(
        cap_a=cap_a,
        spec=spec,
        categories=list(spec.categories) if spec.categories else s.categories,
        target=result.target_index,
        max_bytes=s.memory_budget,
        input_as_list=s.input_as_list,
    )
    if source == PIN:
        pins = list(s.pins)
        if not pins:  # unpinned while the comparison waited for the run before it
            raise ValueError("The pinned result was unpinned: pin a result to compare with.")
        pin = pins[min(max(pin_index, 0), len(pins) - 1)]
        if pin.result.capture is None:
            raise ValueError(f"The pinned result {pin.label} holds no capture to compare.")
        return CompareRequest(mode=PIN, cap_b=pin.result.capture, **common), f"pinned {pin.label}"
    if source == INPUT:
        request = CompareRequest(
            mode=INPUT,
            model=s.model,
            input_source=input_text,
            input_loader=input_loader,
            loaded_model=s.loaded_model,
            **common,
        )
        return request, f"input {short_source(input_text)}"
    inputs = cap_a.inputs if cap_a.inputs is not None else s.input.value if s.input else None
    if inputs is None:
        raise ValueError("Run A kept no input to run model B on: run the model again.")
    request = CompareRequest(mode=MODEL, model=model_b.model, inputs=inputs, **common)
    return request, f"model {model_b.name}"


def describe_outcome(outcome: CompareOutcome, label_b: str) -> str:
    """The tab's line on a comparison: runs, first divergence, output, memory, warnings."""
    comparison = outcome.comparison
    first = comparison.first_divergence
    parts = [f"A: the latest run · B: {label_b}", f"{len(comparison.layers)} layer(s) compared"]
    if first is None:
        parts.append(f"no layer differs beyond rel L2 {comparison.tol:g}")
    else:
        parts.append(f"first divergence: {first.name or '(model)'} (rel L2 {first.rel_l2:.3g})")
    if comparison.output is not None:
        out = comparison.output
        parts.append(f"output: cosine {out.cosine:.4g}, rel L2 {out.rel_l2:.3g}")
    if comparison.skipped:
        parts.append(f"{len(comparison.skipped)} layer call(s) not comparable (shapes)")
    if outcome.input_description:
        parts.append(f"input B: {outcome.input_description}")
    parts.append(
        f"B's capture took {format_bytes(outcome.nbytes)} (freed), the differences "
        f"hold {format_bytes(outcome.held_bytes)}"
    )
    text = " · ".join(parts)
    if outcome.warnings:
        text += "\n" + " ".join(outcome.warnings)
    return text


def setup_of(view: Any, pins: Sequence[Any], model_b: Any) -> dict[str, Any]:
    """The comparison set-up a session file keeps: run A is the latest run; run B is a pin
    (its label), an input (its source) or a second model (its source)."""
    setup: dict[str, Any] = {"a": "current", "mode": view.source}
    pins = list(pins)
    if view.source == PIN and pins:
        setup["b"] = pins[min(max(view.pin_combo.currentIndex(), 0), len(pins) - 1)].label
    elif view.source == INPUT:
        setup["b"] = view.input_combo.currentText().strip()
    elif view.source == MODEL and model_b is not None:
        setup["b"] = str(model_b.source)
    return setup


def restore_setup(
    view: Any, setup: Mapping[str, Any], pins: Sequence[Any], model_b: Any
) -> int | None:
    """Choose run B in ``view`` as ``setup`` (:func:`setup_of`) says; nothing runs, a second
    model is only named (to be opened again). Returns the pin to choose, if one."""
    mode, b = setup.get("mode"), setup.get("b")
    if mode not in (PIN, INPUT, MODEL):
        return None
    view.set_source(mode)
    labels = [p.label for p in pins]
    if mode == PIN and b in labels:
        return labels.index(b)
    if mode == INPUT and b:
        view.input_combo.setEditText(str(b))
    elif mode == MODEL and b and model_b is None:
        view.set_model_text(f"the session compared with {b}: open model B again")
    return None
