"""What the driver needs of pytest-qt's ``qtbot``, for a driver made without one: :class:`EventBot`
waits and clicks with Qt alone and fails the same way (``TimeoutError``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QEventLoop, QPoint, Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QWidget

__all__ = ["EventBot"]


class EventBot:
    """``waitSignal``, ``waitUntil``, ``mouseClick`` and ``wait`` as pytest-qt's bot has them."""

    @contextlib.contextmanager
    def waitSignal(self, signal: Any, timeout: int = 5_000) -> Iterator[None]:  # noqa: N802
        """Wait, after the ``with`` body, for ``signal`` (``TimeoutError`` after ``timeout``
        ms)."""
        seen: list[bool] = []
        loop = QEventLoop()

        def fired(*_args: Any) -> None:
            seen.append(True)
            loop.quit()

        signal.connect(fired)
        try:
            yield
            if not seen:
                QTimer.singleShot(timeout, loop, loop.quit)  # dropped with the loop
                loop.exec()
        finally:
            signal.disconnect(fired)
        if not seen:
            raise TimeoutError(f"the signal was not emitted within {timeout} ms")

    def waitUntil(self, condition: Callable[[], Any], timeout: int = 5_000) -> None:  # noqa: N802
        """Process events until ``condition()`` is true (``TimeoutError`` after ``timeout`` ms)."""
        deadline = time.perf_counter() + timeout / 1000
        while True:
            if condition():
                return
            if time.perf_counter() > deadline:
                raise TimeoutError(f"the condition was not met within {timeout} ms")
            QTest.qWait(5)

    def mouseClick(  # noqa: N802
        self,
        widget: QWidget,
        button: Qt.MouseButton,
        modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier,
        pos: QPoint | None = None,
        delay: int = -1,
    ) -> None:
        """Click ``widget`` at ``pos`` (its centre by default), as ``QTest.mouseClick``."""
        QTest.mouseClick(widget, button, modifier, pos or widget.rect().center(), delay)

    def wait(self, ms: int) -> None:
        """Process events for ``ms`` milliseconds."""
        QTest.qWait(ms)
