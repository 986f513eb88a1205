"""What a prepared run is: frozen layers and results (a page turn makes a new one), and the spec
that asks for them. Costly, rarely read pieces (histograms, hidden Grad-CAMs) come when read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from actviz.display.colormaps import AUTO
from actviz.display.layer_views import LayerView
from actviz.display.mosaic import (
    MAX_MOSAIC_CHANNELS,
    MIN_PAGE_CHANNELS,
    ChannelOrder,
    Mosaic,
    page_channels_for,
    page_start,
)

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.capture import Capture
    from actviz.core.tree import ModuleTree
    from actviz.display.attention import AttentionMaps
    from actviz.display.attribution import TokenSaliency
    from actviz.display.logit_lens import LogitLens
    from actviz.display.token_maps import SequenceLayout, TokenView

T = TypeVar("T")


class Lazy(Generic[T]):
    """A value computed by ``compute()`` on first :meth:`get`, once (thread-safe)."""

    def __init__(self, compute: Callable[[], T] | None = None, value: T | None = None) -> None:
        self._compute, self._value, self._lock = compute, value, threading.Lock()

    @classmethod
    def of(cls, value: T) -> Lazy[T]:
        """An already computed value."""
        return cls(None, value)

    def get(self) -> T:
        if self._compute is not None:
            with self._lock:
                if self._compute is not None:
                    self._value = self._compute()
                    self._compute = None  # drop what the computation held (a tensor)
        return self._value  # type: ignore[return-value]

    @property
    def ready(self) -> bool:
        """Whether the value exists already (tests, diagnostics)."""
        return self._compute is None


class LazyStats(Mapping[str, Any]):
    """A layer's statistics, read-only, computed on the first read of a key not ``known``;
    ``lazy`` values are computed on their own first read. Both win over computed values."""

    def __init__(
        self,
        compute: Callable[[], Mapping[str, Any]],
        known: Mapping[str, Any],
        lazy: Mapping[str, Lazy[Any]] | None = None,
    ) -> None:
        self._known = known_ = dict(known)
        self._lazy = lazy_ = dict(lazy or {})
        self._all: Lazy[Mapping[str, Any]] = Lazy(
            lambda: MappingProxyType(
                {**compute(), **known_, **{k: v.get() for k, v in lazy_.items()}}
            )
        )

    def __getitem__(self, key: str) -> Any:
        if key in self._known:
            return self._known[key]
        return self._lazy[key].get() if key in self._lazy else self._all.get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all.get())

    def __len__(self) -> int:
        return len(self._all.get())

    @property
    def ready(self) -> bool:
        """Whether every statistic exists already (tests, diagnostics)."""
        return self._all.ready

    def ready_for(self, key: str) -> bool:
        """Whether reading ``key`` computes nothing (tests, diagnostics)."""
        lazy = self._lazy.get(key)
        return key in self._known or self._all.ready or (lazy is not None and lazy.ready)


class LazyMap(Mapping[str, np.ndarray]):
    """A read-only ``{name: array}`` whose values are computed on first read."""

    def __init__(self, items: Mapping[str, Lazy[np.ndarray]]) -> None:
        self._items = dict(items)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._items[name].get()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def computed(self) -> list[str]:
        return [n for n, lazy in self._items.items() if lazy.ready]


@dataclass(frozen=True)
class DisplaySpec:
    """What to prepare from a capture, and how: ``image`` is the input as loaded (``(H, W, 3)``
    uint8; None for tensors); per layer, ``channel_pages`` names a channel whose page is shown,
    ``page_channels`` the page size, ``channel_orders`` an order (by effect); ``AUTO`` ``colormap``
    shows signed mosaics symmetric about 0; ``sample`` is the batch element pictures show;
    ``tokens``, ``layout`` and ``tokenizer`` serve text inputs, ViT patches and the logit lens;
    a layer without a page size is paged for a mosaic ``page_width`` pixels wide (0: no width)."""

    layers: tuple[str, ...] = ()
    normalize: str = "channel"
    image: np.ndarray | None = field(default=None, compare=False)
    categories: tuple[str, ...] | None = None
    gradcam_layer: str | None = None
    channel_pages: Mapping[str, int] = field(default_factory=dict)
    sample: int = 0
    page_channels: Mapping[str, int] = field(default_factory=dict)
    colormap: str = AUTO
    tokens: tuple[str, ...] | None = None
    layout: SequenceLayout | None = None
    tokenizer: Any = field(default=None, compare=False, repr=False)
    channel_orders: Mapping[str, ChannelOrder] = field(default_factory=dict)
    page_width: int = 0

    def first_channel(self, name: str, view: LayerView | None = None) -> int:
        """Where layer ``name``'s mosaic page starts (a position in its channel order, if any)."""
        at = int(self.channel_pages.get(name, 0))
        return page_start(at, self.page_size(name, view), self.channel_orders.get(name))

    def page_size(self, name: str, view: LayerView | None = None) -> int:
        """Channels on one mosaic page of layer ``name``, whose display is ``view``."""
        if name not in self.page_channels and self.page_width > 0 and view and view.kind == "maps":
            # As the window pages it once its panel is that wide: no second page made there.
            c, h, w = view.data.shape
            return page_channels_for(c, h, w, self.page_width, min_channels=MIN_PAGE_CHANNELS)
        return max(1, int(self.page_channels.get(name, MAX_MOSAIC_CHANNELS)))


@dataclass(frozen=True)
class PreparedLayer:
    """Everything one layer panel, its statistics row and its histogram display."""

    name: str
    module_type: str
    shape: tuple[int, ...] | None
    calls: int
    view: LayerView | None
    mosaic: Mosaic | None
    grad_view: LayerView | None
    grad_mosaic: Mosaic | None
    stats: Mapping[str, Any]
    hist_lazy: Lazy[tuple[np.ndarray, np.ndarray]] = field(
        default_factory=lambda: Lazy.of(None), repr=False, compare=False
    )
    #: A token sequence's view (token x feature heat map, norms), shown instead of a mosaic.
    tokens: TokenView | None = field(default=None, repr=False, compare=False)
    #: The mosaics are an earlier frame's (a panel off screen); see ``repage.current_mosaics``.
    stale_mosaics: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.stats, LazyStats):  # read-only already; reading would compute
            object.__setattr__(self, "stats", MappingProxyType(dict(self.stats)))

    @property
    def hist(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(counts, edges)`` of the layer's values (computed on first read)."""
        return self.hist_lazy.get()


def grad_norms_of(layers: Mapping[str, PreparedLayer], order: Sequence[str]) -> np.ndarray:
    """Each of ``order``'s layers' ``grad_norm`` statistic (NaN: no gradient), float64, read-only."""
    values = [layers[n].stats.get("grad_norm") for n in order]
    norms = np.asarray([float("nan") if v is None else float(v) for v in values], np.float64)
    norms.setflags(write=False)
    return norms


@dataclass(frozen=True)
class RunResult:
    """A prepared run (immutable): numpy arrays for the panels, and the raw ``capture`` for
    export and comparisons only (widgets never receive it)."""

    layers: Mapping[str, PreparedLayer]
    shown: tuple[str, ...]
    predictions: tuple[tuple[int, str, float], ...]
    target_text: str
    target_index: int | None
    image: np.ndarray | None
    saliency: np.ndarray | None
    saliency_message: str
    grad_cams: Mapping[str, np.ndarray]
    gradcam_default: str | None
    grad_norm_names: tuple[str, ...]
    output_shapes: Mapping[str, tuple[int, ...]]
    warnings: tuple[str, ...]
    errors: tuple[str, ...]
    elapsed_s: float
    nbytes: int
    spec: DisplaySpec = field(default_factory=DisplaySpec, repr=False, compare=False)
    capture: Capture | None = field(default=None, repr=False, compare=False)
    tree: ModuleTree | None = field(default=None, repr=False, compare=False)
    #: Where a live frame's input came from: ``input``, ``path``, ``index``, ``perturbation``.
    origin: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    #: The unedited capture of the same input when ``capture`` has edits applied (what-if).
    baseline: Capture | None = field(default=None, repr=False, compare=False)
    #: Attention probabilities of every attention module (models with attention).
    attention: AttentionMaps | None = field(default=None, repr=False, compare=False)
    #: Attention rollout over the image, ``(H, W)`` in [0, 1] (vision transformers).
    rollout: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: The logit-lens table (decoder language models whose blocks were captured).
    logit_lens: LogitLens | None = field(default=None, repr=False, compare=False)
    #: Saliency of a text input, per token (``saliency`` is the picture of an image input).
    token_saliency: TokenSaliency | None = field(default=None, repr=False, compare=False)
    #: What ``predictions`` rank: ``"class"``, ``"token"`` or ``"detection"``.
    prediction_kind: str = "class"
    #: :attr:`grad_norms`, made on first read (anew for a ``dataclasses.replace`` copy).
    _grad_norms: Lazy[np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", MappingProxyType(dict(self.layers)))
        object.__setattr__(self, "output_shapes", MappingProxyType(dict(self.output_shapes)))
        layers, names = self.layers, self.grad_norm_names  # not self: no reference cycle
        object.__setattr__(self, "_grad_norms", Lazy(lambda: grad_norms_of(layers, names)))
        if (sal := self.saliency) is not None:  # made here; the image is the input's
            sal.setflags(write=False)

    @property
    def grad_norms(self) -> np.ndarray:
        """Each layer's gradient L2 norm in ``grad_norm_names`` order (NaN: none); read-only."""
        return self._grad_norms.get()

    @property
    def grad_norms_ready(self) -> bool:
        """Whether :attr:`grad_norms` exists already (tests, diagnostics)."""
        return self._grad_norms.ready

    def stats_rows(self) -> list[dict]:
        """Rows for the statistics table, in execution order."""
        return [dict(layer.stats, name=name) for name, layer in self.layers.items()]

    def _overview_parts(self, selected: str | None) -> list[Any]:
        """What the Overview reads that may wait for a read: statistics (gradient norms too),
        the default Grad-CAM map and ``selected``'s histogram (``LazyStats`` and ``Lazy``)."""
        parts: list[Any] = [layer.stats for layer in self.layers.values()]
        cams = getattr(self.grad_cams, "_items", {})  # a LazyMap's
        parts += [cams[n] for n in (self.gradcam_default,) if n in cams]
        if selected in self.layers:
            parts.append(self.layers[selected].hist_lazy)
        return [p for p in parts if isinstance(p, Lazy | LazyStats)]

    def overview_ready(self, selected: str | None) -> bool:
        """Whether the Overview can show this result (``selected``'s histogram too) computing
        nothing: a live frame leaves what a hidden Overview does not show for a read."""
        return all(
            p.ready and (not isinstance(p, LazyStats) or p.ready_for("grad_norm"))
            for p in self._overview_parts(selected)
        )

    def warm_overview(self, selected: str | None) -> None:
        """Compute what :meth:`overview_ready` waits for (off the GUI thread)."""
        for part in self._overview_parts(selected):
            _ = part.get() if isinstance(part, Lazy) else (dict(part), part.get("grad_norm"))
