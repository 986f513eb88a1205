"""Memory figures the window shows (no Qt): the capture budget, its parsing, the resident size."""

from __future__ import annotations

import logging
import os
import time

from actviz.core.allocator import rss_mib

log = logging.getLogger(__name__)

#: Default memory budget of one capture; ``ACTVIZ_MEMORY_BUDGET`` (bytes, or e.g. "2GiB") overrides.
DEFAULT_MEMORY_BUDGET = 1 << 30
#: How long a resident size read is reused (s): the live dock asks on the GUI thread often.
RSS_MAX_AGE_S = 1.0
#: ``(time.monotonic(), bytes)`` of the last read (a tuple: replaced whole, thread-safe).
_rss_read: tuple[float, int | None] | None = None


def parse_bytes(text: str) -> int:
    """``"1073741824"``, ``"512MiB"``, ``"2 GiB"``, ``"1.5G"`` -> bytes (else ``ValueError``)."""
    units = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    s = text.strip().lower().replace(" ", "")
    for suffix in ("ib", "b"):
        if s.endswith(suffix) and s[: -len(suffix)][-1:].isalpha():
            s = s[: -len(suffix)]
            break
    unit = s[-1] if s and s[-1].isalpha() else ""
    try:
        value = float(s[:-1] if unit else s) * units[unit]
    except (KeyError, ValueError):
        raise ValueError(f"not a size: {text!r} (write e.g. 1073741824, 512MiB or 2GiB)") from None
    if value <= 0:
        raise ValueError(f"a memory budget must be positive, got {text!r}")
    return int(value)


def default_budget() -> int:
    """:data:`DEFAULT_MEMORY_BUDGET`, or ``ACTVIZ_MEMORY_BUDGET`` when set and valid."""
    if text := os.environ.get("ACTVIZ_MEMORY_BUDGET", ""):
        try:
            return parse_bytes(text)
        except ValueError as exc:
            log.warning("ignoring ACTVIZ_MEMORY_BUDGET: %s", exc)
    return DEFAULT_MEMORY_BUDGET


def rss_bytes(max_age_s: float = RSS_MAX_AGE_S) -> int | None:
    """Resident memory of this process (Linux ``/proc/self/statm``), None elsewhere; a figure
    read less than ``max_age_s`` ago is returned again (0: read now, as a measurement does)."""
    global _rss_read
    now = time.monotonic()
    if (last := _rss_read) is not None and now - last[0] < max_age_s:
        return last[1]
    value = _read_rss()
    _rss_read = (now, value)
    return value


def _read_rss() -> int | None:
    return int(rss_mib() * 2**20) or None  # statm's resident pages (0: no /proc)
