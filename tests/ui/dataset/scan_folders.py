"""Folders to scan and a gate that holds a scan, for the dataset tests and the effects and atlas
tests that scan too."""

from __future__ import annotations

import threading

import numpy as np
from PIL import Image
from torch import nn

TIMEOUT_MS = 30_000
IMAGES = 16


def write_folder(folder, count: int = IMAGES, *, broken: bool = False):
    """``count`` random 24x24 PNGs (sorted names), and an unreadable ``broken.png``."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = folder / f"img{i:02d}.png"
        Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    if broken:
        (folder / "broken.png").write_bytes(b"not a png at all")
    return paths


class Gate:
    """A forward pre-hook that holds the scan's first batch until the test opens the gate.

    Registered on the window's model, it travels with the scan's copy (the user's own hooks
    do; capture's do not) and holds only there: the window's own runs pass.
    """

    def __init__(self, original: nn.Module) -> None:
        self.original = original
        self.entered = threading.Event()
        self.open = threading.Event()
        self.active = True

    def __call__(self, module, args) -> None:
        # The scan's one-image probe (the widths of its embeddings) passes; batches wait.
        if self.active and module is not self.original and args[0].shape[0] > 1:
            self.entered.set()
            assert self.open.wait(TIMEOUT_MS / 1000)
