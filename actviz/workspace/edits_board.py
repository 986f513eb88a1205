"""The window's edits, without widgets: :class:`EditBoard` (an ordered, toggleable list of
frozen edits) and :class:`BaselineCache` (the unedited capture of the same input)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.capture import Capture
    from actviz.core.edit_kinds import Edit

T = TypeVar("T")
#: ``EditBoard.add``'s ``model`` when the caller names none: the edit is of the model shown.
_SHOWN: Any = object()
#: Edits that change nothing when made twice in a row on one layer.
IDEMPOTENT_KINDS = ("ablate", "keep", "clamp")


class StaleEditError(ValueError):
    """An edit made on another model than the board's (a stale menu clicked after a model
    switch) or on a layer it lacks: refused when made, not left to fail every run."""


@dataclass(frozen=True)
class EditEntry:
    """One edit of the board: ``key`` names it while the edit itself is replaced."""

    key: int
    layer: str
    edit: Edit
    note: str = ""  #: Where a patch takes its values (the pin's label), for the dock.

    def describe(self) -> str:
        """``layer: ablate ch 3`` (what the dock says; ``(pin 1)`` after a patch)."""
        text = f"{self.layer}: {self.edit.describe()}"
        return f"{text} ({self.note})" if self.note else text


def edit_value(edit: Edit) -> float | None:
    """The number the user may change: a scale's factor (None for other kinds)."""
    return float(edit.factor) if edit.kind == "scale" and edit.factor is not None else None


def with_value(edit: Edit, value: float) -> Edit:
    """``edit`` with its number (:func:`edit_value`) set to ``value``: a new edit."""
    if edit.kind == "scale":
        return dataclasses.replace(edit, factor=float(value))
    raise ValueError(f"a {edit.kind} edit has no value to change")


class Board(Generic[T]):
    """Items in the order added (a board of pins or edits); ``on_change()`` after every change."""

    def __init__(self, on_change: Callable[[], Any] | None = None) -> None:
        self._entries: list[T] = []
        self._on_change: Callable[[], Any] = on_change or (lambda: None)
        self._held: int = 0  # inside batch(): changes are noted, announced once at its end
        self._missed = False

    def _changed(self) -> None:
        if self._held:
            self._missed = True
        else:
            self._on_change()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Several changes, one ``on_change()`` at the end (none when nothing changed): a
        session's twenty edits rebuild the dock once, not twenty times."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held and self._missed:
                self._missed = False
                self._on_change()

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._entries))

    def clear(self) -> None:
        if self._entries:
            self._entries.clear()
            self._changed()


class EditBoard(Board[EditEntry]):
    """The edits of one session in the order made, all of one model (``model``, set by
    :meth:`reset`; None: unchecked)."""

    def __init__(self, on_change: Callable[[], Any] | None = None) -> None:
        super().__init__(on_change)
        self._keys = itertools.count(1)
        self.model: Any = None
        # The layer names edits may name (None: unchecked), the model's module tree.
        self._layers: Container[str] | None = None

    @property
    def entries(self) -> tuple[EditEntry, ...]:
        return tuple(self._entries)

    def get(self, key: int) -> EditEntry:
        """The entry named ``key`` (KeyError when it was removed)."""
        for entry in self._entries:
            if entry.key == key:
                return entry
        raise KeyError(key)

    def reset(self, model: Any, layers: Container[str] | None = None) -> None:
        """Another model is shown: edits go; only ``model``'s on ``layers`` (None: any) come."""
        self.model, self._layers = model, layers
        self.clear()

    def add(self, layer: str, edit: Edit, note: str = "", *, model: Any = _SHOWN) -> EditEntry:
        """Add ``edit`` on ``layer`` after its earlier edits; ``note`` says where a patch takes its
        values, ``model`` is the one it was made on (omitted: the shown one). A repeat is not added
        (:meth:`repeats`' entry is returned); ``StaleEditError`` for a stale model or layer."""
        if model is not _SHOWN and model is not self.model:
            raise StaleEditError(
                f"the edit of {layer} was offered for the model shown before: "
                "the model changed since, so it was not made"
            )
        if self._layers is not None and layer not in self._layers:
            raise StaleEditError(f"the model shown has no layer {layer!r}: the edit was not made")
        if (repeated := self.repeats(layer, edit)) is not None:
            return repeated
        entry = EditEntry(next(self._keys), layer, edit, note)
        self._entries.append(entry)
        self._changed()
        return entry

    def repeats(self, layer: str, edit: Edit) -> EditEntry | None:
        """The entry ``edit`` would repeat: the last one switched on for ``layer`` when it is
        the same edit and doing it twice changes nothing (ablate, keep, clamp); else None."""
        last = [e for e in self._entries if e.layer == layer and e.edit.enabled][-1:]
        return last[0] if last and edit.kind in IDEMPOTENT_KINDS and last[0].edit == edit else None

    def replace(self, key: int, edit: Edit) -> EditEntry:
        """Put ``edit`` in the place of entry ``key`` (same key, same position)."""
        old = self.get(key)
        if old.edit == edit:
            return old
        new = dataclasses.replace(old, edit=edit)
        self._entries[self._entries.index(old)] = new
        self._changed()
        return new

    def set_enabled(self, key: int, enabled: bool) -> EditEntry:
        """Switch entry ``key`` on or off (an off edit stays listed; runs skip it)."""
        return self.replace(key, dataclasses.replace(self.get(key).edit, enabled=bool(enabled)))

    def set_value(self, key: int, value: float) -> EditEntry:
        """Change entry ``key``'s number (:func:`with_value`)."""
        return self.replace(key, with_value(self.get(key).edit, value))

    def remove(self, key: int) -> None:
        self._entries.remove(self.get(key))
        self._changed()

    def active(self) -> list[EditEntry]:
        return [e for e in self._entries if e.edit.enabled]

    def request_edits(self) -> dict[str, tuple[Edit, ...]]:
        """``{layer: (edit, ...)}`` of the edits switched on, as ``capture(edits=)`` takes."""
        out: dict[str, tuple[Edit, ...]] = {}
        for entry in self.active():
            out[entry.layer] = (*out.get(entry.layer, ()), entry.edit)
        return out

    def descriptions(self) -> dict[str, str]:
        """``{layer: "ablate ch 3; scale ch 5 x0.5"}`` of the edits switched on (badges)."""
        edits = self.request_edits().items()
        return {layer: "; ".join(e.describe() for e in items) for layer, items in edits}


@dataclass(frozen=True, eq=False)
class BaselineKey:
    """What makes an unedited capture reusable: the same model and input objects, layers,
    target and input-gradient choice (compared by identity for the model and the input)."""

    model: Any
    inputs: Any
    layers: tuple[str, ...]
    target: Any
    input_grads: bool

    def matches(self, other: BaselineKey) -> bool:
        same = (self.layers, self.target, self.input_grads)
        same_too = same == (other.layers, other.target, other.input_grads)
        return self.model is other.model and self.inputs is other.inputs and same_too


class BaselineCache:
    """The unedited capture of the latest input, for edited runs to compare with; written on the
    worker thread and cleared on the GUI thread, so a lock guards the one entry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entry: tuple[BaselineKey, Capture] | None = None

    def get(self, key: BaselineKey) -> Capture | None:
        with self._lock:
            if self._entry is not None and self._entry[0].matches(key):
                return self._entry[1]
        return None

    def put(self, key: BaselineKey, cap: Capture) -> None:
        with self._lock:
            self._entry = (key, cap)

    def clear(self) -> None:
        with self._lock:
            self._entry = None

    @property
    def held(self) -> Capture | None:
        """The capture kept (None when empty)."""
        with self._lock:
            return self._entry[1] if self._entry is not None else None
