"""Dataset scans: per channel, the images of a dataset that excite it most (Qt-free)."""

from __future__ import annotations

from actviz.data.receptive import TopView, receptive_box, top_views
from actviz.data.scan import scan
from actviz.data.scan_result import ChannelStats, Scan, ScanCancelled, TopEntry

__all__ = [
    "ChannelStats", "Scan", "ScanCancelled", "TopEntry", "TopView", "receptive_box", "scan",
    "top_views",
]  # fmt: skip
