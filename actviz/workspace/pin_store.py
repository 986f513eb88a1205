"""Pinned captures parked on disk (no Qt): their tensors moved into a memory-mapped temp file.

A parked capture keeps its identity and every record; only the storage under its CPU tensors
changes, to a ``MAP_SHARED`` mapping of a file in a per-process temp folder (unlinked at once:
nothing is left behind, even after a crash; the disk space goes with the last tensor). Reading
a parked tensor (a pin shown, compared, saved) pages it in from the page cache or the disk,
bit for bit; :func:`release` hands those pages back (``MADV_DONTNEED``), so the process's
resident size does not grow with what was once read.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import mmap
import os
import shutil
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from actviz.core.structures import iter_tensors, map_tensors

log = logging.getLogger(__name__)

__all__ = [
    "DISK_RESERVE",
    "ParkedFile",
    "disk_free",
    "folder",
    "is_parked",
    "park_capture",
    "parked_file",
    "release",
]

#: Disk space a park leaves free in the temp folder's file system (bytes).
DISK_RESERVE = 1 << 30
_ALIGN = 64  # each storage's offset in the file: a multiple of every dtype's size
_RECORD_FIELDS = ("inputs", "output", "grad_output", "grad_inputs")
_CAPTURE_FIELDS = ("output", "inputs", "input_grads")
_MADV_DONTNEED = 4

_folder: list[str] = []
_folder_lock = threading.Lock()
# id(capture) -> (a weak reference to it, its ParkedFile): a capture is parked once.
_parked: dict[int, tuple[weakref.ref, ParkedFile]] = {}


@dataclass(eq=False)
class ParkedFile:
    """The mapping a parked capture's tensors now live in, and how many bytes it holds."""

    storage: torch.UntypedStorage
    nbytes: int


def folder() -> str:
    """This process's folder for parked pins (made on first use, removed at exit)."""
    with _folder_lock:
        if not _folder:
            path = tempfile.mkdtemp(prefix=f"actviz-pins-{os.getpid()}-")
            _folder.append(path)
            atexit.register(shutil.rmtree, path, True)
        return _folder[0]


def disk_free() -> int:
    """Free bytes in the file system of :func:`folder`."""
    return shutil.disk_usage(folder()).free


def _parkable(t: torch.Tensor) -> bool:
    # Plain dense CPU tensors only: a subclass, a lazy conj/neg bit or another layout would not
    # come back the same from raw bytes.
    return (
        type(t) is torch.Tensor
        and t.device.type == "cpu"
        and t.layout == torch.strided
        and not t.is_quantized
        and not t.is_conj()
        and not t.is_neg()
        and not t.requires_grad
    )


def _tensor_fields(cap: Any) -> list[tuple[Any, str]]:
    """Every ``(object, attribute)`` of ``cap`` that holds tensors (records and model level)."""
    fields = [(rec, name) for rec in cap.all_records() for name in _RECORD_FIELDS]
    return fields + [(cap, name) for name in _CAPTURE_FIELDS]


def is_parked(cap: Any) -> bool:
    """Whether :func:`park_capture` moved ``cap``'s tensors to disk."""
    return parked_file(cap) is not None


def parked_file(cap: Any) -> ParkedFile | None:
    """The :class:`ParkedFile` ``cap``'s tensors live in, or None when not parked."""
    entry = _parked.get(id(cap))
    return entry[1] if entry is not None and entry[0]() is cap else None


def park_capture(cap: Any) -> ParkedFile | None:
    """Move ``cap``'s CPU tensors into a memory-mapped temp file; None if nothing moved (no
    such tensor, or the disk would keep less than :data:`DISK_RESERVE` free).

    Records keep their order, tensors their dtype, shape, strides and values; tensors sharing
    a storage share one region of the file again.
    """
    done = parked_file(cap)
    if done is not None:
        return done
    storages: dict[int, torch.UntypedStorage] = {}
    fields = _tensor_fields(cap)
    for obj, name in fields:
        for t in iter_tensors(getattr(obj, name, None)):
            if _parkable(t) and t.untyped_storage().nbytes():
                storage = t.untyped_storage()
                storages.setdefault(storage.data_ptr(), storage)
    total = sum(_aligned(s.nbytes()) for s in storages.values())
    if not total or disk_free() - total < DISK_RESERVE:
        return None
    fd, path = tempfile.mkstemp(prefix="pin-", suffix=".bin", dir=folder())
    offsets: dict[int, int] = {}
    try:
        with os.fdopen(fd, "wb", buffering=0) as f:
            pos = 0
            for ptr, storage in storages.items():
                offsets[ptr] = pos
                raw = torch.empty(0, dtype=torch.uint8).set_(storage)
                f.seek(pos)
                f.write(memoryview(raw.numpy()))
                pos += _aligned(storage.nbytes())
            f.truncate(pos)
        mapped = torch.UntypedStorage.from_file(path, True, pos)
    finally:
        os.unlink(path)  # the mapping keeps the file's data until its last tensor goes

    def moved(t: torch.Tensor) -> torch.Tensor:
        if not _parkable(t):
            return t
        at = offsets.get(t.untyped_storage().data_ptr())
        if at is None:
            return t
        out = torch.empty(0, dtype=t.dtype)
        return out.set_(mapped, at // t.element_size() + t.storage_offset(), t.size(), t.stride())

    # New tensors in the same places: the old ones stay valid for whoever holds them (an array
    # viewing one), so nothing is ever read from freed memory.
    for obj, name in fields:
        value = getattr(obj, name, None)
        if value is not None:
            setattr(obj, name, map_tensors(value, moved))
    parked = ParkedFile(mapped, pos)
    key = id(cap)
    _parked[key] = (weakref.ref(cap, lambda _ref: _parked.pop(key, None)), parked)
    release(parked)  # written through the file: nothing mapped is resident, but be sure
    return parked


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def release(parked: ParkedFile) -> bool:
    """Drop ``parked``'s pages from this process's resident memory (they stay in the file and
    come back on the next read); False where the system cannot."""
    if not sys.platform.startswith("linux") or not parked.nbytes:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    length = (parked.nbytes + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    # MAP_SHARED: dropping pages loses nothing (a write went to the file).
    return libc.madvise(parked.storage.data_ptr(), length, _MADV_DONTNEED) == 0
