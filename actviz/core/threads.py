"""torch's intra-op thread count, held for a block."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch's intra-op pool at ``n`` threads (None: unchanged).

    For callers that work alone: on a loaded 2-core machine, waking a second OpenMP thread for
    each small reduction costs more than the work. The count is process-wide, so it is put back.
    """
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    if before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
