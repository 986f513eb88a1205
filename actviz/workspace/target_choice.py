"""The target of a session's runs: :class:`TargetChoice`, the user's class or else the auto target
held for the input (the unedited run's top-1), owned by the session as ``session.targets``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["TargetChoice"]


class TargetChoice:
    """The chosen target and the auto target of one session.

    ``owner`` is the session (read for its ``result``, ``categories`` and ``loaded_model``:
    what a target is parsed and checked against); ``changed()`` announces a new target.
    """

    def __init__(self, owner: Any, changed: Callable[[], Any]) -> None:
        self._owner = owner
        self._changed = changed
        self.target: int | None = None
        #: The auto target held for this investigation: the unedited run's top-1 class
        #: (:func:`~actviz.core.targets.fixed_default`), set by the first clean result with no
        #: target chosen, dropped when the model, the input or the target changes. Without it
        #: an edit that makes another class lead moved every view's target with it.
        self.auto_target: int | None = None

    def reset(self) -> None:
        """Forget both targets (another model); announces nothing."""
        self.target = None
        self.auto_target = None

    def set_target(self, target: int | None) -> None:
        """Make ``target`` the target (None: auto, the unedited run's top-1)."""
        if target != self.target:
            self.target = target
            self.auto_target = None
            self._changed()

    @property
    def run_target(self) -> int | None:
        """The target every view names and every run uses: the one chosen, else the auto
        target held for this input (:attr:`auto_target`; None before a clean run)."""
        return self.target if self.target is not None else self.auto_target

    def hold_auto_target(self, result: Any) -> None:
        """Hold the auto target to the top-1 of ``result``'s unedited capture (the first one
        after the model, the input or the target changed)."""
        if result is None or self.target is not None or self.auto_target is not None:
            return
        if getattr(result, "origin", None) is not None:
            return  # a live frame: another input
        from actviz.core.targets import fixed_default

        clean = result.baseline
        if clean is None and not getattr(result.capture, "edits", None):
            clean = result.capture
        if clean is not None:
            self.auto_target = fixed_default(clean.output)

    def set_target_text(self, text: str) -> int | None:
        """Parse ``text`` (:func:`actviz.core.targets.parse_target`) and make it the target."""
        from actviz.core.targets import check_target, parse_target

        # A language model's tokenizer reads a token's text as its id.
        tokenizer = getattr(self._owner.loaded_model, "tokenizer", None)
        target = parse_target(text, self._owner.categories, tokenizer)
        if target is not None and target < 0:
            raise ValueError(f"class {target} is out of range: classes are numbered from 0")
        reference = self._target_reference()
        if target is not None and reference is not None:
            check_target(target, reference)  # the rule a run applies, now rather than then
        self.set_target(target)
        return target

    def _target_reference(self) -> Any:
        """What a target is checked against: the last output, else the class count, or None."""
        result = self._owner.result
        if result is not None and result.capture is not None:
            return result.capture.output
        categories = self._owner.categories
        if categories:
            return len(categories)
        tokenizer = getattr(self._owner.loaded_model, "tokenizer", None)
        return len(tokenizer) if tokenizer is not None else None
