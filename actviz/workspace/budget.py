"""Memory figures the window shows: the capture budget, its parsing, the process's resident size.

No Qt: the session, live mode and the benchmarks share these.
"""

from __future__ import annotations

import logging
import os

from actviz.core.capture import format_bytes

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_MEMORY_BUDGET", "default_budget", "fmt_bytes", "parse_bytes", "rss_bytes"]

#: Default memory budget of one capture; ``ACTVIZ_MEMORY_BUDGET`` (bytes, or e.g. "2GiB") overrides.
DEFAULT_MEMORY_BUDGET = 1 << 30


def parse_bytes(text: str) -> int:
    """``"1073741824"``, ``"512MiB"``, ``"2 GiB"``, ``"1.5G"`` -> bytes (else ``ValueError``)."""
    units = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    s = text.strip().lower().replace(" ", "")
    for suffix in ("ib", "b"):
        if s.endswith(suffix) and s[: -len(suffix)][-1:].isalpha():
            s = s[: -len(suffix)]
            break
    unit = s[-1] if s and s[-1].isalpha() else ""
    number = s[:-1] if unit else s
    if unit not in units:
        raise ValueError(f"not a size: {text!r} (write e.g. 1073741824, 512MiB or 2GiB)")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (write e.g. 1073741824, 512MiB or 2GiB)") from None
    if value <= 0:
        raise ValueError(f"a memory budget must be positive, got {text!r}")
    return int(value * units[unit])


def default_budget() -> int:
    """:data:`DEFAULT_MEMORY_BUDGET`, or ``ACTVIZ_MEMORY_BUDGET`` when set and valid."""
    text = os.environ.get("ACTVIZ_MEMORY_BUDGET", "")
    if text:
        try:
            return parse_bytes(text)
        except ValueError as exc:
            log.warning("ignoring ACTVIZ_MEMORY_BUDGET: %s", exc)
    return DEFAULT_MEMORY_BUDGET


def rss_bytes() -> int | None:
    """Resident memory of this process (Linux ``/proc/self/status`` VmRSS), None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def fmt_bytes(n: float | None) -> str:
    """:func:`actviz.core.capture.format_bytes`, with "?" for an unknown size."""
    return "?" if n is None else format_bytes(n)
