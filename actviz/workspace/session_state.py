"""The explorer's state, without widgets: model, input, ticked layers, target, view settings.
The window is a thin layer over one :class:`Session`: widgets change it, it announces changes
through :class:`Event` callbacks, and :func:`run_job` captures a :class:`RunRequest` snapshot.
How feature maps are shown is its :class:`DisplaySettings`, reset with the model."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from actviz.core.tree import ModuleTree, default_layers, module_tree
from actviz.display.colormaps import AUTO
from actviz.display.mosaic import ChannelOrder, page_start
from actviz.display.prepared import RunResult
from actviz.workspace.budget import default_budget
from actviz.workspace.edits_board import BaselineCache, EditBoard
from actviz.workspace.pins import PinBoard
from actviz.workspace.run_request import RunRequest, request_of
from actviz.workspace.run_request import run_job as run_job
from actviz.workspace.session_codec import InputSource, input_source_of

if TYPE_CHECKING:  # pragma: no cover
    from actviz.data.scan_result import Scan
    from actviz.io.input_tensors import LoadedInput
    from actviz.io.models.loaded_model import LoadedModel
    from actviz.workspace.attached_concepts import AttachedConcepts


class Event:
    """A minimal callback list: ``connect(fn)``, ``disconnect(fn)``, ``emit(*args)``."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[..., Any]] = []

    def connect(self, callback: Callable[..., Any]) -> None:
        if callback not in self._callbacks:
            self._callbacks.append(callback)

    def disconnect(self, callback: Callable[..., Any]) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, *args: Any) -> None:
        for callback in list(self._callbacks):
            callback(*args)


def describe_value(value: Any, tokens: tuple[str, ...] | None) -> str:
    """The Model dock's caption for an input made in memory: ``tensor (1, 3, 16, 16) float32``,
    ``5 tokens: [CLS] the cat …``, ``dict: input_ids (1, 5) int64, …`` or ""."""

    def one(t: Any) -> str:
        return f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"

    if isinstance(value, torch.Tensor):
        return f"tensor {one(value)}"
    if tokens:
        shown = " ".join(tokens[:8]) + (" …" if len(tokens) > 8 else "")
        return f"{len(tokens)} tokens: {shown}"
    if isinstance(value, dict):
        parts = [f"{k} {one(v)}" for k, v in value.items() if isinstance(v, torch.Tensor)]
        return f"dict: {', '.join(parts)}" if parts else ""
    if isinstance(value, (tuple, list)):
        parts = [one(v) for v in value if isinstance(v, torch.Tensor)]
        return f"{type(value).__name__}: {', '.join(parts)}" if parts else ""
    return ""


class DisplaySettings:
    """The display settings of a :class:`Session` (one of its bases); its ``view_changed(what)``
    announces each change, with ``what`` the name of the setting."""

    view_changed: Event

    def __init__(self) -> None:
        self.colormap = AUTO  #: The colour-map choice of the feature maps ("auto": one per layer).
        self.normalize = "channel"
        self.gradcam_layer: str | None = None
        # {layer: first channel} of the mosaic page the user turned to; cleared with the model.
        self.channel_pages: dict[str, int] = {}
        # {layer: channels per page}: the window's choice from its panels' widths.
        self.page_channels: dict[str, int] = {}
        #: ``{layer: ChannelOrder}``: tile orders of their own (by effect); cleared with the model.
        self.channel_orders: dict[str, ChannelOrder] = {}
        #: The panels' mosaic width: a run pages the layers without a page size for it.
        self.mosaic_width = 0

    def reset_for_model(self, gradcam_layer: str | None) -> None:
        """Forget the old model's pages, sizes and orders; take ``gradcam_layer`` (unannounced)."""
        self.gradcam_layer = gradcam_layer
        self.channel_pages, self.page_channels, self.channel_orders = {}, {}, {}

    def set_view(
        self,
        *,
        colormap: str | None = None,
        normalize: str | None = None,
        gradcam_layer: str | None | type[Ellipsis] = ...,
    ) -> None:
        """Change view settings (None / ``...`` leaves one as it is); announce each change."""
        asked = {"colormap": colormap, "normalize": normalize, "gradcam_layer": gradcam_layer}
        unset = {"colormap": None, "normalize": None, "gradcam_layer": ...}
        changed = [k for k, v in asked.items() if v is not unset[k] and v != getattr(self, k)]
        for what in changed:
            setattr(self, what, asked[what])
        for what in changed:
            self.view_changed.emit(what)

    def _put(self, what: str, layer: str, value: Any) -> None:
        """Set ``layer``'s entry of the setting ``what`` (None: remove it); announce a change."""
        held = getattr(self, what)
        if value is None:
            if held.pop(layer, None) is None:
                return
        elif held.get(layer) == value:
            return
        else:
            held[layer] = value
        self.view_changed.emit(what)

    def set_channel_page(self, layer: str, first: int) -> None:
        """Show the mosaic page of ``layer`` that starts at channel ``first``."""
        self._put("channel_pages", layer, first)

    def set_channel_order(self, layer: str, order: ChannelOrder | None) -> None:
        """Tile ``layer``'s channels in ``order`` (None: the natural order) and announce it.
        The page shown is the one holding the channel ``channel_pages[layer]`` names."""
        self._put("channel_orders", layer, order)

    def page_start(self, layer: str, size: int) -> int:
        """Where the page of ``size`` channels shown of ``layer`` starts: a channel, or a
        position in its channel order (:func:`~actviz.display.mosaic.page_start`)."""
        return page_start(self.channel_pages.get(layer, 0), size, self.channel_orders.get(layer))

    def set_page_channels(self, layer: str, count: int) -> None:
        """Channels per mosaic page of ``layer`` (the window's choice from the panel width)."""
        self._put("page_channels", layer, count)

    def set_mosaic_width(self, width: int) -> None:
        """The panels' mosaic width, for the next runs' new layers; unannounced: no view shows it."""
        self.mosaic_width = max(0, int(width))


class TargetChoice:
    """The chosen target and the auto target of a :class:`Session` (one of its bases: its
    ``result``, ``categories`` and ``loaded_model`` check a target, ``target_changed`` says one)."""

    target_changed: Event
    result: RunResult | None
    categories: list[str] | None
    loaded_model: LoadedModel | None

    def __init__(self) -> None:
        self.target: int | None = None
        #: The unedited run's top-1, held till model, input or target change (edits do not move it).
        self.auto_target: int | None = None

    def set_target(self, target: int | None) -> None:
        """Make ``target`` the target (None: auto, the unedited run's top-1)."""
        if target != self.target:
            self.target, self.auto_target = target, None
            self.target_changed.emit()

    @property
    def run_target(self) -> int | None:
        """The target views and runs use: the chosen one, else :attr:`auto_target`."""
        return self.target if self.target is not None else self.auto_target

    def hold_auto_target(self, result: Any) -> None:
        """Hold the top-1 of ``result``'s unedited capture as the auto target, if none is held."""
        if result is None or self.target is not None or self.auto_target is not None:
            return
        if getattr(result, "origin", None) is not None:
            return  # a live frame: another input
        from actviz.core.targets import fixed_default

        clean = result.baseline
        if clean is None and not getattr(result.capture, "edits", None):
            clean = result.capture
        if clean is not None:
            self.auto_target = fixed_default(clean.output)

    def set_target_text(self, text: str) -> int | None:
        """Parse ``text`` (:func:`actviz.core.targets.parse_target`) and make it the target."""
        from actviz.core.targets import check_target, parse_target

        # A language model's tokenizer reads a token's text as its id.
        tokenizer = getattr(self.loaded_model, "tokenizer", None)
        categories, result = self.categories, self.result
        target = parse_target(text, categories, tokenizer)
        if target is not None and target < 0:
            raise ValueError(f"class {target} is out of range: classes are numbered from 0")
        # The rule a run applies, now rather than then: against the last output, else the class
        # count (the class names', else the tokenizer's).
        if target is not None and result is not None and result.capture is not None:
            check_target(target, result.capture.output)
        elif target is not None and (categories or tokenizer is not None):
            check_target(target, len(categories) if categories else len(tokenizer))
        self.set_target(target)
        return target


class Session(DisplaySettings, TargetChoice):
    """Pure-Python explorer state shared by the window, the tree model and the worker; outside
    :mod:`actviz.workspace` it changes only through the setters, each change announced on the
    GUI thread: ``model_changed``, ``input_changed``, ``ticks_changed(names)``, ``target_changed``,
    ``result_changed``, ``pins_changed``, ``edits_changed``, ``view_changed(what)``,
    ``scan_changed``, ``concepts_changed(layer)``."""

    def __init__(self) -> None:
        self.model: nn.Module | None = None
        self.model_name = self.model_source = self.model_kind = ""
        self.categories: list[str] | None = None
        self.transforms: Callable[..., Any] | None = None
        self.input_size: tuple[int, int] | None = None
        self.model_warnings: list[str] = []
        self.loaded_model: LoadedModel | None = None
        #: ``open_model``'s arch, weights and trust for :attr:`loaded_model` (reproduce.py).
        self.model_open_args: dict[str, Any] = {}
        self.tree: ModuleTree | None = None
        self.input: InputSource | None = None
        # Bytes one capture may hold (a bigger selection is refused); ACTVIZ_MEMORY_BUDGET.
        self.memory_budget: int | None = default_budget()
        self.result: RunResult | None = None
        #: Feed the input to the model as one list of images (detection models' forward).
        self.input_as_list = False
        #: Whether a saliency view is on screen: without one, runs skip the input gradient.
        self.saliency_wanted = True
        self._ticked: set[str] = set()
        self.model_changed, self.input_changed, self.ticks_changed = Event(), Event(), Event()
        self.target_changed, self.result_changed, self.pins_changed = Event(), Event(), Event()
        self.pins = PinBoard(self.pins_changed.emit)
        self.edits_changed, self.view_changed = Event(), Event()
        DisplaySettings.__init__(self)  # colour map, normalisation, pages (``view_changed``)
        TargetChoice.__init__(self)  # the target chosen, or the auto one held
        #: The user's edits (actviz.workspace.edits_board); runs apply the ones switched on.
        self.edits = EditBoard(self.edits_changed.emit)
        #: The unedited capture of the current input, kept while there are edits.
        self.baseline = BaselineCache()
        #: The model's last finished dataset scan, read by the dataset's views (the atlas).
        self.scan: Scan | None = None
        self.scan_changed = Event()
        #: ``{layer: AttachedConcepts}``: dictionaries attached to layers; dropped with the model.
        self.concepts: dict[str, AttachedConcepts] = {}
        #: ``concepts_changed(layer)``: ``layer``'s dictionary was attached, changed or removed.
        self.concepts_changed = Event()

    def set_scan(self, scan: Scan | None) -> None:
        """Make ``scan`` the session's dataset scan (None: none) and announce it."""
        self.scan = scan
        self.scan_changed.emit()

    def set_concepts(self, layer: str, attached: AttachedConcepts | None) -> None:
        """Attach ``attached`` to ``layer`` (None: detach) and announce it."""
        if attached is None:
            if self.concepts.pop(layer, None) is None:
                return
        else:
            self.concepts[layer] = attached
        self.concepts_changed.emit(layer)

    def set_model(
        self,
        model: nn.Module,
        *,
        name: str | None = None,
        source: str = "",
        kind: str = "module",
        categories: Sequence[str] | None = None,
        transforms: Callable[..., Any] | None = None,
        input_size: tuple[int, int] | None = None,
        warnings: Iterable[str] = (),
        ticks: Iterable[str] | None = None,
        gradcam_layer: str | None = None,
        loaded: LoadedModel | None = None,
    ) -> None:
        """Make ``model`` current; ticks default to :func:`default_layers`. A model whose
        ``forward`` takes a list of images (torchvision's detectors) gets the input as a list."""
        from actviz.core.input_copies import forward_takes_list

        self.model, self.model_name = model, name or type(model).__name__
        self.model_source, self.model_kind = source, kind
        self.categories = list(categories) if categories else None
        self.transforms, self.input_size = transforms, input_size
        self.model_warnings = list(warnings)
        self.loaded_model, self.model_open_args = loaded, {}
        self.tree, self.result = module_tree(model), None
        self.pins.clear()  # captures of another model: their panels would not match the tree
        self.baseline.clear()
        # Edits name the old model's layers: they go, and only this model's are taken.
        self.edits.reset(model, self.tree)
        self.target = self.auto_target = None
        self.reset_for_model(gradcam_layer if gradcam_layer in self.tree else None)
        dropped, self.concepts = list(self.concepts), {}  # they read this model's layers
        for layer in dropped:
            self.concepts_changed.emit(layer)
        if ticks is None:
            # TorchScript layers run in compiled code no hook reaches: ticks would show nothing.
            scripted = isinstance(model, torch.jit.ScriptModule)
            self._ticked = set() if scripted else set(default_layers(self.tree))
        else:
            from actviz.core.capture import resolve_layers

            self._ticked = set(resolve_layers(model, list(ticks)))  # ValueError with suggestions
        was_list, self.input_as_list = self.input_as_list, forward_takes_list(model)
        self._fit_input_layout(undo=was_list and not self.input_as_list)
        self.model_changed.emit()

    def set_loaded_model(self, loaded: LoadedModel, **kwargs: Any) -> None:
        same = ("name", "kind", "categories", "transforms", "input_size", "warnings")
        adopted = {k: getattr(loaded, k) for k in same}
        self.set_model(loaded.model, source=str(loaded.source), loaded=loaded, **adopted, **kwargs)

    def set_model_open_args(self, args: Mapping[str, Any]) -> None:
        """How :attr:`loaded_model` was opened (``open_model``'s arch, weights and trust)."""
        weights, trust = args.get("weights", "DEFAULT"), bool(args.get("trust", False))
        self.model_open_args = {"arch": args.get("arch"), "weights": weights, "trust": trust}

    def run_source(self, input_named: bool = False) -> Any:
        """How ``reproduce.py`` opens the model shown again (None: one given in memory), with
        the input by its source when ``input_named`` and it has one (else its saved tensors)."""
        if (loaded := self.loaded_model) is None:
            return None
        from actviz.io.export.reproduce import run_source

        source = self.input.source if input_named and self.input is not None else None
        args = dict(list_input=self.input_as_list, target=self.run_target)
        return run_source(loaded, source or None, **self.model_open_args, **args)

    def set_categories(self, names: Sequence[str] | None) -> None:
        """Name the model's classes (None: unnamed); the next run's views show them."""
        self.categories = list(names) if names else None

    def set_memory_budget(self, nbytes: int | None) -> None:
        """The bytes one capture may hold (None: no limit)."""
        self.memory_budget = None if nbytes is None else int(nbytes)

    def set_saliency_wanted(self, wanted: bool) -> None:
        """Whether a saliency view is on screen (without one, runs skip the input gradient)."""
        self.saliency_wanted = bool(wanted)

    def set_input(
        self,
        value: Any,
        *,
        source: str = "",
        kind: str = "tensor",
        image: np.ndarray | None = None,
        description: str = "",
        tokens: Sequence[str] | None = None,
    ) -> None:
        """Make ``value`` (a tensor, a tuple or a dict of tensors) the current input."""
        tokens = tuple(str(t) for t in tokens) if tokens else None
        description = description or describe_value(value, tokens)
        self.input = InputSource(value, source, kind, image, description, tokens)
        self.auto_target = None  # another input: its own top-1
        self._fit_input_layout()
        self.input_changed.emit()

    def set_input_as_list(self, as_list: bool) -> None:
        """Feed the input as one list of images (True) or as one batch tensor (False); a list for a
        model whose forward takes a batch is refused (``ValueError``): every run would fail."""
        if as_list == self.input_as_list:
            return
        if as_list and self.model is not None:
            from actviz.core.input_copies import forward_takes_list
            from actviz.io.input_files import expected_input

            if not forward_takes_list(self.model) and expected_input(self.model).channels:
                raise ValueError(
                    f"{self.model_name or 'this model'} takes a batch tensor, not a list of "
                    "images (its forward is not annotated with a list)"
                )
        self.input_as_list = as_list
        if self._fit_input_layout(undo=not as_list):
            self.input_changed.emit()

    def _fit_input_layout(self, undo: bool = False) -> bool:
        """Give a list-taking model its batch as a list of images (``undo``: stack it back);
        tuples and dicts are never touched. True if the input changed."""
        from actviz.core.input_copies import list_layout

        value = self.input.value if self.input is not None else None
        as_list = self.input_as_list and isinstance(value, torch.Tensor)
        if not as_list and not (undo and isinstance(value, list)):
            return False
        if (new := list_layout(value, as_list)) is value:
            return False
        self.input = dataclasses.replace(self.input, value=new)  # type: ignore[arg-type]
        return True

    def set_loaded_input(self, loaded: LoadedInput) -> None:
        self.set_input(**vars(input_source_of(loaded)))

    @property
    def input_path(self) -> Path | None:
        """The input's file, when it came from one (used to re-open it for a new model)."""
        if self.input is None or not self.input.source:
            return None
        path = Path(self.input.source)
        return path if path.is_file() else None

    @property
    def ticked(self) -> list[str]:
        """Ticked layer names in module-tree order."""
        if self.tree is None:
            return sorted(self._ticked)
        return [node.name for node in self.tree.nodes if node.name in self._ticked]

    def is_ticked(self, name: str) -> bool:
        return name in self._ticked

    def set_ticked(self, names: Iterable[str], ticked: bool = True) -> None:
        """Tick (or untick) ``names``; emits ``ticks_changed`` with the names that changed."""
        names = set(names)
        self.replace_ticked(self._ticked | names if ticked else self._ticked - names)

    def replace_ticked(self, names: Iterable[str]) -> None:
        """Make exactly ``names`` ticked; emits ``ticks_changed`` with the names that changed."""
        names = set(names)
        changed = names ^ self._ticked
        self._ticked = names
        if changed:
            self.ticks_changed.emit(changed)

    def tick_leaves_below(self, name: str) -> None:
        """Tick every leaf under ``name`` (``name`` itself when it is a leaf)."""
        if self.tree is not None:
            self.set_ticked(self.tree.descendants(name, leaves_only=True) or [name], True)

    def tick_type(self, type_name: str) -> None:
        """Tick every module of class ``type_name``."""
        if self.tree is not None:
            self.set_ticked(self.tree.names_of_type(type_name), True)

    def untick_all(self) -> None:
        self.replace_ticked(())

    def can_run(self) -> bool:
        return self.model is not None and self.input is not None

    def input_problem(self, source: str | None = None) -> str:
        """Why the input cannot run on the current model ("" when it can): the one gate for runs,
        live frames, exports, reports, effects and scans; a model given in memory is not checked."""
        from actviz.io.input_files import input_misfit, reads_text

        if self.model is None:
            return "Open a model first."
        loaded = self.loaded_model
        if source in ("frames", "images"):  # pictures made with the model's own transforms
            if loaded is None or not reads_text(loaded):
                return ""
            if source == "frames":
                return f"The frames are pictures; {self.model_name} reads text."
            return (
                f"{self.model_name} reads text, not images: scans and concept training run a "
                "folder of images through the model. Open an image model for them."
            )
        if self.input is None:
            return "Open an input first (an image, a tensor file or a sample)."
        if loaded is None:
            return ""
        inp = self.input
        if (why := input_misfit(loaded, inp.value, inp.source or "", model=self.model)) is None:
            return ""
        return f"The input does not fit {loaded.name} ({why}): open another input (Ctrl+I)."

    def make_request(self, *, allow_no_input: bool = False) -> RunRequest:
        """Snapshot the state for a run (:func:`~actviz.workspace.run_request.request_of`)."""
        return request_of(self, allow_no_input=allow_no_input)

    def set_result(self, result: RunResult | None) -> None:
        self.hold_auto_target(result)
        self.result = result
        self.result_changed.emit()

    def held_bytes(self) -> int:
        """Bytes held by the shown and pinned results plus the unedited capture kept for edits."""
        held = self.pins.held_bytes(self.result)
        baseline = self.baseline.held
        counted = (self.result.capture, self.result.baseline) if self.result is not None else ()
        if baseline is not None and not any(baseline is c for c in counted):
            held += baseline.held_bytes()
        return held
