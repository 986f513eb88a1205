"""Keep freed memory in the process so repeated captures do not page-fault.

A capture holds every recorded activation until it returns; bare inference frees each one as
soon as the next layer has run. With glibc's defaults the larger heap a capture needs is
trimmed back to the OS when the capture's tensors are freed, so the next capture touches fresh
pages again: about 5,000 minor page faults (and most of the overhead) per ResNet-18 capture on
the benchmark machine. Raising glibc's trim and mmap thresholds keeps those pages, and the
faults drop to zero. Set ``ACTVIZ_MALLOC_TUNING=0`` to leave the allocator alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Allocations up to this size come from the heap (and are reused) instead of fresh mmaps.
MMAP_THRESHOLD = 32 * 2**20
# Freed memory at the top of the heap is returned to the OS only past this much.
TRIM_THRESHOLD = 1 * 2**30

_done = False


def keep_freed_memory() -> bool:
    """Tune glibc once per process (Linux only); returns True if it was tuned."""
    global _done
    if _done:
        return False
    _done = True
    if not sys.platform.startswith("linux") or os.environ.get("ACTVIZ_MALLOC_TUNING") == "0":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    log.debug("glibc malloc thresholds raised: %s", ok)
    return ok
