"""A plugin's layer view in the window: one dock per (layer, view) the user opened. With each
result and view change the layer's arrays go through the plugin's ``prepare`` to its widget's
``set_data``, both guarded.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QLabel, QWidget

from actviz.plugins import LayerView, ViewContext, ViewSettings
from actviz.workspace.plugin_registry import PluginRecord, PluginRegistry, layer_data

__all__ = ["PluginViewDock", "view_key"]


def view_key(record: PluginRecord, view: LayerView) -> str:
    """``"plugin/view"``: a view's name across plugins."""
    return f"{record.name}/{view.name}"


class PluginViewDock(QDockWidget):
    """One plugin layer view of one layer: ``widget_of_view`` (None when building it failed)
    and ``last_data``, what ``prepare`` gave for the result shown last."""

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
        """Prepare ``prepared_layer`` (a :class:`~actviz.display.prepared.PreparedLayer`) and
        hand it to the widget; False when the plugin is off or failed now."""
        if self._set_data is None or not self.record.active:
            return False
        data = self._prepare(layer_data(prepared_layer), settings)
        if data is None or not self.record.active:
            return False
        self.last_data = data
        self._set_data(data)
        return self.record.active
