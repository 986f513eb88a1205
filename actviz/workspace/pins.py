"""Pinned results: captures kept beside the latest one (no Qt) until unpinned or another model
opens.

The newest pins stay in memory up to a modest share of the memory budget
(:func:`~actviz.workspace.budget.pins_memory_share`); the captures of older ones are parked on
disk (:mod:`actviz.workspace.pin_store`) and read back transparently when shown, compared or
saved, so pinning does not make the process grow without bound. A pin that would still take
the memory held over the budget (a capture that cannot be parked) is refused.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actviz.core import allocator
from actviz.core.capture import format_bytes
from actviz.workspace import pin_store
from actviz.workspace.budget import default_budget, pins_memory_share

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult

__all__ = ["Pin", "PinBoard", "PinRefused"]


class PinRefused(ValueError):
    """Pinning would take the memory held over the budget (the message says by how much)."""


@dataclass(eq=False)
class Pin:
    """One pinned result and how the menus name it."""

    label: str
    result: RunResult = field(repr=False)
    pinned_at: float = field(default_factory=time.time)

    @property
    def nbytes(self) -> int:
        return int(self.result.nbytes)

    @property
    def parked(self) -> bool:
        """Whether the pinned capture's tensors wait on disk (read back when used)."""
        cap = getattr(self.result, "capture", None)
        return cap is not None and pin_store.is_parked(cap)


class PinBoard:
    """The pinned results of one session, oldest first; ``on_change()`` after every change."""

    def __init__(
        self, on_change: Callable[[], Any] | None = None, *, memory_share: int | None = None
    ) -> None:
        self._pins: list[Pin] = []
        self.on_change = on_change
        #: Bytes the newest pins may keep in memory (None: a share of the budget in use).
        self.memory_share = memory_share
        # The idle trim hands back what parked pins' reads paged in (any thread).
        allocator.on_release(weakref.WeakMethod(self.release_parked))

    def __len__(self) -> int:
        return len(self._pins)

    def __iter__(self) -> Iterator[Pin]:
        return iter(list(self._pins))

    def find(self, result: RunResult | None) -> Pin | None:
        """The pin holding ``result`` (by identity), or None."""
        return next((p for p in self._pins if p.result is result), None)

    def pin(self, result: RunResult, label: str, *, budget: int | None = None) -> Pin:
        """Keep ``result`` (again: the existing pin); ``PinRefused`` beyond ``budget`` bytes."""
        existing = self.find(result)
        if existing is not None:
            return existing
        pin = Pin(self.unique_label(label), result)
        self._pins.append(pin)
        self._park_older(budget)
        held = self.memory_bytes
        if budget is not None and held > budget:
            self._pins.remove(pin)
            parked = self.nbytes + int(result.nbytes) - held
            raise PinRefused(
                f"pinning needs {format_bytes(result.nbytes)} more; the pins would keep "
                f"{format_bytes(held)} in memory, over the {format_bytes(budget)} memory "
                f"budget ({format_bytes(parked)} parked on disk; "
                f"{format_bytes(pin_store.disk_free())} free there). "
                "Unpin some results or raise the budget"
            )
        self._changed()
        return pin

    def _park_older(self, budget: int | None) -> None:
        """Park the captures of all but the newest pins that fit in the memory share."""
        share = self.memory_share
        if share is None:
            share = pins_memory_share(default_budget() if budget is None else budget)
        kept = 0
        for pin in reversed(self._pins):
            if pin.parked:
                continue
            kept += pin.nbytes
            cap = getattr(pin.result, "capture", None)
            if kept > share and cap is not None and pin_store.park_capture(cap) is not None:
                kept -= pin.nbytes
                # A what-if pin's unedited capture goes with it (not counted in nbytes).
                baseline = getattr(pin.result, "baseline", None)
                if baseline is not None and baseline is not cap:
                    pin_store.park_capture(baseline)

    def release_parked(self) -> None:
        """Hand back the memory that reading parked pins paged in (they stay on disk)."""
        for pin in list(self._pins):
            for cap in (
                getattr(pin.result, "capture", None),
                getattr(pin.result, "baseline", None),
            ):
                parked = pin_store.parked_file(cap) if cap is not None else None
                if parked is not None:
                    pin_store.release(parked)

    def unique_label(self, label: str) -> str:
        """``label``, or ``label (2)``, ``(3)``... when a pin already has it (two pins made in
        the same second of the same input would otherwise share one, and session files
        name pins by their labels)."""
        taken = {p.label for p in self._pins}
        wanted, n = label, 1
        while wanted in taken:
            n += 1
            wanted = f"{label} ({n})"
        return wanted

    def unpin(self, pin: Pin) -> None:
        """Let ``pin``'s result go (freed unless the panels show it)."""
        if pin in self._pins:
            self._pins.remove(pin)
            self._changed()

    def clear(self) -> None:
        if self._pins:
            self._pins.clear()
            self._changed()

    @property
    def nbytes(self) -> int:
        """Bytes the pinned captures hold, in memory and parked on disk."""
        return sum(p.nbytes for p in self._pins)

    @property
    def memory_bytes(self) -> int:
        """Bytes the pinned captures keep in memory (the parked ones left out)."""
        return sum(p.nbytes for p in self._pins if not p.parked)

    def held_bytes(self, current: RunResult | None) -> int:
        """Bytes ``current`` and the pins keep in memory together (a pinned current counted
        once; parked pins left out)."""
        extra = 0 if current is None or self.find(current) is not None else int(current.nbytes)
        if extra and getattr(current, "capture", None) is not None:
            extra = 0 if pin_store.is_parked(current.capture) else extra
        return self.memory_bytes + extra

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
