"""Counting what happens in one event-loop turn: the GUI blocks as long as a turn lasts, so
work that must be spread out is counted per turn (a zero-interval timer fires once a turn)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtCore import QTimer


class TurnCounter:
    """Records the calls of ``owner.method`` with the event-loop turn each came in.

    ``calls`` maps a turn to the names (``name_of(args)``) of the calls in it; ``turn`` is the
    turn now. Counting starts when it is made; the patch goes with ``monkeypatch``.
    """

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        owner: type,
        method: str,
        name_of: Callable[..., str] = lambda *args: "",
    ) -> None:
        self.turn = 0
        self.calls: dict[int, list[str]] = {}
        self.timer = QTimer()
        self.timer.setInterval(0)
        self.timer.timeout.connect(self._tick)
        original = getattr(owner, method)
        counter = self

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter.calls.setdefault(counter.turn, []).append(name_of(*args))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, method, counted)
        self.timer.start()

    def _tick(self) -> None:
        self.turn += 1

    def most_in_a_turn(self) -> int:
        """The most calls made in one turn."""
        return max((len(v) for v in self.calls.values()), default=0)

    def names(self) -> list[str]:
        """Every call's name, in order."""
        return [n for v in self.calls.values() for n in v]

    def count(self) -> int:
        return sum(len(v) for v in self.calls.values())
