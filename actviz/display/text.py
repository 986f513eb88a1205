"""Numbers, shapes and token labels as the window and the CLI print them (no torch import)."""

from __future__ import annotations

from collections.abc import Sequence

MAX_TICKS = 48  #: Most token labels an axis shows; longer sequences label every n-th token.
LABEL_CHARS = 14  #: Characters of a token label on an axis ("…" past them).


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
    return f"{n / 1_000_000:.1f}M" if n < 1_000_000_000 else f"{n / 1_000_000_000:.2f}B"


def axis_ticks(labels: Sequence[str], limit: int = MAX_TICKS) -> list[tuple[float, str]]:
    """Tick positions (cell centres) and shortened labels of a token axis, at most ``limit``."""
    step = max(1, -(-len(labels) // max(1, limit)))
    out = []
    for i in range(0, len(labels), step):
        text = str(labels[i]).replace("\n", "\\n")
        if len(text) > LABEL_CHARS:
            text = text[: LABEL_CHARS - 1] + "…"
        out.append((i + 0.5, text))
    return out
