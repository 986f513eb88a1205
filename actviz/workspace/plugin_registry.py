"""Plugins found, loaded and kept apart: the Qt-free side of :mod:`actviz.plugins`.

Every call into a plugin goes through :meth:`PluginRegistry.guard`: an exception is reported
once and the plugin disabled for the session (an opener that raises stays enabled).
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actviz.plugins import (
    API_VERSION,
    ENTRY_POINT_GROUP,
    InputOpener,
    LayerData,
    LayerView,
    ModelOpener,
    Plugin,
    ViewSettings,
    WindowFeature,
)

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import DisplaySpec, PreparedLayer

log = logging.getLogger(__name__)

#: Set to 1, the window and the CLI start without any installed plugin.
NO_PLUGINS_ENV = "ACTVIZ_NO_PLUGINS"


def installed_plugins(*, off: bool = False) -> PluginRegistry:
    """A registry of the installed plugins (none with ``off`` or ``ACTVIZ_NO_PLUGINS=1``):
    what a CLI command that uses contributions loads."""
    registry = PluginRegistry()
    if not off and not plugins_off_by_env():
        registry.discover()
    return registry


def plugins_off_by_env() -> bool:
    """Whether ``ACTVIZ_NO_PLUGINS`` asks for no plugins."""
    return os.environ.get(NO_PLUGINS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(eq=False)
class PluginRecord:
    """One plugin found: where from, what it is, and ``status``: ``"active"``, ``"failed"``
    (``error``, ``details``), ``"refused"`` (another API version) or ``"disabled"``."""

    name: str
    source: str = ""
    distribution: str = ""
    plugin: Plugin | None = None
    status: str = "active"
    error: str = ""
    details: str = ""
    #: Where it failed ("import", "construction", "layer view correlation", ...).
    failed_in: str = ""

    @property
    def active(self) -> bool:
        return self.status == "active" and self.plugin is not None

    @property
    def version(self) -> str:
        return self.plugin.version if self.plugin is not None else ""

    def contributions_text(self) -> str:
        """``"layer view: Channel correlation; input opener: wav (.wav)"``."""
        if self.plugin is None:
            return ""
        texts: dict[type, Callable[[Any], str]] = {
            LayerView: lambda c: f"layer view: {c.title}",
            InputOpener: lambda c: f"input opener: {c.name} ({' '.join(c.suffixes) or 'test'})",
            ModelOpener: lambda c: f"model opener: {c.name} ({' '.join(c.patterns)})",
            WindowFeature: lambda c: f"window feature: {c.name}",
        }
        contributions = self.plugin.contributions
        return "; ".join(
            text(c) for c in contributions for t, text in texts.items() if isinstance(c, t)
        )


class PluginRegistry:
    """The plugins of one window or command: ``records`` in the order found, and
    ``failure_listeners`` called once per failing plugin."""

    def __init__(self) -> None:
        self.records: list[PluginRecord] = []
        self.failure_listeners: list[Callable[[PluginRecord], None]] = []

    # ------------------------------------------------------------------ finding and loading
    def discover(
        self, *, disabled: Iterable[str] = (), entry_points: Iterable[Any] | None = None
    ) -> list[PluginRecord]:
        """Load the installed plugins (``actviz.plugins`` entry points); ``disabled`` names
        are listed but not imported. Returns the records added."""
        if entry_points is None:
            from importlib.metadata import entry_points as installed

            entry_points = installed(group=ENTRY_POINT_GROUP)
        off = set(disabled)
        added = []
        # By name: the same order on every start, whatever order sys.path lists them in.
        for ep in sorted(entry_points, key=lambda e: e.name):
            dist = getattr(getattr(ep, "dist", None), "name", "") or ""
            record = PluginRecord(ep.name, ep.value, dist)
            self.records.append(record)
            added.append(record)
            if ep.name in off:
                record.status = "disabled"
                continue
            try:
                obj = ep.load()
            except BaseException as exc:  # noqa: BLE001 - a plugin must not stop the app
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                self.fail(record, "import", exc)
                continue
            self._construct(record, obj)
        return added

    def add(self, given: Any, *, name: str | None = None) -> PluginRecord:
        """Add a plugin: a :class:`Plugin`, a factory, a contribution or a list of them (wrapped
        in a plugin named ``name``), or a ``"package.module:attr"`` string."""
        if isinstance(given, str) and ":" in given:
            record = PluginRecord(name or given, given)
            self.records.append(record)
            module, _, attr = given.partition(":")
            try:
                import importlib

                obj: Any = importlib.import_module(module)
                for part in attr.split("."):
                    obj = getattr(obj, part)
            except Exception as exc:  # noqa: BLE001
                self.fail(record, "import", exc)
                return record
            self._construct(record, obj)
            return record
        if isinstance(given, (LayerView, InputOpener, ModelOpener, WindowFeature)):
            given = [given]
        if isinstance(given, (list, tuple)):
            given = Plugin(name or "plugin", contributions=given)
        label = name or getattr(given, "name", "") or getattr(given, "__name__", "plugin")
        record = PluginRecord(str(label), "given")
        self.records.append(record)
        self._construct(record, given)
        return record

    def _construct(self, record: PluginRecord, obj: Any) -> None:
        try:
            plugin = obj if isinstance(obj, Plugin) else obj() if callable(obj) else obj
            if not isinstance(plugin, Plugin):
                raise TypeError(
                    f"the entry point gives {type(plugin).__name__}, not actviz.plugins.Plugin"
                )
        except Exception as exc:  # noqa: BLE001
            self.fail(record, "construction", exc)
            return
        record.plugin = plugin
        if record.source == "given":
            record.name = plugin.name
        if plugin.api_version != API_VERSION:
            record.status = "refused"
            newer = plugin.api_version > API_VERSION
            record.error = (
                f"Plugin {record.name} {plugin.version} was written for actviz plugin API "
                f"{plugin.api_version}, and this actviz has API {API_VERSION}: it is not "
                f"loaded; {'update actviz' if newer else 'install a version of the plugin written for API ' + str(API_VERSION)}."
            )
            log.warning("%s", record.error)

    def fail(self, record: PluginRecord, where: str, exc: BaseException) -> None:
        """``record`` raised ``exc`` in ``where``: disable it and tell the listeners (once)."""
        if record.status == "failed":
            return
        record.status = "failed"
        record.failed_in = where
        record.error = (
            f"Plugin {record.name} failed ({where}) and is disabled for this session: "
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        ).rstrip(": ")
        record.details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        log.warning("%s", record.error)
        for listener in list(self.failure_listeners):
            try:
                listener(record)
            except Exception:  # noqa: BLE001 - reporting must not raise into the plugin's caller
                log.exception("plugin failure listener failed")

    def disable(self, record: PluginRecord) -> None:
        """Stop ``record`` for the rest of the session (the user unticked it)."""
        if record.status == "active":
            record.status = "disabled"

    def modules_of(self, record: PluginRecord) -> set[str]:
        """The modules whose code is ``record``'s: an installed plugin's whole top-level
        package, and the module of each callable it contributes."""
        found = set()
        module = record.source.partition(":")[0] if ":" in record.source else ""
        if module:
            # A "module:attr" plugin owns only its module (its package may be the script's).
            found.add(module.split(".")[0] if record.distribution else module)
        plugin = record.plugin
        for c in plugin.contributions if plugin is not None else ():
            for value in (getattr(c, n, None) for n in getattr(c, "__dataclass_fields__", {})):
                owner = getattr(value, "__module__", None)
                if callable(value) and isinstance(owner, str) and not owner.startswith("actviz."):
                    found.add(owner)
        return found

    def record_of_traceback(self, tb: Any) -> tuple[PluginRecord, str] | None:
        """``(record, "slot <function>")`` of the active plugin whose code is outermost in the
        traceback ``tb`` (the slot Qt called), or ``None``."""
        owners = [(r, self.modules_of(r)) for r in self.records if r.active]
        while tb is not None and owners:
            frame = tb.tb_frame
            name = frame.f_globals.get("__name__", "")
            for record, modules in owners:
                if any(name == m or name.startswith(m + ".") for m in modules):
                    return (
                        record,
                        f"slot {getattr(frame.f_code, 'co_qualname', frame.f_code.co_name)}",
                    )
            tb = tb.tb_next
        return None

    # ------------------------------------------------------------------ calls into plugins
    def guard(
        self, record: PluginRecord, fn: Callable[..., Any], where: str, default: Any = None
    ) -> Callable[..., Any]:
        """``fn`` wrapped: runs only while ``record`` is active; an exception is reported
        (:meth:`fail`) and ``default`` returned."""

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if not record.active:
                return default
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - isolation is the point
                self.fail(record, where, exc)
                return default

        guarded.__wrapped__ = fn  # type: ignore[attr-defined]
        return guarded

    def contributions(self, kind: type) -> list[tuple[PluginRecord, Any]]:
        """``(record, contribution)`` of the active plugins' contributions of ``kind``."""
        return [
            (r, c)
            for r in self.records
            if r.active and r.plugin is not None
            for c in r.plugin.contributions
            if isinstance(c, kind)
        ]

    def layer_views(self) -> list[tuple[PluginRecord, LayerView]]:
        return self.contributions(LayerView)

    def input_openers(self) -> list[tuple[PluginRecord, InputOpener]]:
        return self.contributions(InputOpener)

    def model_openers(self) -> list[tuple[PluginRecord, ModelOpener]]:
        return self.contributions(ModelOpener)

    def window_features(self) -> list[tuple[PluginRecord, WindowFeature]]:
        return self.contributions(WindowFeature)

    def input_suffixes(self) -> list[str]:
        """The suffixes the input openers read (File > Open input lists them)."""
        return [s for _, o in self.input_openers() for s in o.suffixes]

    # ------------------------------------------------------------------ openers
    def open_input(self, source: str) -> Any:
        """A ``LoadedInput`` read by the first input opener matching ``source`` (None: none);
        its error is raised as an ``InputError`` naming the plugin."""
        from actviz.io.errors import InputError
        from actviz.io.input_files import LoadedInput

        for record, opener in self.input_openers():
            if not self.guard(record, opener.matches, f"input opener {opener.name}", False)(source):
                continue
            if opener.open is None:
                continue
            try:
                value, description = opener.open(str(source))
            except Exception as exc:  # noqa: BLE001 - the file could not be read: say so
                raise InputError(
                    f"{Path(source).name}: plugin {record.name} could not open it: {exc}"
                ) from exc
            return LoadedInput(value, str(source), "tensor", None, str(description))
        return None

    def open_model(self, source: str, *, trust: bool = False) -> Any:
        """A ``LoadedModel`` opened by the first model opener matching ``source`` (None: none);
        one with ``needs_trust`` runs only with ``trust`` (else ``UntrustedFileError``)."""
        from actviz.io.errors import ModelLoadError, UntrustedFileError
        from actviz.io.models.loaded_model import LoadedModel

        for record, opener in self.model_openers():
            if not self.guard(record, opener.matches, f"model opener {opener.name}", False)(source):
                continue
            if opener.needs_trust and not trust:
                raise UntrustedFileError(
                    source, f"plugin {record.name} opens it by unpickling, which runs its code"
                )
            try:
                model = opener.open(str(source), bool(trust))
            except UntrustedFileError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise ModelLoadError(
                    f"{Path(source).name}: plugin {record.name} could not open it: {exc}"
                ) from exc
            import torch

            if not isinstance(model, torch.nn.Module):
                raise ModelLoadError(
                    f"plugin {record.name} gave a {type(model).__name__} for {source}, "
                    "not an nn.Module"
                )
            model.eval()
            name = f"{Path(source).name} ({record.name})"
            return LoadedModel(model, name, str(source), "plugin")
        return None

    # ------------------------------------------------------------------ exports
    def export_writers(
        self,
        views: Sequence[tuple[str, str]] | None = None,
        *,
        only: Iterable[str] | None = None,
    ) -> list[Callable[[Path, str, PreparedLayer, DisplaySpec], list[Path]]]:
        """Writers for ``export_capture``'s ``layer_writers``: each view with a ``picture`` writes
        ``<layer>_<view>.png``, limited to ``views`` pairs or ``only`` these view names."""
        chosen = None if views is None else set(views)
        names = None if only is None else set(only)
        writers = []
        for record, view in self.layer_views():
            if view.picture is None or (names is not None and view.name not in names):
                continue
            writers.append(self._writer(record, view, chosen))
        return writers

    def _writer(
        self, record: PluginRecord, view: LayerView, chosen: set[tuple[str, str]] | None
    ) -> Callable[..., list[Path]]:
        where = f"layer view {view.name}"
        accepts = self.guard(record, view.accepts or (lambda _d: True), where, False)
        prepare = self.guard(record, view.prepare, where)
        picture = self.guard(record, view.picture or (lambda _d: None), where)

        def write(out: Path, base: str, layer: PreparedLayer, spec: DisplaySpec) -> list[Path]:
            if chosen is not None and (layer.name, view.name) not in chosen:
                return []
            data = layer_data(layer)
            if not accepts(data):
                return []
            prepared = prepare(data, view_settings(spec, layer.name))
            pixels = picture(prepared) if prepared is not None else None
            if pixels is None:
                return []
            import numpy as np
            from PIL import Image

            path = Path(out) / f"{base}_{view.name}.png"
            Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8)).save(path)
            return [path]

        return write


def layer_data(layer: PreparedLayer) -> LayerData:
    """What a layer view is given of a prepared layer (the panel's arrays, read-only)."""
    view, grad = layer.view, layer.grad_view
    return LayerData(
        name=layer.name,
        module_type=layer.module_type,
        shape=tuple(layer.shape) if layer.shape is not None else None,
        kind=view.kind if view is not None else "",
        activation=view.data if view is not None else None,
        gradient=grad.data if grad is not None else None,
        stats=layer.stats,
    )


def view_settings(spec: DisplaySpec, name: str, *, colormap: str | None = None) -> ViewSettings:
    """The view settings of layer ``name`` in a run prepared with ``spec`` (``colormap``:
    the window's choice, when the spec's is not the one shown)."""
    return ViewSettings(
        colormap=colormap if colormap is not None else spec.colormap,
        normalize=spec.normalize,
        first_channel=spec.first_channel(name),
        page_size=spec.page_size(name),
        sample=spec.sample,
    )
