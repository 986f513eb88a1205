"""Pinned results: captures kept beside the latest one (no Qt) until unpinned or another model
opens; pins may hold :data:`PINS_SHARE` of the memory budget, so they cannot grow unbounded."""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from actviz.core.capture import format_bytes
from actviz.workspace.edits_board import Board

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult

#: The share of the memory budget pinned captures may hold (the rest is the shown run's).
PINS_SHARE = 0.25
#: Never hold arrays (a lazy value's lock included): not walked into.
_LOCK = type(threading.Lock())
_ATOMS = (int, float, str, bytes, bool, type(None), np.generic, torch.Tensor, _LOCK)
#: ``id(result) -> bytes`` of the results counted (a result is immutable; dropped with it).
_counted: dict[int, int] = {}


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
        return result_bytes(self.result)


def result_bytes(result: RunResult) -> int:
    """Bytes ``result`` holds: every tensor of its capture (and, after a what-if edit, of the
    unedited one beside it) and the arrays prepared for the panels, each counted once.

    The capture's ``nbytes`` counts its recorded outputs only; gradients, the panels' mosaics and
    magnitudes take several times that, and a pin keeps them all."""
    if (known := _counted.get(key := id(result))) is not None:
        return known
    kept = [getattr(result, name, None) for name in ("capture", "baseline")]
    held = sum(c.held_bytes() for c in kept if c is not None) or int(result.nbytes)
    roots: dict[int, int] = {}
    shown = ("layers", "image", "saliency", "grad_cams", "attention", "rollout", "logit_lens")
    _owned_arrays([getattr(result, name, None) for name in shown], roots, set())
    _counted[key] = held = held + sum(roots.values())
    weakref.finalize(result, _counted.pop, key, None)
    return held


def _owned_arrays(obj: Any, roots: dict[int, int], seen: set[int], depth: int = 0) -> None:
    """Add to ``roots`` the numpy buffers under ``obj`` that numpy owns (an array viewing a
    tensor is the capture's). Reads attributes as stored, so nothing lazy is made by counting."""
    if id(obj) in seen or depth > 6:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        while isinstance(obj.base, np.ndarray):
            obj = obj.base
        if obj.base is None:
            roots[id(obj)] = obj.nbytes
        return
    if isinstance(obj, dict | MappingProxyType):  # not any Mapping: reading a lazy one computes
        children = list(obj.values())
    elif isinstance(obj, list | tuple):
        children = obj
    else:
        children = list(getattr(obj, "__dict__", {}).values())
    for child in children:
        # Atoms are skipped here, not in a call each: most of a result's attributes are numbers.
        if not isinstance(child, _ATOMS) and not callable(child):
            _owned_arrays(child, roots, seen, depth + 1)


class PinBoard(Board[Pin]):
    """The pinned results of one session, oldest first."""

    def find(self, result: RunResult | None) -> Pin | None:
        """The pin holding ``result`` (by identity), or None."""
        return next((p for p in self._entries if p.result is result), None)

    def pin(self, result: RunResult, label: str, *, budget: int | None = None) -> Pin:
        """Keep ``result`` (again: the existing pin); ``PinRefused`` when the pins would hold
        more than :data:`PINS_SHARE` of a memory budget of ``budget`` bytes."""
        if (existing := self.find(result)) is not None:
            return existing
        total = self.nbytes + result_bytes(result)
        if budget is not None and total > int(budget * PINS_SHARE):
            raise PinRefused(
                f"pinning needs {format_bytes(result_bytes(result))} more; the pins would hold "
                f"{format_bytes(total)}, over their {format_bytes(int(budget * PINS_SHARE))} "
                f"(a quarter of the {format_bytes(budget)} memory budget). "
                "Unpin some results or raise the budget"
            )
        # A label taken gets " (2)", " (3)"...: session files name pins by label.
        taken = {p.label for p in self._entries}
        wanted, n = label, 1
        while wanted in taken:
            n += 1
            wanted = f"{label} ({n})"
        pin = Pin(wanted, result)
        self._entries.append(pin)
        self._changed()
        return pin

    def unpin(self, pin: Pin) -> None:
        """Let ``pin``'s result go (freed unless the panels show it)."""
        if pin in self._entries:
            self._entries.remove(pin)
            self._changed()

    @property
    def nbytes(self) -> int:
        """Bytes the pinned captures hold."""
        return sum(p.nbytes for p in self._entries)

    def held_bytes(self, current: RunResult | None) -> int:
        """Bytes held by ``current`` and the pins together (a pinned current counted once)."""
        extra = 0 if current is None or self.find(current) is not None else result_bytes(current)
        return self.nbytes + extra
