"""A run's request and its job: :class:`RunRequest` (taken on the GUI thread by
:func:`request_of`) and :func:`run_job` (capture and prepare on the worker, never touching the
session again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch import nn

from actviz.display.colormaps import AUTO
from actviz.display.mosaic import ChannelOrder
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec, RunResult
from actviz.workspace.edit_runs import capture_pair
from actviz.workspace.edits_board import BaselineCache


@dataclass
class RunRequest:
    """A snapshot of everything a run needs, taken on the GUI thread.

    ``layers`` have panels (``extra_layers`` are for Grad-CAM only); ``channel_pages``,
    ``page_channels``, ``channel_orders``, ``colormap`` and ``sample`` are as in
    :class:`~actviz.display.prepared.DisplaySpec`. ``input_grads`` False stops the backward at
    the earliest layer (no saliency). ``edits`` apply during the forward; ``baseline_cache``
    keeps the unedited capture, shown again with ``reuse_baseline`` when every edit is off.
    """

    model: nn.Module
    inputs: Any
    layers: list[str]
    target: int | None = None
    normalize: str = "channel"
    extra_layers: list[str] = field(default_factory=list)
    image: np.ndarray | None = None
    categories: list[str] | None = None
    gradcam_layer: str | None = None
    max_bytes: int | None = None
    channel_pages: dict[str, int] = field(default_factory=dict)
    sample: int = 0
    input_grads: bool = True
    input_as_list: bool = False
    page_channels: dict[str, int] = field(default_factory=dict)
    channel_orders: dict[str, ChannelOrder] = field(default_factory=dict)
    colormap: str = AUTO
    edits: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    baseline_cache: BaselineCache | None = field(default=None, repr=False)
    reuse_baseline: bool = False
    #: Token strings of a text input, a ViT's patch layout, the tokenizer (token views, lens).
    tokens: tuple[str, ...] | None = None
    layout: Any = None
    tokenizer: Any = None
    #: Record attention probabilities too (a model with attention modules).
    attention: bool = False

    def display_spec(self) -> DisplaySpec:
        """What :func:`actviz.display.prepare.prepare` needs of this request."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(DisplaySpec)}
        values = {k: dict(v) if isinstance(v, dict) else v for k, v in values.items()}
        categories = tuple(self.categories) if self.categories else None
        return DisplaySpec(**values | {"layers": tuple(self.layers), "categories": categories})


def run_job(
    request: RunRequest,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Capture ``request.model`` on ``request.inputs`` and prepare every panel (exact variant), on
    the worker thread; raises what the capture raises.
    """
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
    changes: dict[str, Any] = {}
    if baseline is not None:
        changes["baseline"] = baseline
    auto = _auto_target_text(request, cap, result.target_text)
    if auto is not None:
        changes["target_text"] = auto
    return dataclasses.replace(result, **changes) if changes else result


def _auto_target_text(request: RunRequest, cap: Any, text: str) -> str | None:
    """The target line of an edited run held to the unedited top-1; None to keep ``text``."""
    from actviz.core.targets import auto_description

    index = cap.target_index
    if index is None or request.target is not None:
        return None
    plain = f"class {index}"
    if not text.startswith(plain):
        return None
    edited = bool(getattr(cap, "edits", None))
    return auto_description(index, edited) + text[len(plain) :]


def request_of(session: Any, *, allow_no_input: bool = False) -> RunRequest:
    """Snapshot ``session`` for a run (:meth:`Session.make_request
    <actviz.workspace.session_state.Session.make_request>`); RuntimeError without a model, or
    without an input unless ``allow_no_input`` (live mode).
    """
    if session.model is None:
        raise RuntimeError("open a model first")
    if session.input is None and not allow_no_input:
        raise RuntimeError("open an input first (an image, a tensor file or a sample)")
    # Only this model's layers: a name left from the model before can never reach a run.
    layers = [n for n in session.ticked if n in session.tree]
    extra = []
    if session.gradcam_layer and session.gradcam_layer not in layers:
        extra.append(session.gradcam_layer)
    from actviz.workspace.token_inputs import sequence_request

    sequence = sequence_request(session, layers)
    extra += [n for n in sequence.pop("extra_layers") if n not in layers and n not in extra]
    return RunRequest(
        model=session.model,
        inputs=session.input.value if session.input is not None else None,
        layers=layers,
        # None (auto) stays None: an edited run holds it to its unedited twin's top-1
        # (capture_pair), the very class of the session's ``auto_target``, and the unedited capture
        # kept for edits stays the one made before them.
        target=session.target,
        normalize=session.normalize,
        extra_layers=extra,
        image=session.input.image if session.input is not None else None,
        categories=session.categories,
        gradcam_layer=session.gradcam_layer,
        max_bytes=session.memory_budget,
        channel_pages=dict(session.channel_pages),
        page_channels=dict(session.page_channels),
        channel_orders=dict(session.channel_orders),
        colormap=session.colormap,
        input_grads=session.saliency_wanted,
        input_as_list=session.input_as_list,
        edits=session.edits.request_edits(),
        baseline_cache=session.baseline,
        reuse_baseline=len(session.edits) > 0,
        **sequence,
    )
