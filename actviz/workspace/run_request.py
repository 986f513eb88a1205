"""A run's request (:class:`RunRequest`, taken on the GUI thread) and its job (:func:`run_job`,
on the worker, never touching the session). An edited run keeps the unedited capture beside it,
so toggling an edit costs one forward and backward. A comparison's job too (:func:`compare_job`:
reads or captures run B and compares; its :class:`CompareOutcome` holds no capture)."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from torch import nn

from actviz.display.attention import attention_modules
from actviz.display.attribution import input_embedding, token_input
from actviz.display.layer_views import magnitude_view
from actviz.display.logit_lens import lens_layers
from actviz.display.mosaic import mosaic
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec, PreparedLayer, RunResult
from actviz.display.token_maps import sequence_layout
from actviz.workspace.edits_board import BaselineCache, BaselineKey
from actviz.workspace.pins import result_bytes

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.capture import Capture

_SEQUENCES: weakref.WeakKeyDictionary[nn.Module, tuple] = weakref.WeakKeyDictionary()
#: Where run B comes from.
PIN, INPUT, MODEL = "pin", "input", "model"


@dataclass
class RunRequest:
    """A snapshot of everything a run needs, taken on the GUI thread. ``layers`` have panels
    (``extra_layers`` are for Grad-CAM only); ``spec`` says how to show them (its ``layers``
    are these); ``baseline_cache`` keeps the unedited capture, reused when every edit is off."""

    model: nn.Module
    inputs: Any
    layers: list[str]
    target: int | None = None
    spec: DisplaySpec = field(default_factory=DisplaySpec)
    extra_layers: list[str] = field(default_factory=list)
    max_bytes: int | None = None
    input_grads: bool = True
    input_as_list: bool = False
    edits: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    baseline_cache: BaselineCache | None = field(default=None, repr=False)
    reuse_baseline: bool = False
    attention: bool = False  #: Record attention probabilities too (a model with attention modules).

    def display_spec(self) -> DisplaySpec:
        """What :func:`actviz.display.prepare.prepare` needs of this request."""
        return dataclasses.replace(self.spec, layers=tuple(self.layers))


def run_job(
    request: RunRequest,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Capture ``request.model`` on ``request.inputs`` and prepare every panel (exact variant), on
    the worker thread; raises what the capture raises."""
    report = progress or (lambda _msg: None)
    report("running forward and backward")
    layers = list(dict.fromkeys([*request.layers, *request.extra_layers]))
    cap, baseline = capture_pair(
        request.model,
        request.inputs,
        layers,
        edits=request.edits,
        cache=request.baseline_cache,
        reuse=request.reuse_baseline,
        target=request.target,
        input_grads=request.input_grads,
        should_stop=should_stop,
        max_bytes=request.max_bytes,
    )
    if request.attention:
        from actviz.core.capture import CaptureTooLarge
        from actviz.display.attention import capture_attention

        report("recording attention")
        try:
            cap.extra["attention"] = capture_attention(
                request.model, request.inputs, should_stop=should_stop, max_bytes=request.max_bytes
            )
        except CaptureTooLarge as exc:  # T x T per head and layer: long sequences grow fast
            cap.warnings.append(f"attention maps skipped: {exc}")
        if request.edits:
            # Attention is read from a second, unfused forward that does not apply the edits.
            cap.warnings.append("attention maps show the unedited model")
    result = prepare(
        cap, request.display_spec(), model=request.model, should_stop=should_stop, progress=progress
    )
    changes: dict[str, Any] = {"baseline": baseline} if baseline is not None else {}
    # The target line of a run held to the unedited top-1 says so.
    index, text = cap.target_index, result.target_text
    if index is not None and request.target is None and text.startswith(f"class {index}"):
        from actviz.core.targets import auto_description

        edited = bool(getattr(cap, "edits", None))
        changes["target_text"] = auto_description(index, edited) + text[len(f"class {index}") :]
    result = dataclasses.replace(result, **changes) if changes else result
    result_bytes(result)  # counted here: on the GUI thread, the memory read-outs' walk took ms
    return result


def request_of(session: Any, *, allow_no_input: bool = False) -> RunRequest:
    """Snapshot ``session`` for a run; RuntimeError without a model, or an input if not live."""
    model, inp = session.model, session.input
    if model is None:
        raise RuntimeError("open a model first")
    if inp is None and not allow_no_input:
        raise RuntimeError("open an input first (an image, a tensor file or a sample)")
    if model not in _SEQUENCES:  # what the model offers the sequence views, found once
        lens = lens_layers(model)
        blocks = lens.blocks if lens is not None else ()
        found = (sequence_layout(model), bool(attention_modules(model)), blocks)
        _SEQUENCES[model] = (*found, input_embedding(model))
    layout, attention, blocks, embedding = _SEQUENCES[model]
    # Only this model's layers: a name left from the model before can never reach a run.
    layers = [n for n in session.ticked if n in session.tree]
    extra = [session.gradcam_layer] if session.gradcam_layer not in ("", None, *layers) else []
    # The lens's blocks, and for token ids the embedding's output: one (N, T, D) record, where
    # an export or the Overview finds the saliency.
    sequence = [b for b in blocks if b not in layers]
    if embedding not in (None, *layers, *sequence) and token_input(getattr(inp, "value", None)):
        sequence.insert(0, embedding)
    extra += [n for n in sequence if n not in extra]
    spec = DisplaySpec(
        layers=tuple(layers),
        normalize=session.normalize,
        image=inp.image if inp is not None else None,
        categories=tuple(session.categories) if session.categories else None,
        gradcam_layer=session.gradcam_layer,
        channel_pages=dict(session.channel_pages),
        page_channels=dict(session.page_channels),
        channel_orders=dict(session.channel_orders),
        page_width=session.mosaic_width,
        colormap=session.colormap,
        tokens=inp.tokens if inp is not None else None,
        layout=layout,
        tokenizer=getattr(session.loaded_model, "tokenizer", None),
    )
    return RunRequest(
        model=model,
        inputs=inp.value if inp is not None else None,
        layers=layers,
        # None stays None: capture_pair holds an edited run to its unedited twin's top-1.
        target=session.target,
        spec=spec,
        extra_layers=extra,
        max_bytes=session.memory_budget,
        input_grads=session.saliency_wanted,
        input_as_list=session.input_as_list,
        edits=session.edits.request_edits(),
        baseline_cache=session.baseline,
        reuse_baseline=len(session.edits) > 0,
        attention=attention,
    )


def capture_pair(
    model: Any,
    inputs: Any,
    layers: Sequence[str],
    *,
    edits: Mapping[str, Sequence[Any]] | None,
    cache: BaselineCache | None,
    reuse: bool = True,
    target: Any = None,
    input_grads: bool = True,
    **options: Any,
) -> tuple[Capture, Capture | None]:
    """``(capture, unedited)``: the capture with ``edits`` applied and the unedited one (None
    without edits; cached with ``reuse``); a ``target`` of None is the unedited top-1. ``options``
    (``should_stop``, ``max_bytes``) go to both captures."""
    from actviz.core.capture import capture

    def run(with_edits: Mapping[str, Sequence[Any]] | None, target: Any = target) -> Capture:
        return capture(
            model,
            inputs,
            list(layers),
            target=target,
            input_grads=input_grads,
            edits=dict(with_edits) if with_edits else None,
            **options,
        )

    def unedited() -> Capture:
        cap = run(None)
        if cache is not None:
            cache.put(key, cap)
        return cap

    key = BaselineKey(model, inputs, tuple(layers), target, bool(input_grads))
    baseline = cache.get(key) if cache is not None else None
    if not edits:
        if baseline is None or not reuse:
            baseline = unedited()
        return baseline, None
    if target is None:
        # Held to the unedited top-1, so an edit that makes another class lead keeps the target.
        if baseline is None:
            baseline = unedited()
        from actviz.core.targets import fixed_default

        return run(edits, fixed_default(baseline.output)), baseline
    # The edited capture first: a bad edit fails before the unedited forward is spent.
    return run(edits), unedited() if baseline is None else baseline


class LayersMismatch(ValueError):
    """Run B is not run A's architecture: it lacks its layers or has other modules there."""


@dataclass
class CompareRequest:
    """Everything a comparison needs, taken on the GUI thread. ``mode`` is :data:`PIN` (``cap_b``
    the pinned capture), :data:`INPUT` (``model`` on ``input_source``) or :data:`MODEL` (the
    second ``model`` on ``inputs``); ``max_bytes`` bounds run B's capture."""

    cap_a: Any
    mode: str
    spec: DisplaySpec
    cap_b: Any = None
    model: nn.Module | None = None
    input_source: str = ""
    input_loader: Callable[..., Any] | None = None
    loaded_model: Any = None
    input_as_list: bool = False
    inputs: Any = None
    categories: Sequence[str] | None = None
    target: int | None = None
    max_bytes: int | None = None


@dataclass(frozen=True)
class CompareOutcome:
    """A finished comparison: ``differences`` A - B per layer by depth, ``nbytes`` B's capture's."""

    comparison: Any
    differences: Mapping[str, PreparedLayer]
    predictions: Any
    input_description: str = ""
    nbytes: int = 0
    warnings: tuple[str, ...] = field(default=())

    @property
    def held_bytes(self) -> int:
        """Bytes the pictures of this comparison hold (views and mosaics; no capture)."""
        total = 0
        for layer in self.differences.values():
            for view in (layer.view, layer.grad_view):  # a magnitude not read yet holds none
                data = vars(view).get("data") if view is not None else None
                total += int(data.nbytes) if data is not None else 0
            total += sum(m.nbytes for m in (layer.mosaic, layer.grad_mosaic) if m is not None)
        return total


def layer_mismatch(cap_a: Any, model: nn.Module, layers: Sequence[str]) -> str:
    """Why ``model`` cannot be compared with run A layer by layer ("" when it can): each of
    ``layers`` must be in ``model`` as a module of the class run A recorded."""
    modules = dict(model.named_modules())
    missing = [n for n in layers if n not in modules]
    other = [
        f"{n} ({type(modules[n]).__name__}, not {cap_a[n].module_type})"
        for n in layers
        if n in modules and n in cap_a and type(modules[n]).__name__ != cap_a[n].module_type
    ]
    if not missing and not other:
        return ""

    def listed(items: list[str], most: int) -> str:
        return ", ".join(items[:most]) + (f" and {len(items) - most} more" if items[most:] else "")

    parts = [f"it has no {listed([repr(n) for n in missing], 5)}"] if missing else []
    parts += [f"other modules under {listed(other, 3)}"] if other else []
    return (
        f"Model B is not the architecture of run A: {'; '.join(parts)}. "
        "Open a checkpoint of the same architecture."
    )


def compare_job(
    request: CompareRequest,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CompareOutcome:
    """Read or capture run B, compare it with run A, prepare the differences (worker thread);
    :class:`LayersMismatch` when B has none of A's layers."""
    from actviz.core.compare import compare
    from actviz.display.difference import prediction_change, prepare_difference

    report = progress or (lambda _msg: None)
    cap_a = request.cap_a
    layers = list(cap_a.names)
    if request.mode == PIN:
        cap_b, description = request.cap_b, ""
    else:
        cap_b, description = _capture_b(request, layers, should_stop, report)
    common = [n for n in layers if n in cap_b]
    if not common:
        raise LayersMismatch(
            "Runs A and B have no layer in common: tick the same layers and run again."
        )
    report("comparing")
    # The layers shown, not every record (a text model's run records its embedding too).
    shown = [n for n in request.spec.layers if n in common]
    comparison = compare(cap_a, cap_b, layers=shown or None)
    if not comparison.layers:
        reasons = "; ".join(f"{n or '(model)'}: {why}" for n, _k, why in comparison.skipped[:3])
        raise LayersMismatch(f"No layer of runs A and B could be compared ({reasons}).")
    report("preparing the differences")
    differences = prepare_difference(cap_a, cap_b, request.spec, layers=shown)
    predictions = prediction_change(
        cap_a.output,
        cap_b.output,
        categories=request.categories,
        target=request.target,
        sample=request.spec.sample,
        tokenizer=getattr(request.spec, "tokenizer", None),  # a language model's tokens
    )
    return CompareOutcome(
        comparison=comparison,
        differences={n: with_magnitude(differences[n]) for n in shown if n in differences},
        predictions=predictions,
        input_description=description,
        nbytes=int(getattr(cap_b, "nbytes", 0)),
        warnings=tuple(getattr(cap_b, "warnings", ()) or ()),
    )


def with_magnitude(layer: PreparedLayer) -> PreparedLayer:
    """``layer`` (a difference) with ``|A - B|`` where a panel shows the gradient magnitude:
    where the runs differ, whatever the sign; it pages with the difference."""
    view, m = layer.view, layer.mosaic
    if view is None or m is None or view.kind != "maps":
        return layer
    grad_mosaic = mosaic(
        view.data,
        absolute=True,
        normalize=m.normalize,
        first_channel=m.first_channel,
        max_channels=m.page_size,
    )
    return replace(layer, grad_view=magnitude_view(view), grad_mosaic=grad_mosaic)


def _capture_b(
    request: CompareRequest,
    layers: list[str],
    should_stop: Callable[[], bool] | None,
    report: Callable[[str], None],
) -> tuple[Any, str]:
    from actviz.core.capture import capture

    if (model := request.model) is None:
        raise ValueError("no model to run for B")
    description, inputs = "", request.inputs
    if request.mode == INPUT:
        if request.input_loader is None:
            raise ValueError("no input loader")
        report(f"opening {request.input_source}")
        loaded = request.input_loader(
            request.input_source, model=model, loaded_model=request.loaded_model
        )
        inputs = loaded.value
        description = getattr(loaded, "description", "") or request.input_source
        if request.input_as_list:
            from actviz.core.input_copies import list_layout

            inputs = list_layout(inputs, True)
    elif mismatch := layer_mismatch(request.cap_a, model, layers):
        raise LayersMismatch(mismatch)
    report("running B (forward only)")
    # Only the values are compared: no backward, no layer inputs kept.
    cap_b = capture(
        model,
        inputs,
        layers,
        gradients=False,
        keep_inputs=False,
        max_bytes=request.max_bytes,
        should_stop=should_stop,
    )
    return cap_b, description
