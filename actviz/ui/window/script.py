""":class:`Explorer`, the façade ``actviz.explore()`` returns; names that moved to a part
(:data:`MOVED`) still work for one release, with a :class:`MovedWarning`."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult
    from actviz.ui.panels.feature_map import LayerPanel
    from actviz.ui.worker import Job
    from actviz.workspace.session_state import Session


class MovedWarning(DeprecationWarning):
    """A name that moved from the window to one of its parts (or to its façade) was used."""


_MOVED_TO = {
    "host": "layer_panels channel_view show_tab set_tab_visible current_tab menu show_error "
    "show_warning clear_messages show_status model_dialog report_parts session_parts "
    "restore_session_parts refresh_panel page_channels show_input_image resize_dock "
    "dock_back add_tab add_dock add_menu_action add_toolbar add_status_widget reveal_panel "
    "fit_dock_width layout_state restore_layout_state sample_inputs dialog_parent "
    "fill_tile_menu add_tile_menu_entries offer_pin_comparison offer_session_store "
    "add_prediction_widget set_prediction_bars_visible add_overview_widget show_run "
    "stop_current_run adopt_model set_view_settings show_result set_target_text",
    "runs": "run schedule_run run_if_due auto_run",
    "files": "open_model_source open_input_source load_demo open_default_input open_dropped "
    "is_loading",
    "display": "selected_layer gradients_visible select_layer open_channel turn_page "
    "defer_display display_pending panel_updates_pending flush_panel_updates",
    "exports": "last_export export_all export_panel_png export_layer_npy",
    "pins_ui": "pin_result show_pinned unpin_shown unpin_all compare_with_pin",
    "commands": "colormap",
    "model_dock": "tree_context_menu",
    "session": "result",
    "script": "set_model set_input tick untick panel wait_idle",
}
#: Names that moved from the window to a part: ``{name: part}`` (``window.<part>.<name>``).
MOVED: Mapping[str, str] = {n: part for part, names in _MOVED_TO.items() for n in names.split()}


def moved(window: Any, name: str) -> Any:
    """``window.<part>.<name>`` for a name that moved (:data:`MOVED`), with a warning."""
    if (part := MOVED.get(name)) is None:
        raise AttributeError(f"{type(window).__name__!r} object has no attribute {name!r}")
    warnings.warn(f"window.{name} moved: use window.{part}.{name}", MovedWarning, stacklevel=3)
    return getattr(getattr(window, part), name)


def window_of(shown: Any) -> Any:
    """The window of an :class:`Explorer` (a window is its own)."""
    return shown._window if isinstance(shown, Explorer) else shown


class Explorer:
    """The explorer window as a script sees it (``actviz.explore(..., block=False)``)."""

    def __init__(self, window: Any) -> None:
        self._window = window

    def __repr__(self) -> str:
        return f"Explorer({self._window.windowTitle()!r})"

    def __getattr__(self, name: str) -> Any:
        # The window itself was returned before: its other names work for one release.
        if name.startswith("__"):
            raise AttributeError(name)
        text = f"actviz.explore() returns an Explorer: {name!r} is the window's, not the script's"
        warnings.warn(text, MovedWarning, stacklevel=2)
        return getattr(self._window, name)

    @property
    def session(self) -> Session:
        """The state: model, input, ticks, target, settings, pins, the result."""
        return self._window.session

    @property
    def result(self) -> RunResult | None:
        """The result the panels show (None before the first run)."""
        return self._window.session.result

    def run(self) -> Job | None:
        """Start a run now (Ctrl+R); returns its job, or None when it cannot run."""
        return self._window.runs.run()

    def panel(self, layer: str) -> LayerPanel | None:
        """The panel showing ``layer`` (None when it has none)."""
        return self._window.display.layer_panels.get(layer)

    def set_model(
        self,
        model: Any,
        *,
        name: str | None = None,
        categories: Sequence[str] | None = None,
        layers: Sequence[str] | None = None,
    ) -> None:
        """Show an in-memory ``nn.Module`` with ``layers`` ticked (None: defaults)."""
        w = self._window
        w.runs.stop()
        w.files.drop_model_load("Opening the model was replaced by an in-memory model.")
        w.host.clear_messages()
        w.session.set_model(model, name=name, categories=categories, ticks=layers)
        w.files.inputs.start_waiting()

    def set_input(
        self, value: Any, *, image: np.ndarray | None = None, description: str = ""
    ) -> None:
        """Use an in-memory tensor (or tuple/dict of tensors) as the input."""
        self._window.files.inputs.drop()
        self._window.session.set_input(
            value, source="", kind="tensor", image=image, description=description
        )

    def tick(self, *names: str | Sequence[str], ticked: bool = True) -> None:
        """Tick layers by name (or a list); ``ticked=False`` unticks. ValueError if unknown."""
        self.session.set_ticked(_known_layers(self.session, names), ticked)

    def untick(self, *names: str | Sequence[str]) -> None:
        """Untick layers by name (deprecated: ``tick(..., ticked=False)``)."""
        warnings.warn("untick(...) is tick(..., ticked=False)", MovedWarning, stacklevel=2)
        self.tick(*names, ticked=False)

    def wait_idle(self, timeout_ms: int = 60_000) -> bool:
        """Process events until nothing runs and the panels are current; False on timeout."""
        w, end = self._window, time.monotonic() + timeout_ms / 1000
        w.wait_until(lambda: time.monotonic() > end or not w.pending_work())
        w.display.flush_panel_updates()
        return not w.pending_work()

    def close(self) -> bool:
        """Close the window (its workers stop, its features let go of the model)."""
        return self._window.close()


def _known_layers(session: Session, names: tuple[str | Sequence[str], ...]) -> list[str]:
    flat: list[str] = []
    for name in names:
        if isinstance(name, str):
            flat.append(name)
        elif isinstance(name, bool) or not isinstance(name, Sequence):
            raise TypeError(
                f"tick() takes layer names (str, or lists of them), not {name!r}; "
                "untick with untick() or ticked=False"
            )
        else:
            flat.extend(name)
    if session.model is None:
        raise ValueError(f"no model is shown, so there are no layers to tick ({flat})")
    from actviz.core.tree import resolve_layers

    return resolve_layers(session.model, flat)  # ValueError with close matches
