"""Errors for a model or input that cannot be opened: one line naming source and cause."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


class ActvizError(Exception):
    """Base class of the errors actviz reports to users (one line: file and cause)."""


class ModelLoadError(ActvizError):
    """A model source (file, name, ``module:attr``) could not be turned into a model."""


class ArchitectureNeededError(ModelLoadError):
    """A file holds only weights and their architecture could not be told for sure; open again
    with ``arch=candidate.name`` for one of ``candidates``, the best-fitting
    :class:`~actviz.io.models.arch_guess.ArchGuess` first (possibly none)."""

    def __init__(
        self, message: str, path: str | os.PathLike[str], candidates: Sequence[Any] = ()
    ) -> None:
        # Typed loosely: errors.py sits below arch_guess.py (which raises it) in the imports.
        super().__init__(message)
        self.path = os.fspath(path)
        self.candidates: tuple[Any, ...] = tuple(candidates)


class UntrustedFileError(ActvizError):
    """Opening ``path`` would execute code stored in it (a full pickle); ``detail`` says what."""

    #: What opening it would do (``{why}``: the detail, ``{name}``: the file name).
    risk = "opening this file would run code stored in it{why}; only open {name}"

    def __init__(self, path: str | os.PathLike[str], detail: str = "") -> None:
        self.path, self.detail = os.fspath(path), detail
        name = os.path.basename(self.path) or self.path
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"{self.path}: {self.risk.format(why=why, name=name)} if you trust where it came "
            "from: pass trust=True in Python, --trust on the command line, or confirm the dialog "
            "in the GUI"
        )


class TrustNeededError(UntrustedFileError):
    """A model folder (or cached hub model) ships Python code that opening it would run
    (``auto_map``, ``trust_remote_code``); an :class:`UntrustedFileError`, so callers ask once."""

    # Not the pickle wording of the base class: here the code is the model's own.
    risk = "this model runs Python code shipped with it{why}; only open it"


class InputError(ActvizError):
    """An input (image, tensor file, random spec) cannot be read or does not fit the model."""


class WriteError(ActvizError, OSError):
    """A file (report, session, export) could not be written: one line naming it and why (an
    ``OSError`` too, so code catching write failures as such keeps catching it)."""


class ModelFileAsInputError(InputError):
    """An input file that holds a model or its weights (a checkpoint, TorchScript, ``.pt2``):
    it opens as the model, not as the input (the window does so with a dropped file)."""
