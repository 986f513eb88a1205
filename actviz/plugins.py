"""The public plugin API of actviz (version :data:`API_VERSION`).

A plugin package declares ``[project.entry-points."actviz.plugins"]`` naming a
:class:`Plugin` of contributions (:class:`LayerView`, :class:`InputOpener`,
:class:`ModelOpener`, :class:`WindowFeature`). Qt-side names are imported on first use, so
``import actviz.plugins`` stays Qt-free; only the window and CLI commands load plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from actviz.io.errors import UntrustedFileError
    from actviz.ui.host import Feature, FeatureBase, WindowHost
    from actviz.workspace.session_state import Session

#: The version of this API; a plugin written for another (``Plugin.api_version``) is refused.
API_VERSION = 1
ENTRY_POINT_GROUP = "actviz.plugins"  #: The entry-point group actviz reads at start.
#: The :class:`Session` events a plugin may connect to (``host.session.<event>.connect(fn)``).
SESSION_EVENTS = (
    "model_changed",
    "input_changed",
    "ticks_changed",
    "target_changed",
    "result_changed",
    "view_changed",
)

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "SESSION_EVENTS",
    "Contribution",
    "Feature",
    "FeatureBase",
    "InputOpener",
    "LayerData",
    "LayerView",
    "ModelOpener",
    "Plugin",
    "Session",
    "UntrustedFileError",
    "ViewContext",
    "ViewSettings",
    "WindowFeature",
    "WindowHost",
    "load_checkpoint",
    "paint",
]


@dataclass(frozen=True)
class LayerData:
    """One layer of a run as the layer panel shows it (read-only numpy, no torch): ``kind`` is
    ``"maps"`` (``activation`` ``(C, H, W)``), ``"bars"``, ``"heatmap"`` or ``"scalar"``;
    ``gradient`` is ``|d target / d output|`` (None without gradients); ``stats`` the Overview's.
    """

    name: str
    module_type: str
    shape: tuple[int, ...] | None
    kind: str
    activation: np.ndarray | None
    gradient: np.ndarray | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ViewSettings:
    """The Session's view settings a layer view follows: ``colormap`` (:meth:`resolved` names it),
    ``normalize``, the channel page (``first_channel``, ``page_size``) and ``sample``."""

    colormap: str = "auto"
    normalize: str = "channel"
    first_channel: int = 0
    page_size: int = 256
    sample: int = 0

    def resolved(self, *, signed: bool = False) -> str:
        """The colour map to paint with: the chosen one, or under "auto" the window's choice
        for signed (diverging) or non-negative (sequential) values."""
        from actviz.display.colormaps import resolve

        return resolve(self.colormap, signed=signed)


@dataclass(frozen=True)
class ViewContext:
    """What a layer view's widget may do with the window: the layer it shows and
    :attr:`open_channel` (the channel view shows that channel of this layer, large)."""

    layer: str
    open_channel: Callable[[int], bool]
    host: Any = None


@dataclass(frozen=True)
class LayerView:
    """A view of one layer: ``prepare(layer, settings) -> data`` (Qt-free) runs for each result
    shown; ``widget(context)`` returns a QWidget with ``set_data(data)``, built on first open;
    ``picture(data) -> (H, W, 3) uint8`` is exported as ``<layer>_<name>.png`` (None: not
    exported); ``accepts(layer)`` limits the layers offered (None: all).
    """

    name: str
    title: str
    prepare: Callable[[LayerData, ViewSettings], Any]
    widget: Callable[[ViewContext], Any]
    picture: Callable[[Any], Any] | None = None
    accepts: Callable[[LayerData], bool] | None = None


@dataclass(frozen=True)
class InputOpener:
    """Reads input files the built-in openers do not know: by ``suffixes`` (lower case, with the
    dot) or ``accepts(path)``; ``open(path) -> (inputs, description)``."""

    name: str
    suffixes: tuple[str, ...] = ()
    accepts: Callable[[str], bool] | None = None
    open: Callable[[str], tuple[Any, str]] | None = None

    def matches(self, source: str) -> bool:
        """Whether this opener reads ``source``."""
        if any(str(source).lower().endswith(s.lower()) for s in self.suffixes):
            return True
        return bool(self.accepts is not None and self.accepts(str(source)))


@dataclass(frozen=True)
class ModelOpener:
    """Opens models from files or names the built-in openers do not know: ``patterns`` are
    ``fnmatch`` patterns matched against the source and its file name; ``open(source, trust) ->
    nn.Module``. With ``needs_trust`` actviz asks the user before ``open`` with ``trust=True``.
    """

    name: str
    patterns: tuple[str, ...]
    open: Callable[[str, bool], Any]
    needs_trust: bool = False

    def matches(self, source: str) -> bool:
        """Whether ``source`` (or its file name) matches one of :attr:`patterns`."""
        from fnmatch import fnmatch
        from pathlib import PurePath

        name = PurePath(str(source)).name
        return any(fnmatch(str(source), p) or fnmatch(name, p) for p in self.patterns)


@dataclass(frozen=True)
class WindowFeature:
    """A window feature: ``factory(host: WindowHost) -> Feature``, constructed with the host
    as the built-in features are (tabs, docks, menu actions, panel slots, session events)."""

    name: str
    factory: Callable[[Any], Any]


Contribution = LayerView | InputOpener | ModelOpener | WindowFeature


@dataclass(frozen=True)
class Plugin:
    """What a plugin's entry point names: its ``name``, ``version``, the :data:`API_VERSION` it was
    written for, and its ``contributions``."""

    name: str
    version: str = "0"
    api_version: int = API_VERSION
    contributions: Sequence[Contribution] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "contributions", tuple(self.contributions))
        for c in self.contributions:
            if not isinstance(c, (LayerView, InputOpener, ModelOpener, WindowFeature)):
                raise TypeError(
                    f"plugin {self.name!r}: {c!r} is not a contribution (LayerView, "
                    "InputOpener, ModelOpener or WindowFeature)"
                )


def paint(
    values: Any,
    low: float,
    high: float,
    colormap: str,
    background: tuple[int, int, int] = (255,) * 3,
) -> np.ndarray:
    """``(H, W)`` values as ``(H, W, 3)`` uint8 pixels in ``colormap``, ``low`` and ``high``
    at its ends, exactly as the window's panels colour their maps (NaN in ``background``)."""
    import numpy as np

    from actviz.display.colormaps import paint as paint_indices
    from actviz.display.colormaps import to_indices

    image = np.asarray(values, dtype=np.float32)
    return paint_indices(to_indices(image, (low, high)), colormap, background)


def load_checkpoint(path: str, *, trust: bool = False) -> Any:
    """``torch.load`` ``path`` on the CPU with the built-in openers' trust gate: plain tensors
    and containers always; arbitrary objects (a pickled module) only with ``trust=True``,
    else :class:`UntrustedFileError` (the window then asks the user)."""
    from actviz.io.models.checkpoints import torch_load_guarded

    return torch_load_guarded(path, trust=trust)


def __getattr__(name: str) -> Any:
    # Qt (the host) and torch (the session) load only when a plugin asks for them.
    if name in ("WindowHost", "Feature", "FeatureBase"):
        from actviz.ui import host

        return getattr(host, name)
    if name == "Session":
        from actviz.workspace.session_state import Session

        return Session
    if name == "UntrustedFileError":
        from actviz.io.errors import UntrustedFileError

        return UntrustedFileError
    raise AttributeError(f"module 'actviz.plugins' has no attribute {name!r}")
