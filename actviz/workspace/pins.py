"""Pinned results: captures kept beside the latest one (no Qt) until unpinned or another model
opens. The newest stay in memory up to :data:`PINS_IN_MEMORY` of the budget; older captures are
parked on disk (:func:`park_capture`) and read back transparently when shown, compared or saved,
so pins cannot grow the process without bound (#37). A pin that would still take the memory
held over the budget (it cannot be parked) is refused.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from actviz.core import allocator
from actviz.core.capture import format_bytes
from actviz.core.structures import iter_tensors, map_tensors
from actviz.workspace.budget import default_budget

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult

__all__ = ["Pin", "PinBoard", "PinRefused", "park_capture", "parked_storage", "release"]

#: The share of the memory budget the newest pins keep in memory: a few ResNet-sized pins stay
#: instant to show, and pins cannot grow the process past an eighth of the budget.
PINS_IN_MEMORY = 0.125
#: Disk space parking leaves free in the temp folder's file system (bytes).
DISK_RESERVE = 1 << 30
_FIELDS = ("inputs", "output", "grad_output", "grad_inputs")
_parked: dict[int, tuple[weakref.ref, torch.UntypedStorage]] = {}  # id(capture) -> its mapping
_folder: list[str] = []


def pins_folder() -> str:
    """This process's temp folder for parked pins (removed at exit; files go once mapped)."""
    if not _folder:
        _folder.append(tempfile.mkdtemp(prefix=f"actviz-pins-{os.getpid()}-"))
        atexit.register(shutil.rmtree, _folder[0], True)
    return _folder[0]


def parked_storage(cap: Any) -> torch.UntypedStorage | None:
    """The file mapping ``cap``'s tensors were parked in (:func:`park_capture`), or None."""
    entry = _parked.get(id(cap))
    return entry[1] if entry is not None and entry[0]() is cap else None


def _parkable(t: torch.Tensor) -> bool:  # what comes back the same from raw bytes
    return (
        type(t) is torch.Tensor
        and t.device.type == "cpu"
        and t.layout == torch.strided
        and not (t.is_quantized or t.is_conj() or t.is_neg() or t.requires_grad)
    )


def park_capture(cap: Any) -> torch.UntypedStorage | None:
    """Move ``cap``'s CPU tensors into a ``MAP_SHARED`` mapping of an unlinked temp file (nothing
    is left behind, even after a crash); None if nothing moved (no such tensor, or the disk
    would keep under :data:`DISK_RESERVE` free). Records, dtypes, shapes, strides, values and
    shared storages stay as they were; reading pages the values back in.
    """
    if (done := parked_storage(cap)) is not None:
        return done
    slots = [(r, n) for r in cap.all_records() for n in _FIELDS]
    slots += [(cap, n) for n in ("output", "inputs", "input_grads")]
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage()
        for obj, name in slots
        for t in iter_tensors(getattr(obj, name, None))
        if _parkable(t) and t.untyped_storage().nbytes()
    }
    offsets, end = {}, 0
    for ptr, s in storages.items():  # 64-byte aligned: a whole number of items of any dtype
        offsets[ptr], end = end, end + (s.nbytes() + 63) // 64 * 64
    if not end or shutil.disk_usage(pins_folder()).free - end < DISK_RESERVE:
        return None
    fd, path = tempfile.mkstemp(suffix=".pin", dir=pins_folder())
    try:
        with os.fdopen(fd, "wb", buffering=0) as f:
            for ptr, s in storages.items():
                f.seek(offsets[ptr])
                f.write(memoryview(torch.empty(0, dtype=torch.uint8).set_(s).numpy()))
            f.truncate(end)
        mapped = torch.UntypedStorage.from_file(path, True, end)
    finally:
        os.unlink(path)  # the mapping keeps the data until its last tensor goes

    def moved(t: torch.Tensor) -> torch.Tensor:
        at = offsets.get(t.untyped_storage().data_ptr()) if _parkable(t) else None
        if at is None:
            return t
        offset = at // t.element_size() + t.storage_offset()
        return torch.empty(0, dtype=t.dtype).set_(mapped, offset, t.size(), t.stride())

    # New tensors in the same places: an array viewing an old one keeps that one valid.
    for obj, name in slots:
        if getattr(obj, name, None) is not None:
            setattr(obj, name, map_tensors(getattr(obj, name), moved))
    key = id(cap)
    _parked[key] = (weakref.ref(cap, lambda _ref: _parked.pop(key, None)), mapped)
    return mapped


def release(storage: torch.UntypedStorage) -> bool:
    """Drop a parked mapping's pages from resident memory (``MADV_DONTNEED``; shared, so they
    come back from the file on the next read); False where the system cannot."""
    try:
        madvise = ctypes.CDLL(None).madvise
    except (OSError, AttributeError):
        return False
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return madvise(storage.data_ptr(), storage.nbytes(), 4) == 0


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
        """Whether the capture waits on disk (read back when used)."""
        return parked_storage(getattr(self.result, "capture", None)) is not None


class PinBoard:
    """The pinned results of one session, oldest first; ``on_change()`` after every change.
    ``memory_share``: bytes the newest pins keep in memory (None: :data:`PINS_IN_MEMORY` of
    the budget)."""

    def __init__(
        self, on_change: Callable[[], Any] | None = None, *, memory_share: int | None = None
    ) -> None:
        self._pins: list[Pin] = []
        self.on_change = on_change
        self.memory_share = memory_share
        # The idle trim hands back what reading parked pins paged in (from its thread).
        allocator.release_hooks.append(weakref.WeakMethod(self.release_parked))

    def __len__(self) -> int:
        return len(self._pins)

    def __iter__(self) -> Iterator[Pin]:
        return iter(list(self._pins))

    def find(self, result: RunResult | None) -> Pin | None:
        """The pin holding ``result`` (by identity), or None."""
        return next((p for p in self._pins if p.result is result), None)

    def pin(self, result: RunResult, label: str, *, budget: int | None = None) -> Pin:
        """Keep ``result`` (again: the existing pin), parking older pins beyond the memory
        share; ``PinRefused`` when the pins would still keep over ``budget`` bytes in memory."""
        existing = self.find(result)
        if existing is not None:
            return existing
        pin = Pin(self.unique_label(label), result)
        self._pins.append(pin)
        share = self.memory_share
        if share is None:
            share = int((default_budget() if budget is None else budget) * PINS_IN_MEMORY)
        kept = 0
        for p in reversed(self._pins):  # the newest first: they stay while they fit
            kept += 0 if p.parked else p.nbytes
            cap = getattr(p.result, "capture", None)
            if not p.parked and kept > share and cap is not None and park_capture(cap) is not None:
                kept -= p.nbytes
                if getattr(p.result, "baseline", None) is not None:  # a what-if's unedited run
                    park_capture(p.result.baseline)
        held = self.memory_bytes
        if budget is not None and held > budget:
            self._pins.remove(pin)
            raise PinRefused(
                f"pinning needs {format_bytes(result.nbytes)} more; the pins would keep "
                f"{format_bytes(held)} in memory, over the {format_bytes(budget)} memory budget "
                f"(parking on disk leaves {format_bytes(DISK_RESERVE)} free there, "
                f"{format_bytes(shutil.disk_usage(pins_folder()).free)} now). "
                "Unpin some results or raise the budget"
            )
        self._changed()
        return pin

    def release_parked(self) -> None:
        """Hand back the memory that reading parked pins paged in (they stay on disk)."""
        for p in list(self._pins):
            for cap in (getattr(p.result, "capture", None), getattr(p.result, "baseline", None)):
                if (mapped := parked_storage(cap)) is not None:
                    release(mapped)

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
        """Bytes ``current`` and the pins keep in memory (a pinned current counted once)."""
        pinned = current is None or self.find(current) is not None
        parked = parked_storage(getattr(current, "capture", None)) is not None
        return self.memory_bytes + (0 if pinned or parked else int(current.nbytes))

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
