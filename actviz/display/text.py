"""Numbers and shapes as the window and the CLI print them."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_count", "format_shape"]


def format_shape(shape: Sequence[int] | None) -> str:
    """``(1, 64, 56, 56)`` -> ``"1×64×56×56"``; ``()`` -> ``"scalar"``; None -> ``""``."""
    if shape is None:
        return ""
    return "×".join(str(int(dim)) for dim in shape) if len(shape) else "scalar"


def format_count(n: int) -> str:
    """A human-sized count (parameters): 9408, 12.3K, 11.7M, 1.23B (exact below 10,000)."""
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}K"
    if n < 1_000_000_000:
        return f"{n / 1_000_000:.1f}M"
    return f"{n / 1_000_000_000:.2f}B"
