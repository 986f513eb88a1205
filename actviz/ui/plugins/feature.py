"""The feature wiring a plugin registry's contributions into the window; a plugin that fails
is reported once and everything it added withdrawn.
"""

from __future__ import annotations

import logging
import sys
import weakref
from types import TracebackType
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QLabel, QMenu, QWidget

from actviz.plugins import LayerView, ViewContext, ViewSettings
from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.plugins.dialog import PluginsDialog
from actviz.ui.plugins.guarded import GuardedFeature, PluginHost
from actviz.workspace.plugin_registry import PluginRecord, PluginRegistry, layer_data

log = logging.getLogger(__name__)

#: The settings key of the plugins the user disabled (their entry-point names).
DISABLED_KEY = "plugins/disabled"


def view_key(record: PluginRecord, view: LayerView) -> str:
    """``"plugin/view"``: a view's name across plugins."""
    return f"{record.name}/{view.name}"


class PluginViewDock(QDockWidget):
    """One plugin view of one layer (``widget_of_view``, None if it failed; ``last_data``)."""

    def __init__(
        self,
        registry: PluginRegistry,
        record: PluginRecord,
        view: LayerView,
        layer: str,
        context: ViewContext,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(f"{view.title} · {layer}", parent)
        self.setObjectName(f"PluginView:{view_key(record, view)}:{layer}")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
        self.record, self.view, self.layer = record, view, layer
        where = f"layer view {view.name}"
        self._prepare = registry.guard(record, view.prepare, where)
        self.widget_of_view: Any = registry.guard(record, view.widget, where)(context)
        self.last_data: Any = None
        if self.widget_of_view is None:
            self._set_data = None
            self.setWidget(QLabel(f"{view.title} could not be shown: see Help > Plugins."))
        else:
            self._set_data = registry.guard(record, self.widget_of_view.set_data, where)
            self.setWidget(self.widget_of_view)

    def show_layer(self, prepared_layer: Any, settings: ViewSettings) -> bool:
        """Prepare ``prepared_layer`` for the widget; False when the plugin is off or failed."""
        if self._set_data is None or not self.record.active:
            return False
        data = self._prepare(layer_data(prepared_layer), settings)
        if data is None or not self.record.active:
            return False
        self.last_data = data
        self._set_data(data)
        return self.record.active


# Windows whose plugins' own widgets may raise (weak: a closed window must not be kept).
_claimants: weakref.WeakSet[PluginsFeature] = weakref.WeakSet()
_our_hook: Any = None


def _hook_over(before: Any) -> Any:
    """A ``sys.excepthook`` that lets the live windows claim an exception, else calls ``before``."""

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if isinstance(exc, Exception):
            for feature in list(_claimants):
                if feature.claim(exc, tb):
                    return
        before(kind, exc, tb)

    hook.before = before  # type: ignore[attr-defined]
    return hook


def _claim_exceptions(feature: PluginsFeature) -> None:
    global _our_hook
    if sys.excepthook is not _our_hook:
        _our_hook = _hook_over(sys.excepthook)
        sys.excepthook = _our_hook
    _claimants.add(feature)


def _release_exceptions(feature: PluginsFeature) -> None:
    global _our_hook
    _claimants.discard(feature)
    # A hook put over ours keeps ours as its previous one: ours then passes everything on.
    if not _claimants and _our_hook is not None and sys.excepthook is _our_hook:
        sys.excepthook = _our_hook.before
        _our_hook = None


class _Relay(QObject):
    """Failures reach the GUI thread through a queued signal (openers run on loader threads)."""

    failed = Signal(object)


def disabled_plugins(settings: Any) -> set[str]:
    """The plugin names the user disabled, from the window's settings."""
    store = getattr(settings, "store", None)
    if store is None:
        return set()
    value = store.value(DISABLED_KEY, [])
    if isinstance(value, str):  # INI keeps a one-element list as a string
        value = [value] if value else []
    return {str(v) for v in value or [] if v}


class PluginsFeature(FeatureBase, QObject):
    """A window's plugins: ``registry``, open view ``docks`` and failure ``reports``."""

    name = "plugins"

    def __init__(self, host: WindowHost, registry: PluginRegistry) -> None:
        super().__init__(host)
        self.registry = registry
        self.docks: dict[tuple[str, str], PluginViewDock] = {}
        self.reports: list[tuple[str, str]] = []
        self.hosts: dict[str, list[PluginHost]] = {}
        self.dialog: PluginsDialog | None = None
        self._relay = _Relay(self)
        # Direct on the GUI thread (reported before the failed call returns), else queued.
        self._relay.failed.connect(self._on_plugin_failed)
        self._listener = self._relay.failed.emit
        registry.failure_listeners.append(self._listener)
        self.plugins_action = QAction("Plugins…", self)
        self.plugins_action.setToolTip("The plugins found, their status; disable one")
        self.plugins_action.triggered.connect(self.show_dialog)
        host.add_menu_action("Help", self.plugins_action, shortcut=False)
        self._wrap_loaders()
        host.add_tile_menu_entries(self._fill_tile_menu)
        host.panel_shown.connect(self._on_panel_shown)
        self.listen(host.session.view_changed, self._on_session_view_changed)
        host.offer_export_writers(self.export_writers)
        suffixes = registry.input_suffixes()
        if suffixes:
            names = " ".join(f"*{s}" for s in suffixes)
            host.offer_input_filters([f"Plugin inputs ({names})"])
        self._construct_features()
        # Its own widgets' slots bypass the host: sys.excepthook names the plugin by its frames.
        if any(r.plugin is not None for r in registry.records):
            _claim_exceptions(self)
        for record in registry.records:
            if record.status == "failed" and (record.name, record.failed_in) not in self.reports:
                self._report(record)
        self._show_at_start()
        # Adopting the first model clears the banner: what was said at start is said again.
        host.session.model_changed.connect(self._on_first_model)

    def _show_at_start(self) -> None:
        for record in self.registry.records:
            source = f"plugin:{record.name}"
            if record.status == "failed":
                self.host.show_error(record.error, source=source, details=record.details)
            elif record.status == "refused":
                self.host.show_warning(record.error, source=source)

    def _on_first_model(self) -> None:
        self.host.session.model_changed.disconnect(self._on_first_model)
        self._show_at_start()

    def _wrap_loaders(self) -> None:
        host: Any = self.host
        registry = self.registry
        if registry.input_openers():
            builtin_input = host.input_loader

            def load_input(source: str, **kwargs: Any) -> Any:
                loaded = registry.open_input(source)
                return loaded if loaded is not None else builtin_input(source, **kwargs)

            host.input_loader = load_input
        if registry.model_openers():
            builtin_model = host.model_loader

            def load_model(source: str, **kwargs: Any) -> Any:
                loaded = registry.open_model(source, trust=bool(kwargs.get("trust", False)))
                return loaded if loaded is not None else builtin_model(source, **kwargs)

            host.model_loader = load_model

    def _construct_features(self) -> None:
        host: Any = self.host
        for record, contribution in self.registry.window_features():
            phost = PluginHost(host, self.registry, record)
            self.hosts.setdefault(record.name, []).append(phost)
            make = self.registry.guard(
                record, contribution.factory, f"construction of {contribution.name}"
            )
            feature = make(phost)
            if feature is None or not record.active:
                continue
            key = f"plugin:{record.name}:{contribution.name}"
            host.features[key] = GuardedFeature(feature, key, self.registry, record)

    def views_for(self, layer: str) -> list[tuple[str, str]]:
        """``("plugin/view", title)`` of the layer views that accept ``layer``."""
        result = self.host.result
        prepared = result.layers.get(layer) if result is not None else None
        if prepared is None:
            return []
        data = layer_data(prepared)
        offered = []
        for record, view in self.registry.layer_views():
            if view.accepts is not None:
                where = f"layer view {view.name}"
                if not self.registry.guard(record, view.accepts, where, False)(data):
                    continue
            offered.append((view_key(record, view), view.title))
        return offered

    def _fill_tile_menu(self, menu: QMenu, layer: str, _channels: tuple[int, ...]) -> None:
        offered = self.views_for(layer)
        if offered:
            menu.addSeparator()
        for key, title in offered:
            menu.addAction(f"Show {title}", lambda k=key: self.open_view(layer, k))

    def _find_view(self, name: str) -> tuple[PluginRecord, Any] | None:
        for record, view in self.registry.layer_views():
            if name in (view.name, view_key(record, view)):
                return record, view
        return None

    def open_view(self, layer: str, name: str) -> PluginViewDock | None:
        """Show view ``name`` of ``layer`` in a dock (raised if open); None if no plugin has it."""
        found = self._find_view(name)
        if found is None:
            return None
        record, view = found
        key = (layer, view_key(record, view))
        dock = self.docks.get(key)
        if dock is None:
            host: Any = self.host
            context = ViewContext(
                layer, lambda channel: bool(host.open_channel(layer, int(channel))), host
            )
            dock = PluginViewDock(self.registry, record, view, layer, context, host.dialog_parent())
            if not record.active:  # its widget failed to build
                dock.deleteLater()
                return None
            self.docks[key] = dock
            self.host.add_dock(dock, hidden=False, width=360)
        dock.show()
        dock.raise_()
        self._update_dock(dock)
        return dock

    def settings_for(self, layer: str) -> ViewSettings:
        """The view settings of ``layer`` now (the session's and its panel's page)."""
        s = self.host.session
        size = int(self.host.page_channels(layer))
        result = self.host.result  # the sample shown is the run's (live mode picks one)
        sample = int(result.spec.sample) if result is not None else 0
        return ViewSettings(
            colormap=s.colormap,
            normalize=s.normalize,
            first_channel=int(s.page_start(layer, size)),
            page_size=size,
            sample=sample,
        )

    def _update_dock(self, dock: PluginViewDock, prepared: Any = None) -> None:
        if prepared is None:
            result = self.host.result
            prepared = result.layers.get(dock.layer) if result is not None else None
        if prepared is not None:
            dock.show_layer(prepared, self.settings_for(dock.layer))

    def _on_panel_shown(self, name: str, _panel: Any, prepared: Any) -> None:
        for (layer, _key), dock in list(self.docks.items()):
            if layer == name:
                self._update_dock(dock, prepared)

    def _on_session_view_changed(self, what: str) -> None:
        if what in ("colormap", "normalize", "channel_pages", "page_channels"):
            for dock in list(self.docks.values()):
                self._update_dock(dock)

    def open_views(self) -> list[tuple[str, str]]:
        """``(layer, view name)`` of the active views open (what File > Export writes)."""
        return [(d.layer, d.view.name) for d in self.docks.values() if d.record.active]

    def session_part(self) -> dict[str, Any]:
        """The layer views open, ``[[layer, "plugin/view"], ...]``."""
        views = [
            [layer, key]
            for (layer, key), dock in self.docks.items()
            if dock.record.active and not dock.isHidden()
        ]
        return {"plugin_views": views} if views else {}

    def restore_session_part(self, parts: Any) -> None:
        """Open the session's layer views (closing others); missing plugins named in the banner."""
        saved = parts.get("plugin_views") or []
        wanted = [
            (str(entry[0]), str(entry[1]))
            for entry in saved if isinstance(saved, list)
            if isinstance(entry, (list, tuple)) and len(entry) == 2
        ]  # fmt: skip
        for key, dock in list(self.docks.items()):
            if key not in wanted:
                del self.docks[key]
                self._drop_dock(dock)
        missing = [f"{key} of {layer}" for layer, key in wanted if not self.open_view(layer, key)]
        if missing:
            self.host.show_warning(
                "Plugin views not restored (their plugin is not installed here, or is "
                f"disabled): {', '.join(missing)}",
                "plugins",
            )

    def export_writers(self) -> list[Any]:
        """The ``layer_writers`` of File > Export: the layer views open in the window."""
        views = self.open_views()
        return self.registry.export_writers(views=views) if views else []

    def _on_plugin_failed(self, record: PluginRecord) -> None:
        self._report(record)
        self._withdraw(record)
        if self.dialog is not None:
            self.dialog.refresh()

    def claim(self, exc: Exception, tb: TracebackType | None) -> bool:
        """Disable the plugin whose frames raised ``exc`` (True), or leave it to others."""
        found = None if self._closed else self.registry.record_of_traceback(tb)
        if found is None:
            return False
        record, where = found
        self.registry.fail(record, where, exc)
        return True

    def _report(self, record: PluginRecord) -> None:
        self.reports.append((record.name, record.failed_in))
        self.host.show_error(record.error, source=f"plugin:{record.name}", details=record.details)

    def _withdraw(self, record: PluginRecord) -> None:
        for phost in self.hosts.pop(record.name, []):
            phost.withdraw()
        for key, dock in list(self.docks.items()):
            if dock.record is record:
                del self.docks[key]
                self._drop_dock(dock)

    def _drop_dock(self, dock: PluginViewDock) -> None:
        dock.hide()
        dock.toggleViewAction().setVisible(False)
        self.host.remove_dock(dock)
        dock.deleteLater()

    def disabled(self) -> set[str]:
        """The plugins the user disabled (kept in the window's settings)."""
        return disabled_plugins(self.host.settings)

    def set_enabled(self, record: PluginRecord, on: bool) -> None:
        """Enable or disable ``record`` from the next start; disabling stops it now."""
        names = self.disabled()
        names.discard(record.name) if on else names.add(record.name)
        store = getattr(self.host.settings, "store", None)
        if store is not None:
            store.setValue(DISABLED_KEY, sorted(names))
            store.sync()
        if not on and record.active:
            self.registry.disable(record)
            self._withdraw(record)

    def show_dialog(self) -> PluginsDialog:
        """Help > Plugins (window-modal, not blocking)."""
        if self.dialog is None:
            self.dialog = PluginsDialog(
                self.registry, self.disabled, self.set_enabled, self.host.dialog_parent()
            )
        self.dialog.refresh()
        self.dialog.open()
        return self.dialog

    def stop(self) -> None:
        _release_exceptions(self)
        if self._listener in self.registry.failure_listeners:
            self.registry.failure_listeners.remove(self._listener)
        self.host.session.model_changed.disconnect(self._on_first_model)
        if self.dialog is not None:
            self.dialog.close()
