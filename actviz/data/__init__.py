"""Dataset scans: per channel, the images of a dataset that excite it most (Qt-free)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actviz.data.scan import scan
from actviz.data.scan_result import ChannelStats, Scan, ScanCancelled, TopEntry

__all__ = [
    "ChannelStats",
    "Scan",
    "ScanCancelled",
    "TopEntry",
    "TopView",
    "receptive_box",
    "scan",
    "top_views",
]

if TYPE_CHECKING:  # pragma: no cover
    from actviz.data.receptive import TopView, receptive_box, top_views


def __getattr__(name: str) -> Any:
    if name in ("TopView", "receptive_box", "top_views"):
        from actviz.data import receptive as views

        return getattr(views, name)
    raise AttributeError(f"module 'actviz.data' has no attribute {name!r}")
