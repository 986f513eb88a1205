"""Old attribute names of the window, kept only while the test suite moves onto
:mod:`actviz.testing` and the parts' own names; nothing in ``actviz`` uses them."""

from __future__ import annotations

from typing import Any

_PARTS = {
    "commands": (
        "open_model_action open_input_action run_action cancel_action export_all_action "
        "export_png_action export_npy_action quit_action pin_action unpin_action "
        "unpin_all_action gradients_action auto_run_action sample_combo target_combo "
        "colormap_combo normalize_combo export_button recent_models_menu recent_inputs_menu "
        "pins_menu"
    ),
    "centre": (
        "banner tabs layers_splitter layers_scroll layers_container layers_grid "
        "layers_placeholder channel_box overview_tab prediction_panel "
        "saliency_panel gradcam_panel grad_flow_panel stats_table histogram_panel"
    ),
    "status": "status_label progress_bar timing_label",
    "model_dock": "filter_edit tree_model tree_proxy tree_view details input_preview",
}
_ALIASES = {name: part for part, names in _PARTS.items() for name in names.split()}
_FEATURES = {"whatif", "compare", "dataset", "tokens"}


class LegacyAliases:
    """Resolves the window's former alias attributes to the objects they named."""

    def __getattr__(self, name: str) -> Any:
        if name in _ALIASES:
            return getattr(self.__dict__[_ALIASES[name]], name)
        features = self.__dict__.get("features", {})
        if name in _FEATURES and name in features:
            return features[name]
        if name == "live" and "live" in features:
            return features["live"].controller
        if name in ("live_dock", "live_status_label") and "live" in features:
            return getattr(features["live"], name.removeprefix("live_"))
        raise AttributeError(name)
