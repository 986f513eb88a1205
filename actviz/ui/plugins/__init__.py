"""Plugins in the window: :func:`attach_plugins` builds the registry and the feature wiring it in
(public API: :mod:`actviz.plugins`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from actviz.ui.plugins.feature import PluginsFeature, disabled_plugins
from actviz.workspace.plugin_registry import PluginRegistry, plugins_off_by_env

__all__ = ["INSTALLED", "PluginsFeature", "attach_plugins", "build_registry"]

#: ``plugins=INSTALLED``: the installed plugins (entry points), as ``actviz`` starts with.
INSTALLED = "installed"


def build_registry(plugins: Any, *, disabled: Iterable[str] = ()) -> PluginRegistry:
    """The registry of ``plugins``: None, :data:`INSTALLED` (none under
    ``ACTVIZ_NO_PLUGINS=1``), a registry, or a list of plugin objects, ``"module:attr"``
    strings or installed entry-point names."""
    if isinstance(plugins, PluginRegistry):
        return plugins
    registry = PluginRegistry()
    if plugins is None:
        return registry
    if isinstance(plugins, str):
        plugins = [plugins]
    for given in plugins:
        if given == INSTALLED:
            if not plugins_off_by_env():
                registry.discover(disabled=disabled)
        elif isinstance(given, str) and ":" not in given:
            from importlib.metadata import entry_points

            from actviz.plugins import ENTRY_POINT_GROUP

            found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == given]
            if not found:
                raise ValueError(f"no installed actviz plugin is named {given!r}")
            registry.discover(disabled=disabled, entry_points=found)
        else:
            registry.add(given)
    return registry


def attach_plugins(window: Any, plugins: Any) -> PluginsFeature:
    """Load ``plugins`` into ``window``; the feature hosting them (``features["plugins"]``)."""
    registry = build_registry(plugins, disabled=disabled_plugins(window.settings))
    feature = PluginsFeature(window, registry)
    window.features[feature.name] = feature
    return feature
