"""What a model switch does with the input shown: read it again for the new model, or,
when the new model cannot take it, keep it aside for a later switch back and show another
(an input of a kind the model takes, kept from before, else the model's natural input)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from actviz.ui.background_loads import InputRequest
from actviz.ui.window.banner import MessageBanner
from actviz.workspace.session_state import Session

__all__ = ["InputSwap"]


class InputSwap:
    """The inputs kept aside across model switches, and the notes (in ``banner``) that say so;
    ``warn(text)`` says an input does not fit and nothing can stand in for it."""

    def __init__(
        self,
        session: Session,
        banner: MessageBanner,
        warn: Callable[[str], None],
        samples: Callable[[], list[Path]],
    ) -> None:
        self.session, self.banner = session, banner
        self._warn, self._samples = warn, samples
        #: Inputs a newly opened model could not take, by kind, until one takes them.
        self.kept: dict[str, Any] = {}
        #: The input asked for last and why it did not open (None: it did).
        self.failure: tuple[str, str] | None = None

    def input_for(self, loaded: Any) -> tuple[InputRequest | None, Any]:
        """``(request to read, state to restore)`` for the new model: the current input when it
        fits, else a kept one it takes, else its natural default; the misfit is kept."""
        from actviz.io.input_fit import input_kind, input_misfit, natural_input_source

        inp = self.session.input
        if inp is None:
            return None, None
        why = input_misfit(loaded, inp.value, inp.source)
        if why is None:
            path = self.session.input_path
            if path:
                return InputRequest(str(path), remember=False, swap=True), None
            if inp.source and input_kind(inp.value, inp.source) == "text" and ":" in inp.source:
                # Token ids are the old tokenizer's: read the text again with the new one.
                return InputRequest(inp.source, remember=False, swap=True), None
            return None, None
        self.kept[input_kind(inp.value, inp.source)] = inp
        for kept in list(self.kept.values()):
            if input_misfit(loaded, kept.value, kept.source) is None:
                del self.kept[input_kind(kept.value, kept.source)]
                self._note(loaded, why, kept.source or kept.description)
                if kept.source and (Path(kept.source).is_file() or ":" in kept.source):
                    return InputRequest(kept.source, remember=False, swap=True), None
                return None, kept
        source = natural_input_source(loaded, self._samples())
        if source is None:
            failed = self._take_failure(loaded)
            self._warn(f"{failed}The input does not fit {loaded.name} ({why}): open an input.")
            return None, None
        self._note(loaded, why, source)
        return InputRequest(source, remember=False, quiet=True, swap=True), None

    def restore(self, kept: Any) -> None:
        """Hold a kept input again as it was (made in memory: nothing to read again)."""
        self.session.set_input(
            kept.value, source=kept.source, kind=kept.kind, image=kept.image,
            description=kept.description, tokens=kept.tokens,
        )  # fmt: skip

    def _note(self, loaded: Any, why: str, shown: str) -> None:
        shown = shown.removeprefix("text:")
        name = Path(shown).name if Path(shown).is_file() else shown
        failed = self._take_failure(loaded)
        text = (
            f"{failed}The input does not fit {loaded.name} ({why}): showing {name!r} instead; "
            "the previous input comes back when a model that takes it is opened."
        )
        self.banner.set_messages("input", [("warning" if failed else "info", text)])

    def _take_failure(self, loaded: Any) -> str:
        """The sentence naming the input the user asked for that did not open ("" when none)."""
        failure, self.failure = self.failure, None
        if failure is None:
            return ""
        name, reason = failure
        return f"{name} could not be opened for {loaded.name}: {reason}. "
