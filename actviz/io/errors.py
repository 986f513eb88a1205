"""Errors raised by actviz when a model or an input cannot be opened.

Every message is a single readable line that names the file (or source string) and the
cause, so the CLI can print it as is and the GUI can show it in a dialog.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ActvizError",
    "ModelLoadError",
    "ArchitectureNeededError",
    "UntrustedFileError",
    "TrustNeededError",
    "InputError",
    "ModelFileAsInputError",
    "WriteError",
]


class ActvizError(Exception):
    """Base class of the errors actviz reports to users (one line: file and cause)."""


class ModelLoadError(ActvizError):
    """A model source (file, name, ``module:attr``) could not be turned into a model."""


class ArchitectureNeededError(ModelLoadError):
    """A file holds only weights and their architecture could not be told for sure.

    Parameters
    ----------
    message
        The one-line message (names the file, the best matches and how to pass ``arch``).
    path
        The weights file.
    candidates
        Architectures that fit best, best first (:class:`actviz.io.models.arch_guess.ArchGuess`);
        empty when none is close. A caller asks the user to pick one and opens the file again
        with ``arch=candidate.name``.
    """

    def __init__(
        self, message: str, path: str | os.PathLike[str], candidates: Sequence[Any] = ()
    ) -> None:
        # Typed loosely: errors.py sits below arch_guess.py (which raises it) in the imports.
        super().__init__(message)
        self.path = os.fspath(path)
        self.candidates: tuple[Any, ...] = tuple(candidates)


class UntrustedFileError(ActvizError):
    """Opening the file would execute code stored in it (a full pickle).

    Parameters
    ----------
    path
        The file that needs trusting.
    detail
        What the file references that needs real unpickling (e.g. a class name).
    """

    def __init__(self, path: str | os.PathLike[str], detail: str = "") -> None:
        self.path = os.fspath(path)
        self.detail = detail
        name = os.path.basename(self.path) or self.path
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"{self.path}: opening this file would run code stored in it{why}; "
            f"only open {name} if you trust where it came from: pass trust=True in Python, "
            "--trust on the command line, or confirm the dialog in the GUI"
        )


class TrustNeededError(UntrustedFileError):
    """A model folder (or a cached hub model) ships Python code that opening it would run.

    Hugging Face models whose ``config.json`` has an ``auto_map`` (``trust_remote_code``)
    are built by code stored beside the weights. It is a kind of :class:`UntrustedFileError`,
    so every caller that asks before unpickling asks here too.

    Parameters
    ----------
    path
        The model folder.
    detail
        Which code would run (e.g. ``"modeling_tiny.TinyForCausalLM"``).
    """

    def __init__(self, path: str | os.PathLike[str], detail: str = "") -> None:
        super().__init__(path, detail)
        why = f" ({detail})" if detail else ""
        # Replace the pickle wording of the base class: here the code is the model's own.
        self.args = (
            f"{self.path}: this model runs Python code shipped with it{why}; only open it if "
            "you trust where it came from: pass trust=True in Python, --trust on the command "
            "line, or confirm the dialog in the GUI",
        )


class InputError(ActvizError):
    """An input (image, tensor file, random spec) cannot be read or does not fit the model."""


class WriteError(ActvizError, OSError):
    """A file (report, session, export) could not be written: one line naming it and why.

    Also an ``OSError``, so code catching write failures as such keeps catching it.
    """


class ModelFileAsInputError(InputError):
    """An input file that holds a model or its weights (a checkpoint, TorchScript, ``.pt2``):
    it opens as the model, not as the input (the window does so with a dropped file)."""
