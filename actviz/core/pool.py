"""Warm memory for large CPU records, reused from one capture to the next, per model.

For models whose captures were seen to fault (:func:`observe`), :data:`HEAP_PIN` keeps the
highest large record alive so glibc cannot trim the heap; else records go into reused
buffers of :data:`POOL`. :func:`release_memory` gives everything back."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
import weakref
from typing import Any

import numpy as np
import torch

from actviz.core import allocator
from actviz.core.structures import iter_tensors, non_overlapping

#: Records smaller than this stay references: small blocks come from glibc's bins, warm.
MIN_BYTES = 128 * 1024
#: Free buffers kept at least up to this many bytes (when the last capture pooled fewer).
MIN_KEEP = 32 * 2**20
#: Never more free bytes than this, whatever the last capture pooled.
MAX_KEEP = 512 * 2**20
_ALIGN = 64  # what PyTorch's CPU allocator aligns to (vectorised kernels read aligned)
#: ``"auto"`` (per model, from the page faults its captures cause), ``"always"`` (copies),
#: ``"pin"`` (references kept warm by :data:`HEAP_PIN`) or ``"never"``.
MODE = "auto"
#: A forward that faults in at least this share of the bytes it records is costly to repeat...
FAULT_SHARE = 0.25
#: ...and this many such captures in a row (not the first, whose memory is always new) turn
#: the heap pin on for that model, and as many again with the pin on the copies.
FAULT_STREAK = 2
# What a model's forward-only captures do with large CPU records (the MODE choices).
_REFS, _PIN, _COPY = 0, 1, 2
# Per model: [captures seen, costly captures in a row, _REFS/_PIN/_COPY]. Weak: models can go.
_VERDICTS: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
try:
    import resource

    _getrusage: Any = resource.getrusage
    _RUSAGE_SELF = resource.RUSAGE_SELF
    _PAGE = resource.getpagesize()
except ImportError:  # not on Unix: no fault counts, no pool
    _getrusage, _RUSAGE_SELF, _PAGE = None, 0, 4096


class RecordPool:
    """Buffers by size, each given back when the last tensor on it is gone."""

    def __init__(self) -> None:
        # Re-entrant: a buffer can come back (a collected capture) while this thread holds it.
        self._lock = threading.RLock()
        self._free: dict[int, list[np.ndarray]] = {}
        self.free_bytes = 0
        #: free bytes kept at most (set from the last capture by :meth:`capture_done`)
        self.keep_bytes = MIN_KEEP
        self._pooled = 0  # bytes handed out since the last capture_done
        # Per buffer (by id, while it lives): its 64-byte aligned bytes.
        self._flat: dict[int, np.ndarray] = {}
        # The weak references that give buffers back, kept alive until they fire.
        self._watch: dict[int, weakref.ref] = {}
        #: buffers made and reused, for benchmarks and tests
        self.made = self.reused = 0

    def copy(self, t: torch.Tensor) -> torch.Tensor | None:
        """A detached copy of ``t`` in a pooled buffer, strides kept; None unless ``t`` is a
        dense CPU tensor of at least :data:`MIN_BYTES`."""
        if t.device.type != "cpu" or t.layout is not torch.strided or t.is_quantized:
            return None
        nbytes = t.numel() * t.element_size()
        if nbytes < MIN_BYTES:
            return None
        contiguous = t.is_contiguous()
        if not contiguous and not non_overlapping(t, dense=True):
            return None
        buf, flat = self._take(nbytes)
        # A new array per record: its death with the storage's last tensor gives the buffer back.
        view = flat[:]
        out = torch.from_numpy(view).view(t.dtype)
        out = out.view(t.shape) if contiguous else out.as_strided(t.size(), t.stride())
        ref = weakref.ref(view, functools.partial(self._give_back, buf))
        self._watch[id(ref)] = ref  # a weak reference fires only while it is alive itself
        out.copy_(t.detach())
        return out

    def _take(self, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            self._pooled += nbytes
            if free := self._free.get(nbytes):
                self.free_bytes -= nbytes
                self.reused += 1
                buf = free.pop()
                return buf, self._flat[id(buf)]
            self.made += 1
        buf = np.empty(nbytes + _ALIGN, np.uint8)
        start = -buf.ctypes.data % _ALIGN
        flat = buf[start : start + nbytes]
        with self._lock:
            self._flat[id(buf)] = flat
        return buf, flat

    def _give_back(self, buf: np.ndarray, ref: weakref.ref) -> None:
        nbytes = buf.nbytes - _ALIGN
        with self._lock:
            self._watch.pop(id(ref), None)
            if self.free_bytes + nbytes > self.keep_bytes:
                self._flat.pop(id(buf), None)
                return  # dropped: numpy frees it
            self._free.setdefault(nbytes, []).append(buf)
            self.free_bytes += nbytes

    def capture_done(self) -> None:
        """A capture has finished: keep as many free bytes as it pooled, for the next one."""
        if not self._pooled and self.keep_bytes == MIN_KEEP and self.free_bytes <= MIN_KEEP:
            return  # nothing pooled, nothing to trim (most captures): no lock taken
        with self._lock:
            self.keep_bytes = min(MAX_KEEP, max(MIN_KEEP, self._pooled))
            self._pooled = 0
            self._trim()

    def release(self) -> int:
        """Free every buffer not in use; returns the bytes given back."""
        with self._lock:
            freed, self.free_bytes = self.free_bytes, 0
            for bufs in self._free.values():
                for buf in bufs:
                    self._flat.pop(id(buf), None)
            self._free.clear()
            return freed

    def _trim(self) -> None:
        # Oldest sizes first: a shape not seen lately is the least likely to come again.
        for size in list(self._free):
            if self.free_bytes <= self.keep_bytes:
                return
            bufs = self._free[size]
            while bufs and self.free_bytes > self.keep_bytes:
                self._flat.pop(id(bufs.pop(0)), None)
                self.free_bytes -= size
            if not bufs:
                del self._free[size]


class HeapPin:
    """One past record's storage kept alive at the top of glibc's main heap, so freed records below
    it stay in malloc's free lists; the pin only rises."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # captures of two models may finish at once
        self.storage: torch.UntypedStorage | None = None
        self.address = 0  # where the pinned tensor's data starts (0: nothing pinned)
        self._start: int | None = None  # the heap's first byte; 0 where there is no [heap]
        self._sbrk: Any = None

    def available(self) -> bool:
        """Whether this process has a glibc ``[heap]`` to pin (Linux)."""
        if self._start is None:
            self._start, libc = 0, allocator._libc()
            with contextlib.suppress(OSError, AttributeError, ValueError):  # (no libc: None.sbrk)
                sbrk = libc.sbrk
                sbrk.restype, sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
                with open("/proc/self/maps", encoding="ascii") as fh:
                    line = next((x for x in fh if x.rstrip().endswith("[heap]")), "")
                if line:
                    self._start, self._sbrk = int(line.split("-", 1)[0], 16), sbrk
        return self._start > 0

    def update(self, tensors: Any) -> bool:
        """Pin the highest large CPU storage of ``tensors`` above the pin; whether a pin is held."""
        if not self.available():
            return False
        with self._lock:
            low, high = self._start, self._sbrk(0) or 0
            best, address = None, self.address
            for t in tensors:
                small = t.numel() * t.element_size() < MIN_BYTES
                if t.device.type != "cpu" or t.layout is not torch.strided or small:
                    continue
                where = t.data_ptr()  # a view's first element: inside its storage's chunk
                if address < where and low <= where < high:
                    best, address = t, where
            if best is not None:
                # Not for a subclass without a storage.
                with contextlib.suppress(RuntimeError, NotImplementedError):
                    self.storage, self.address = best.untyped_storage(), address
            return self.storage is not None

    def release(self) -> None:
        """Let the pinned storage go (freed with its record, if the record is gone too)."""
        with self._lock:
            self.storage, self.address = None, 0


POOL = RecordPool()  #: The process's pool (records of every capture in it).
HEAP_PIN = HeapPin()  #: The process's heap pin (see :class:`HeapPin`).


def wanted(model: Any) -> bool:
    """Whether a capture of ``model`` should copy its large records into :data:`POOL`: only for a
    model seen to fault (:func:`observe`) in a process whose allocator is not tuned."""
    return _state(model) == _COPY


def pinned(model: Any) -> bool:
    """Whether a capture of ``model`` keeps references to large records and pins the heap
    under them (:data:`HEAP_PIN`) instead of copying them."""
    return _state(model) == _PIN


def _state(model: Any) -> int:
    if allocator.tuned() or MODE == "never":
        return _REFS
    if MODE != "auto":
        return _COPY if MODE == "always" else _PIN
    try:
        verdict = _VERDICTS.get(model)
    except TypeError:  # not weakly referenceable
        return _REFS
    return _REFS if verdict is None else verdict[2]


def minor_faults() -> int:
    """Minor page faults of this process so far (0 where the OS does not say)."""
    return 0 if _getrusage is None else _getrusage(_RUSAGE_SELF).ru_minflt


def observe(model: Any, faults: int, nbytes: int, records: Any = None) -> None:
    """Count a capture of ``model`` without copies whose forward took ``faults`` minor page
    faults recording ``nbytes`` (:data:`FAULT_SHARE`); ``records``: what to pin, if pinning."""
    try:
        verdict = _VERDICTS.setdefault(model, [0, 0, _REFS])
    except TypeError:
        return
    verdict[0] += 1
    costly = verdict[0] > 1 and nbytes > 0 and faults * _PAGE >= FAULT_SHARE * nbytes
    verdict[1] = verdict[1] + 1 if costly else 0
    if verdict[1] >= FAULT_STREAK:
        verdict[1] = 0
        verdict[2] = _PIN if verdict[2] == _REFS and HEAP_PIN.available() else _COPY
    if not records or _state(model) != _PIN:
        return
    if nbytes > MAX_KEEP:  # more than the pool would keep: let glibc have the heap back
        HEAP_PIN.release()
    else:
        HEAP_PIN.update(
            t
            for recs in records.values()
            for rec in recs
            for part in (rec.inputs, rec.output)
            for t in iter_tensors(part)
        )


def release_memory() -> int:
    """Give back the memory kept for the next capture's records and the heap pin (bytes freed);
    buffers a record still views are freed with their last tensor."""
    HEAP_PIN.release()
    return POOL.release()
