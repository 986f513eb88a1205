"""The explorer's state, without widgets: model, input, ticked layers, target, view settings.

The window is a thin layer over one :class:`Session`: widgets change the session, the session
announces changes through plain-Python :class:`Event` objects (like napari's components), and
:func:`run_job` captures a :class:`RunRequest` snapshot and hands it to the one preparation path,
:func:`actviz.display.prepare.prepare`. ``run_job`` is what the worker thread executes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from actviz.display.colormaps import AUTO
from actviz.display.mosaic import ChannelOrder, page_start
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec, RunResult
from actviz.workspace.budget import default_budget
from actviz.workspace.edits_board import BaselineCache, EditBoard
from actviz.workspace.pins import PinBoard

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.tree import ModuleTree

log = logging.getLogger(__name__)

#: Default ticks are capped at this many layers so the first run stays quick to look at.
DEFAULT_TICK_LIMIT = 8
#: Generic containers: their outputs are their last child's output, so they are walked through.
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
#: A text model's default ticks are every block (spread over this many when there are more).
DEFAULT_BLOCK_LIMIT = 48


class Event:
    """A minimal callback list: ``connect(fn)``, ``disconnect(fn)``, ``emit(*args)``."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[..., Any]] = []

    def connect(self, callback: Callable[..., Any]) -> None:
        if callback not in self._callbacks:
            self._callbacks.append(callback)

    def disconnect(self, callback: Callable[..., Any] | None = None) -> None:
        if callback is None:
            self._callbacks.clear()
        elif callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, *args: Any) -> None:
        for callback in list(self._callbacks):
            callback(*args)


# --------------------------------------------------------------------------------------------
# Run request and prepared result (numpy only past this point)
# --------------------------------------------------------------------------------------------


@dataclass
class RunRequest:
    """A snapshot of everything a run needs, taken on the GUI thread.

    Attributes
    ----------
    layers
        Layers with a panel (the ticked ones), in module-tree order.
    extra_layers
        Layers captured only for Grad-CAM (not shown as panels).
    channel_pages
        ``{layer: first channel}`` of the mosaic page shown, for layers with more channels
        than one mosaic holds (:data:`MAX_MOSAIC_CHANNELS`); absent layers show page 0.
    sample
        The batch element the pictures show (see :class:`~actviz.display.prepared.DisplaySpec`).
    page_channels
        ``{layer: channels per mosaic page}``, chosen by the window from its panels' widths.
    channel_orders
        ``{layer: ChannelOrder}``: layers whose tiles are in an order of their own (sorted
        by effect); ``channel_pages`` then names a channel of the page in that order.
    colormap
        The colour-map choice ("auto" makes signed mosaics symmetric about 0).
    input_grads
        Differentiate back to the input (for saliency); False stops the backward at the
        earliest captured layer (``capture(input_grads=False)``), as when no saliency is shown.
    input_as_list
        The model takes its images as one list (live frames are converted to it).
    edits
        ``{layer: (Edit, ...)}`` applied during the forward (``capture(edits=)``; the
        window's Edits dock, live frames too).
    baseline_cache
        Where the unedited capture of the latest input is kept (the session's); an edited
        run's result carries it as ``baseline`` (before/after, differences).
    reuse_baseline
        Without edits switched on, show the cached unedited capture instead of a new one
        (the user has edits, all off: the run seen before them, exactly).
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

    def first_channel(self, name: str) -> int:
        """The first channel of layer ``name``'s mosaic page (0 unless the user paged)."""
        return self.display_spec().first_channel(name)

    def display_spec(self) -> DisplaySpec:
        """What :func:`actviz.display.prepare.prepare` needs of this request."""
        return DisplaySpec(
            layers=tuple(self.layers),
            normalize=self.normalize,
            image=self.image,
            categories=tuple(self.categories) if self.categories else None,
            gradcam_layer=self.gradcam_layer,
            channel_pages=dict(self.channel_pages),
            sample=self.sample,
            page_channels=dict(self.page_channels),
            channel_orders=dict(self.channel_orders),
            colormap=self.colormap,
            tokens=self.tokens,
            layout=self.layout,
            tokenizer=self.tokenizer,
        )


def run_job(
    request: RunRequest,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Capture ``request.model`` on ``request.inputs`` and prepare every panel's arrays
    (the exact variant of :func:`actviz.display.prepare.prepare`).

    Runs on the worker thread. Raises the model's own exceptions, ``CaptureCancelled`` when
    ``should_stop()`` turns True, and ``ValueError`` for bad layer names or targets.
    """
    from actviz.core.capture import capture

    report = progress or (lambda _msg: None)
    report("running forward and backward")
    layers = list(dict.fromkeys([*request.layers, *request.extra_layers]))
    baseline = None
    if request.edits or request.baseline_cache is not None:
        from actviz.workspace.edit_runs import capture_pair

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
    else:
        cap = capture(
            request.model,
            request.inputs,
            layers,
            target=request.target,
            should_stop=should_stop,
            max_bytes=request.max_bytes,
            input_grads=request.input_grads,
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
    """The result's target line when an edited run's auto target is held to the unedited
    top-1 class (:func:`~actviz.workspace.edit_runs.capture_pair`): ``top-1 logit before the
    edits (class 4): star`` rather than ``class 4: star``, which reads as a class the user
    chose; None to keep ``text``."""
    from actviz.core.targets import auto_description

    index = cap.target_index
    if index is None or request.target is not None:
        return None
    plain = f"class {index}"
    if not text.startswith(plain):
        return None
    edited = bool(getattr(cap, "edits", None))
    return auto_description(index, edited) + text[len(plain) :]


# --------------------------------------------------------------------------------------------
# Targets and default layers
# --------------------------------------------------------------------------------------------


def default_layers(tree: ModuleTree, limit: int = DEFAULT_TICK_LIMIT) -> list[str]:
    """A few interesting layers to tick on a fresh model: each block's output, plus the head.

    Blocks are the non-container modules with children found by walking through
    ``Sequential``/``ModuleList``/``ModuleDict`` (ResNet's ``BasicBlock``, the demo's
    ``ConvBlock``). Models made only of leaves get their leaves (convolutions first when
    there are many). At most ``limit`` names, spread evenly, the last leaf always kept.

    A model in one wrapper (fewer than two such blocks) gets the blocks of its outermost
    ``ModuleList`` (a Hugging Face ViT's ``vit.encoder.layer.N``) when it has two or more.
    A text model (its first module an embedding table) gets every transformer block's output
    instead (:func:`_text_blocks`: ``transformer.h.N``, ``encoder.layer.N``,
    ``model.layers.N``), up to :data:`DEFAULT_BLOCK_LIMIT`, plus the head.
    """
    text_blocks = _text_blocks(tree)
    if text_blocks:
        head = tree.leaves()[-1]
        picks = [b for b in text_blocks if b != head]
        return _in_tree_order(tree, _spread(picks, DEFAULT_BLOCK_LIMIT) + [head])
    # Containers are walked through; any other module with children is a block.
    blocks = _walk_blocks(tree, lambda node: None if node.type_name in _CONTAINERS else [node.name])
    leaves = tree.leaves()
    if not leaves or leaves == [""]:
        return [""] if "" in tree else []
    head = leaves[-1]
    if len(blocks) < 2:
        # One wrapper with all inside (a Hugging Face image model's ``vit``): its list of
        # blocks, rather than its first convolution (``vit.embeddings...projection``).
        listed = _listed_blocks(tree)
        blocks = listed if len(listed) >= 2 else blocks
    if len(blocks) > limit - 1:
        # Too many blocks (ResNet's 8 BasicBlocks): show the stages that group them instead.
        parents = list(dict.fromkeys(tree[b].parent or "" for b in blocks))
        if len(parents) >= 2 and "" not in parents:
            blocks = parents
    if len(blocks) >= 2:
        picks = blocks
    else:
        picks = [n for n in leaves if "Conv" in tree[n].type_name] if len(leaves) > limit else []
        picks = picks or leaves
    picks = [p for p in picks if p != head]
    return _in_tree_order(tree, _spread(picks, limit - 1) + [head])


def _in_tree_order(tree: ModuleTree, names: list[str]) -> list[str]:
    """``names`` without repeats in tree order, so panels appear top to bottom as the data
    flows."""
    order = {node.name: i for i, node in enumerate(tree.nodes)}
    return sorted(dict.fromkeys(names), key=order.__getitem__)


def _walk_blocks(tree: ModuleTree, pick: Callable[[Any], list[str] | None]) -> list[str]:
    """The names ``pick(node)`` gives for the modules with children, from the root down:
    a list (maybe empty) is taken and that module's children are not walked, None walks
    into them."""
    blocks: list[str] = []

    def walk(name: str) -> None:
        for child in tree[name].children:
            node = tree[child]
            if node.is_leaf:
                continue
            found = pick(node)
            if found is None:
                walk(child)
            else:
                blocks.extend(found)

    walk("")
    return blocks


def _text_blocks(tree: ModuleTree) -> list[str]:
    """The blocks of a text model: the children of its outermost lists of blocks
    (``transformer.h``, ``encoder.layer``; an encoder-decoder's two), when its first module
    is an embedding table (token ids come in); [] for any other model. Lists inside a block
    (a mixture of experts) are parts of it, not blocks."""
    leaves = tree.leaves()
    if not leaves or leaves == [""] or "Embedding" not in tree[leaves[0]].type_name:
        return []
    return _listed_blocks(tree)


def _listed_blocks(tree: ModuleTree) -> list[str]:
    """The children with children of the outermost ``ModuleList``s (a transformer's
    ``encoder.layer``, a Hugging Face CNN's ``encoder.stages``)."""

    def pick(node: Any) -> list[str] | None:
        inner = [c for c in node.children if not tree[c].is_leaf]
        return inner if node.type_name == "ModuleList" and inner else None

    return _walk_blocks(tree, pick)


def _spread(items: list[str], n: int) -> list[str]:
    if n <= 0:
        return []
    if len(items) <= n:
        return list(items)
    step = (len(items) - 1) / max(n - 1, 1)
    return [items[round(i * step)] for i in range(n)]


# --------------------------------------------------------------------------------------------
# Session
# --------------------------------------------------------------------------------------------


@dataclass
class InputState:
    """The current input: what goes into the model and how to show it."""

    value: Any
    source: str
    kind: str
    image: np.ndarray | None
    description: str
    #: The token strings of a text input (token views' labels).
    tokens: tuple[str, ...] | None = None


class Session:
    """Pure-Python explorer state shared by the window, the tree model and the worker.

    Events (plain callbacks, emitted on the thread that changes the session, i.e. the GUI):
    ``model_changed()``, ``input_changed()``, ``ticks_changed(names: set[str])``,
    ``target_changed()``, ``result_changed()``, ``pins_changed()``, ``edits_changed()``,
    ``view_changed(what: str)`` (``"colormap"``, ``"normalize"``, ``"gradcam_layer"``,
    ``"channel_pages"``, ``"page_channels"``, ``"channel_orders"``), ``scan_changed()``,
    ``concepts_changed(layer: str)``.

    Every piece of state the display depends on changes through a setter here and is
    announced, so whatever shows it (panels, live mode, exports, a saved session) hears of it.
    """

    def __init__(self) -> None:
        self.model: nn.Module | None = None
        self.model_name = ""
        self.model_source = ""
        self.model_kind = ""
        self.categories: list[str] | None = None
        self.transforms: Any = None
        self.input_size: Any = None
        self.model_warnings: list[str] = []
        self.loaded_model: Any = None
        #: ``open_model``'s arch, weights and trust for :attr:`loaded_model` (reproduce.py).
        self.model_open_args: dict[str, Any] = {}
        self.tree: ModuleTree | None = None
        self.input: InputState | None = None
        self.target: int | None = None
        #: The auto target held for this investigation: the unedited run's top-1 class
        #: (:func:`~actviz.core.targets.fixed_default`), set by the first clean result with no
        #: target chosen, dropped when the model, the input or the target changes. Without it
        #: an edit that makes another class lead moved every view's target with it.
        self.auto_target: int | None = None
        self.normalize = "channel"
        # Bytes one capture may hold; a bigger selection is refused with a message (the live
        # dock edits it; ACTVIZ_MEMORY_BUDGET sets the default).
        self.memory_budget: int | None = default_budget()
        self.gradcam_layer: str | None = None
        # {layer: first channel} of the mosaic page the user turned to (layers with more
        # channels than one mosaic shows); kept across runs, cleared with the model.
        self.channel_pages: dict[str, int] = {}
        # {layer: channels per page}: the window's choice from its panels' widths.
        self.page_channels: dict[str, int] = {}
        #: ``{layer: ChannelOrder}``: layers whose tiles follow an order of their own (sorted
        #: by effect); cleared with the model.
        self.channel_orders: dict[str, ChannelOrder] = {}
        #: The colour-map choice of the feature maps ("auto": one per layer).
        self.colormap = AUTO
        self.result: RunResult | None = None
        #: Feed the input to the model as one list of images (detection models' forward).
        self.input_as_list = False
        #: Whether a saliency view is on screen: without one, runs skip the input gradient.
        self.saliency_wanted = True
        self._ticked: set[str] = set()
        self.model_changed = Event()
        self.input_changed = Event()
        self.ticks_changed = Event()
        self.target_changed = Event()
        self.result_changed = Event()
        self.pins_changed = Event()
        # Results the user keeps beside the latest one (see actviz.workspace.pins).
        self.pins = PinBoard(self.pins_changed.emit)
        self.edits_changed = Event()
        self.view_changed = Event()
        #: The user's edits (actviz.workspace.edits_board); runs apply the ones switched on.
        self.edits = EditBoard(self._on_edits_changed)
        #: The unedited capture of the current input, kept while there are edits.
        self.baseline = BaselineCache()
        #: The last finished dataset scan of the model (:class:`~actviz.data.scan_result.Scan`),
        #: or None; set by whatever runs scans, read by the views of the dataset (the atlas).
        self.scan: Any = None
        #: ``scan_changed()``: :attr:`scan` was replaced (or dropped with the model).
        self.scan_changed = Event()
        #: ``{layer: AttachedConcepts}``: dictionaries attached to layers (trained or opened;
        #: :mod:`actviz.workspace.attached_concepts`); dropped with the model.
        self.concepts: dict[str, Any] = {}
        #: ``concepts_changed(layer: str)``: the dictionary of ``layer`` was attached, changed
        #: (names, shown) or removed.
        self.concepts_changed = Event()

    # -- dataset scan ------------------------------------------------------------------------
    def set_scan(self, scan: Any) -> None:
        """Make ``scan`` the session's dataset scan (None: none) and announce it."""
        self.scan = scan
        self.scan_changed.emit()

    # -- concepts ----------------------------------------------------------------------------
    def set_concepts(self, layer: str, attached: Any) -> None:
        """Attach ``attached`` (an :class:`~actviz.workspace.attached_concepts.AttachedConcepts`) to
        ``layer`` (None: detach) and announce it."""
        if attached is None:
            if self.concepts.pop(layer, None) is None:
                return
        else:
            self.concepts[layer] = attached
        self.concepts_changed.emit(layer)

    # -- model -------------------------------------------------------------------------------
    def set_model(
        self,
        model: nn.Module,
        *,
        name: str | None = None,
        source: str = "",
        kind: str = "module",
        categories: Sequence[str] | None = None,
        transforms: Any = None,
        input_size: Any = None,
        warnings: Iterable[str] = (),
        ticks: Iterable[str] | None = None,
        gradcam_layer: str | None = None,
        loaded: Any = None,
    ) -> None:
        """Make ``model`` current; ticks default to :func:`default_layers`.

        A model whose ``forward`` takes a list of images (torchvision's detectors) gets the
        input as a list (:attr:`input_as_list`; :meth:`set_input_as_list` changes it).
        """
        from actviz.core.input_copies import forward_takes_list
        from actviz.core.tree import module_tree

        self.model = model
        self.model_name = name or type(model).__name__
        self.model_source = source
        self.model_kind = kind
        self.categories = list(categories) if categories else None
        self.transforms = transforms
        self.input_size = input_size
        self.model_warnings = list(warnings)
        self.loaded_model = loaded
        self.model_open_args = {}
        self.tree = module_tree(model)
        self.result = None
        self.pins.clear()  # captures of another model: their panels would not match the tree
        self.baseline.clear()
        self.edits.clear()  # edits name this model's layers
        self.target = None
        self.auto_target = None
        self.gradcam_layer = gradcam_layer if gradcam_layer in self.tree else None
        self.channel_pages = {}
        self.page_channels = {}
        self.channel_orders = {}
        dropped, self.concepts = list(self.concepts), {}  # they read this model's layers
        for layer in dropped:
            self.concepts_changed.emit(layer)
        if ticks is None:
            # A TorchScript model's layers run inside compiled code where no hook reaches:
            # ticks would promise panels a run cannot fill ("5 layer(s)" and nothing shown).
            scripted = isinstance(model, torch.jit.ScriptModule)
            self._ticked = set() if scripted else set(default_layers(self.tree))
        else:
            ticks = list(ticks)
            unknown = [t for t in ticks if t not in self.tree]
            if unknown:
                from actviz.core.capture import resolve_layers

                resolve_layers(model, unknown)  # raises ValueError with suggestions
            self._ticked = set(ticks)
        was_list, self.input_as_list = self.input_as_list, forward_takes_list(model)
        self._fit_input_layout(undo=was_list and not self.input_as_list)
        self.model_changed.emit()

    def set_loaded_model(self, loaded: Any, **kwargs: Any) -> None:
        """Adopt an :class:`actviz.io.models.loaded_model.LoadedModel`."""
        self.set_model(
            loaded.model,
            name=loaded.name,
            source=str(loaded.source),
            kind=loaded.kind,
            categories=loaded.categories,
            transforms=loaded.transforms,
            input_size=loaded.input_size,
            warnings=loaded.warnings,
            loaded=loaded,
            **kwargs,
        )

    # -- input -------------------------------------------------------------------------------
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
        if description == "":
            description = _describe_value(value, tokens)
        self.input = InputState(value, source, kind, image, description, tokens)
        self.auto_target = None  # another input: its own top-1
        self._fit_input_layout()
        self.input_changed.emit()

    def set_input_as_list(self, as_list: bool) -> None:
        """Feed the input as one list of images (True) or as one batch tensor (False).

        Raises
        ------
        ValueError
            A list for a model whose forward takes a batch (a convolution first and no
            ``list`` annotation): every run would fail, so it is refused here.
        """
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
        """Give a list-taking model its batch tensor as a list of images (``undo``: stack such
        a list back into a batch). Tuples and dicts (positional and keyword inputs) are never
        touched. True if the input changed."""
        from actviz.core.input_copies import list_layout

        value = self.input.value if self.input is not None else None
        if self.input_as_list and isinstance(value, torch.Tensor):
            new = list_layout(value, True)
        elif undo and isinstance(value, list):
            new = list_layout(value, False)
        else:
            return False
        if new is value:
            return False
        self.input = dataclasses.replace(self.input, value=new)  # type: ignore[arg-type]
        return True

    def set_loaded_input(self, loaded: Any) -> None:
        """Adopt an :class:`actviz.io.input_files.LoadedInput`."""
        self.set_input(
            loaded.value,
            source=str(loaded.source),
            kind=loaded.kind,
            image=loaded.image,
            description=loaded.description,
            tokens=getattr(loaded, "tokens", None),
        )

    @property
    def input_path(self) -> Path | None:
        """The input's file, when it came from one (used to re-open it for a new model)."""
        if self.input is None or not self.input.source:
            return None
        path = Path(self.input.source)
        return path if path.is_file() else None

    # -- ticks -------------------------------------------------------------------------------
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
        before = set(self._ticked)
        if ticked:
            self._ticked |= names
        else:
            self._ticked -= names
        changed = before ^ self._ticked
        if changed:
            self.ticks_changed.emit(changed)

    def replace_ticked(self, names: Iterable[str]) -> None:
        """Make exactly ``names`` ticked."""
        names = set(names)
        changed = names ^ self._ticked
        self._ticked = names
        if changed:
            self.ticks_changed.emit(changed)

    def tick_leaves_below(self, name: str) -> None:
        """Tick every leaf under ``name`` (``name`` itself when it is a leaf)."""
        if self.tree is None:
            return
        below = self.tree.descendants(name, leaves_only=True) or [name]
        self.set_ticked(below, True)

    def tick_type(self, type_name: str) -> None:
        """Tick every module of class ``type_name``."""
        if self.tree is not None:
            self.set_ticked(self.tree.names_of_type(type_name), True)

    def untick_all(self) -> None:
        self.replace_ticked(())

    # -- target ------------------------------------------------------------------------------
    def set_target(self, target: int | None) -> None:
        """Make ``target`` the target (None: auto, the unedited run's top-1)."""
        if target != self.target:
            self.target = target
            self.auto_target = None
            self.target_changed.emit()

    @property
    def run_target(self) -> int | None:
        """The target every view names and every run uses: the one chosen, else the auto
        target held for this input (:attr:`auto_target`; None before a clean run)."""
        return self.target if self.target is not None else self.auto_target

    def _hold_auto_target(self, result: RunResult | None) -> None:
        """Hold the auto target to the top-1 of ``result``'s unedited capture (the first one
        after the model, the input or the target changed)."""
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
        target = parse_target(text, self.categories, tokenizer)
        if target is not None and target < 0:
            raise ValueError(f"class {target} is out of range: classes are numbered from 0")
        reference = self._target_reference()
        if target is not None and reference is not None:
            check_target(target, reference)  # the rule a run applies, now rather than then
        self.set_target(target)
        return target

    def _target_reference(self) -> Any:
        """What a target is checked against: the last output, else the number of classes or
        tokens known from the model (None: nothing is known yet)."""
        result = self.result
        if result is not None and result.capture is not None:
            return result.capture.output
        if self.categories:
            return len(self.categories)
        tokenizer = getattr(self.loaded_model, "tokenizer", None)
        return len(tokenizer) if tokenizer is not None else None

    # -- runs --------------------------------------------------------------------------------
    def can_run(self) -> bool:
        return self.model is not None and self.input is not None

    def input_problem(self, value: Any = None, source: str | None = None) -> str:
        """Why an input cannot run on the current model ("" when it can): the one gate the
        window's runs, live frames, exports, reports, effects and scans go through.

        ``value`` and ``source`` default to the input held; a live sequence passes
        ``source="frames"`` for its pictures, a dataset scan ``source="images"`` for its
        folder's. A model given in memory is not checked: nothing was recorded of what it
        reads.
        """
        from actviz.io.input_fit import input_misfit, reads_text

        if self.model is None:
            return "Open a model first."
        loaded = self.loaded_model
        if source in ("frames", "images"):  # pictures made with the model's own transforms
            if loaded is None or not reads_text(loaded):
                return ""
            if source == "frames":
                return f"The frames are pictures; {self.model_name} reads text."
            return (
                f"{self.model_name} reads text, not images: a dataset scan runs a folder of "
                "images through the model. Open an image model to scan one."
            )
        if value is None:
            if self.input is None:
                return "Open an input first (an image, a tensor file or a sample)."
            value, source = self.input.value, self.input.source or ""
        if loaded is None:
            return ""
        why = input_misfit(loaded, value, source or "", model=self.model)
        if why is None:
            return ""
        return f"The input does not fit {loaded.name} ({why}): open another input (Ctrl+I)."

    def make_request(self, *, allow_no_input: bool = False) -> RunRequest:
        """Snapshot the state for a run.

        Raises RuntimeError when there is no model, or no input unless ``allow_no_input``
        (live mode supplies each frame's input itself; ``inputs`` and ``image`` are then None).
        """
        if self.model is None:
            raise RuntimeError("open a model first")
        if self.input is None and not allow_no_input:
            raise RuntimeError("open an input first (an image, a tensor file or a sample)")
        # Only this model's layers: a name left from the model before can never reach a run.
        layers = [n for n in self.ticked if n in self.tree]
        extra = []
        if self.gradcam_layer and self.gradcam_layer not in layers:
            extra.append(self.gradcam_layer)
        from actviz.workspace.token_inputs import sequence_request

        sequence = sequence_request(self, layers)
        extra += [n for n in sequence.pop("extra_layers") if n not in layers and n not in extra]
        return RunRequest(
            model=self.model,
            inputs=self.input.value if self.input is not None else None,
            layers=layers,
            # None (auto) stays None: an edited run holds it to its unedited twin's top-1
            # (capture_pair), the very class of :attr:`auto_target`, and the unedited capture
            # kept for edits stays the one made before them.
            target=self.target,
            normalize=self.normalize,
            extra_layers=extra,
            image=self.input.image if self.input is not None else None,
            categories=self.categories,
            gradcam_layer=self.gradcam_layer,
            max_bytes=self.memory_budget,
            channel_pages=dict(self.channel_pages),
            page_channels=dict(self.page_channels),
            channel_orders=dict(self.channel_orders),
            colormap=self.colormap,
            input_grads=self.saliency_wanted,
            input_as_list=self.input_as_list,
            edits=self.edits.request_edits(),
            baseline_cache=self.baseline,
            reuse_baseline=len(self.edits) > 0,
            **sequence,
        )

    def _on_edits_changed(self) -> None:
        self.edits_changed.emit()

    # -- view settings ------------------------------------------------------------------------
    def set_view(
        self,
        *,
        colormap: str | None = None,
        normalize: str | None = None,
        gradcam_layer: str | None | type[Ellipsis] = ...,
    ) -> None:
        """Change view settings (None / ``...`` leaves one as it is); announce each change."""
        changed = []
        if colormap is not None and colormap != self.colormap:
            self.colormap = colormap
            changed.append("colormap")
        if normalize is not None and normalize != self.normalize:
            self.normalize = normalize
            changed.append("normalize")
        if gradcam_layer is not ... and gradcam_layer != self.gradcam_layer:
            self.gradcam_layer = gradcam_layer  # type: ignore[assignment]
            changed.append("gradcam_layer")
        for what in changed:
            self.view_changed.emit(what)

    def set_channel_page(self, layer: str, first: int) -> None:
        """Show the mosaic page of ``layer`` that starts at channel ``first``."""
        if self.channel_pages.get(layer) != first:
            self.channel_pages[layer] = first
            self.view_changed.emit("channel_pages")

    def set_channel_order(self, layer: str, order: ChannelOrder | None) -> None:
        """Tile ``layer``'s channels in ``order`` (None: the natural order) and announce it.
        The page shown is the one holding the channel ``channel_pages[layer]`` names."""
        if order is None:
            if self.channel_orders.pop(layer, None) is not None:
                self.view_changed.emit("channel_orders")
        elif self.channel_orders.get(layer) != order:
            self.channel_orders[layer] = order
            self.view_changed.emit("channel_orders")

    def page_start(self, layer: str, size: int) -> int:
        """Where the page of ``size`` channels shown of ``layer`` starts: a channel, or a
        position in its channel order (:func:`~actviz.display.mosaic.page_start`)."""
        at = self.channel_pages.get(layer, 0)
        return page_start(at, size, self.channel_orders.get(layer))

    def set_page_channels(self, layer: str, count: int) -> None:
        """Channels per mosaic page of ``layer`` (the window's choice from the panel width)."""
        if self.page_channels.get(layer) != count:
            self.page_channels[layer] = count
            self.view_changed.emit("page_channels")

    def set_result(self, result: RunResult | None) -> None:
        self._hold_auto_target(result)
        self.result = result
        self.result_changed.emit()

    def held_bytes(self) -> int:
        """Bytes the shown result and the pinned ones hold together, with the unedited
        capture kept for edits (when it is not the shown capture itself)."""
        held = self.pins.held_bytes(self.result)
        baseline = self.baseline.held
        shown = self.result.capture if self.result is not None else None
        if baseline is not None and baseline is not shown:
            held += int(baseline.nbytes)
        return held


def _describe_value(value: Any, tokens: tuple[str, ...] | None) -> str:
    """What an input made in memory is, for the Model dock's caption: ``tensor (1, 3, 16, 16)
    float32``, ``5 tokens: [CLS] the cat …``, ``dict: input_ids (1, 5) int64, …`` ("": none
    of these). Without it a text input set from a script was captioned "no input"."""

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
