"""Which model each live frame captures on: the session's (lane 0) or its copy (lane 1), so a
small CPU model playing runs two captures at once, one per core (plain logic, no Qt)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from actviz.core.model_copy import ModelCopy, copy_refusal

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.private_model import PrivateModel

log = logging.getLogger(__name__)


class FrameLanes:
    """The model's copy for lane 1 (held by ``copies``) and the frames capturing on each lane."""

    def __init__(self, copies: PrivateModel) -> None:
        self.copies = copies
        #: The frame whose job makes the copy (on lane 0, between two captures).
        self.build_job: Any = None
        #: ``(model, why it gets no copy)``; "" when it may have one; None: not asked yet.
        self.refusal: tuple[Any, str] | None = None
        #: Frames submitted and not captured yet: job -> lane.
        self.capturing: dict[Any, int] = {}
        self._last = 1

    @property
    def replica(self) -> ModelCopy | None:
        """The model's copy for lane 1 (None: not made, not wanted, or let go of)."""
        return self.copies.held

    def wanted(self, model: Any, *, playing: bool, threads: int, forced: bool) -> bool:
        """Whether frames alternate between ``model`` and a copy (a small CPU model playing)."""
        if not playing or forced or threads < 2:
            return False
        if self.refusal is None or self.refusal[0] is not model:
            self.refusal = (model, copy_refusal(model) or "")
        return not self.refusal[1]

    def count(self, playing: bool) -> int:
        """Lanes frames capture on now (2 once the copy exists and a sequence plays)."""
        return 2 if playing and self.replica is not None and self.replica.twin is not None else 1

    def drop(self, *, forget_refusal: bool = False) -> None:
        """Let go of the copy (a model switch, the still input, live mode off)."""
        self.copies.forget()
        self.build_job = None
        if forget_refusal:
            self.refusal = None

    def choose(
        self, model: Any, inflight: Any, *, playing: bool, threads: int, forced: bool
    ) -> tuple[int, Any, ModelCopy | None]:
        """``(lane, model to capture, copy to build first)`` for the next frame."""
        options = {"playing": playing, "threads": threads, "forced": forced}
        if not self.wanted(model, **options):
            return 0, model, None
        rep = self.replica
        if rep is not None and (rep.original is not model or rep.failure):
            if rep.failure and rep.original is model:
                log.info("live frames stay on one lane: %s", rep.failure)
                self.refusal = (model, rep.failure)
            self.drop()
            rep = None
        rep = self.copies.unbuilt(model) if rep is None else rep
        if rep.twin is None:  # lane 0 copies the model between two of its captures, unless
            # asked for by a frame still on its way (a dropped one never made it: ask again)
            return 0, model, None if self.build_job in inflight else rep
        on = [0, 0]
        for lane in self.capturing.values():
            on[lane] += 1
        lane = 0 if on[0] < on[1] else 1 if on[1] < on[0] else 1 - self._last
        # Weights changed or moved? Asked only for the copy's frames: it reads every tensor.
        if lane == 1 and not rep.usable():
            self.drop(forget_refusal=True)
            build = self.copies.unbuilt(model) if self.wanted(model, **options) else None
            return 0, model, build
        self._last = lane
        return lane, (model if lane == 0 else rep.twin), None

    def started(self, job: Any, lane: int, build: ModelCopy | None) -> None:
        """``job`` was submitted to capture on ``lane`` (building ``build`` first)."""
        self.capturing[job] = lane
        if build is not None:
            self.build_job = job

    def captured(self, job: Any) -> bool:
        """``job``'s capture ended (or it was dropped): False when it was not capturing."""
        return self.capturing.pop(job, None) is not None
