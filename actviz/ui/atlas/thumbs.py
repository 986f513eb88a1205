"""The atlas's thumbnails, decoded off the GUI thread (a strip of 24 JPEGs is ~100 ms of I/O)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QObject, Signal
from PySide6.QtGui import QImage, QPixmap

from actviz.ui.panels.style import rgb_image

#: Thumbnails kept (a strip shows at most 24; the map may be hovered over thousands).
KEPT = 512


def data_uri(image: QImage) -> str:
    """``image`` as a PNG ``data:`` URI, for rich text (a tooltip's picture)."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return "data:image/png;base64," + bytes(data.toBase64().data()).decode("ascii")


def decode_thumb(path: str, side: int) -> QImage | None:
    """``path``'s picture fitted in ``side`` x ``side`` (None: not a readable image)."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            im.draft("RGB", (side, side))  # JPEGs decode at a fraction of their size
            im = im.convert("RGB")
            im.thumbnail((side, side))
            return rgb_image(np.asarray(im))
    except (OSError, ValueError):
        return None


class ThumbCache(QObject):
    """Thumbnails by path: :meth:`get` answers from the cache at once and decodes the rest on
    a thread of its own; ``loaded(path)`` says when one is ready (or failed). ``as_uri``: they
    come as PNG ``data:`` URIs (for rich text), else as pixmaps."""

    loaded = Signal(str)
    _decoded = Signal(str, object)

    def __init__(self, side: int, parent: QObject | None = None, *, as_uri: bool = False) -> None:
        super().__init__(parent)
        self.side, self.as_uri = side, as_uri
        self._made: dict[str, QPixmap | str | None] = {}
        self._pending: set[str] = set()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="atlas-thumbs")
        self._decoded.connect(self._on_decoded)  # queued: emitted on the pool's thread

    def get(self, path: str) -> QPixmap | str | None:
        """The thumbnail if made (None while it decodes or when it cannot be read)."""
        if path in self._made:
            return self._made[path]
        if path not in self._pending:
            self._pending.add(path)
            self._pool.submit(self._decode, path)
        return None

    def _decode(self, path: str) -> None:
        image = decode_thumb(path, self.side)
        self._decoded.emit(path, data_uri(image) if image is not None and self.as_uri else image)

    def shutdown(self) -> None:
        """Drop what is queued and wait for the decode in progress (its picture goes unused)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _on_decoded(self, path: str, made: QImage | str | None) -> None:
        self._pending.discard(path)
        if len(self._made) >= KEPT:
            self._made.clear()
        self._made[path] = QPixmap.fromImage(made) if isinstance(made, QImage) else made
        self.loaded.emit(path)
