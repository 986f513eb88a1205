"""A plugin feature's host: each callback guarded (an exception reports once and disables the
plugin), and what it added remembered, to go when it is disabled.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QWidget

from actviz.ui.host import HOST_SIGNALS
from actviz.workspace.plugin_registry import PluginRecord, PluginRegistry
from actviz.workspace.session_state import Event

#: The host's signals: a slot connected to them is guarded.
_SIGNALS = frozenset(HOST_SIGNALS)


def fit_args(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with at most the positional arguments it takes, as Qt does for slots."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return fn
    count = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    return lambda *args: fn(*args[:count])


class _GuardedSignal:
    """A signal whose connected slots are guarded."""

    def __init__(self, signal: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]):
        self._signal = signal
        self._wrap = wrap
        self._slots: dict[Any, Callable[..., Any]] = {}

    def connect(self, slot: Callable[..., Any], *args: Any) -> Any:
        guarded = self._slots.setdefault(slot, self._wrap(slot))
        return self._signal.connect(guarded, *args)

    def disconnect(self, slot: Callable[..., Any] | None = None) -> Any:
        if slot is None:
            for guarded in self._slots.values():
                self._signal.disconnect(guarded)
            self._slots.clear()
            return True
        return self._signal.disconnect(self._slots.pop(slot, slot))

    def emit(self, *args: Any) -> None:
        self._signal.emit(*args)

    def disconnect_all(self) -> None:
        for guarded in self._slots.values():
            try:
                self._signal.disconnect(guarded)
            except (RuntimeError, TypeError):  # already gone with its sender
                pass
        self._slots.clear()


class _GuardedEvent(_GuardedSignal):
    """A session :class:`~actviz.workspace.session_state.Event` whose callbacks are guarded."""


class _GuardedSession:
    """The session, its events handing out guarded connections; everything else as is."""

    def __init__(self, session: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_wrap", wrap)
        object.__setattr__(self, "_events", {})

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._session, name)
        if isinstance(value, Event):
            events = self._events
            if name not in events:
                events[name] = _GuardedEvent(value, self._wrap)
            return events[name]
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._session, name, value)

    def disconnect_all(self) -> None:
        for event in self._events.values():
            event.disconnect_all()


def _kept(method: str, kind: str) -> Callable[..., None]:
    """The window's ``method`` adding ``item``, remembered as ``kind`` (withdrawn later)."""

    def add(host: PluginHost, item: QWidget, *args: Any, **kwargs: Any) -> None:
        getattr(host._window, method)(item, *args, **kwargs)  # noqa: SLF001
        host.added.append((kind, item))

    add.__name__ = method
    return add


class PluginHost:
    """The window as one plugin sees it (see the module docs)."""

    def __init__(self, window: Any, registry: PluginRegistry, record: PluginRecord) -> None:
        self._window = window
        self._registry = registry
        self._record = record
        self._signals: dict[str, _GuardedSignal] = {}
        self.session = _GuardedSession(window.session, self._wrap)
        #: What the plugin added to the window (removed when it is disabled).
        self.added: list[tuple[str, Any]] = []

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "a slot")
        return self._registry.guard(self._record, fit_args(fn), f"slot {name}")

    def __getattr__(self, name: str) -> Any:
        if name in _SIGNALS:
            if name not in self._signals:
                self._signals[name] = _GuardedSignal(getattr(self._window, name), self._wrap)
            return self._signals[name]
        return getattr(self._window, name)

    def add_tile_menu_entries(self, fill: Callable[..., None]) -> None:
        self._window.add_tile_menu_entries(self._wrap(fill))

    def defer_display(self, step: Callable[[], None], *, stale_ok: bool = False) -> None:
        self._window.defer_display(self._wrap(step), stale_ok=stale_ok)

    add_tab = _kept("add_tab", "tab")
    add_dock = _kept("add_dock", "dock")
    add_toolbar = _kept("add_toolbar", "widget")
    add_status_widget = _kept("add_status_widget", "widget")
    add_overview_widget = _kept("add_overview_widget", "widget")
    add_prediction_widget = _kept("add_prediction_widget", "widget")

    def add_menu_action(self, menu: str, action: Any, **kwargs: Any) -> None:
        self._window.add_menu_action(menu, action, **kwargs)
        self.added.append(("action", action))

    def withdraw(self) -> None:
        """Take back what the plugin added and stop its connections (it is disabled)."""
        for signal in self._signals.values():
            signal.disconnect_all()
        self.session.disconnect_all()
        for kind, item in self.added:
            try:
                if kind == "tab":
                    self._window.set_tab_visible(item, False)
                elif kind == "dock":
                    item.hide()
                    item.toggleViewAction().setVisible(False)
                elif kind == "action":
                    item.setEnabled(False)
                    item.setVisible(False)
                else:
                    item.hide()
            except RuntimeError:  # deleted already
                pass


class GuardedFeature:
    """A plugin's feature, each call guarded (a failure disables it, not Esc or closing)."""

    def __init__(
        self, feature: Any, name: str, registry: PluginRegistry, record: PluginRecord
    ) -> None:
        self.feature = feature
        self.name = name
        self._registry = registry
        self._record = record

    def _call(self, method: str, default: Any, *args: Any) -> Any:
        fn = getattr(self.feature, method, None)
        if fn is None:
            return default
        guarded = self._registry.guard(self._record, fn, f"{self.name}.{method}", default)
        return guarded(*args)

    def cancel(self) -> bool:
        return bool(self._call("cancel", False))

    def is_busy(self) -> bool:
        return bool(self._call("is_busy", False))

    def reset_layout(self) -> None:
        self._call("reset_layout", None)

    def shutdown(self) -> None:
        self._call("shutdown", None)

    def __getattr__(self, name: str) -> Any:
        # session_part / report_part / restore_session_part and the plugin's own API.
        value = getattr(self.feature, name)
        if callable(value):
            return self._registry.guard(self._record, value, f"{self.name}.{name}")
        return value
