"""What an opened model is (:class:`LoadedModel`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:
    from actviz.io.models.arch_guess import ArchGuess


@dataclass
class LoadedModel:
    """A model ready to explore (eval mode, on its device), with what is known about feeding it.

    ``kind`` says where it came from (``"demo"``, ``"torchvision"``, ``"timm"``, ``"hf"``,
    ``"code"``, ``"state_dict"``, ...), ``task`` what it does (``"causal-lm"``, ``"classifier"``,
    ``"vision"``). ``categories``, ``transforms``, ``input_size``, ``input_shape``, ``tokenizer``
    and ``processor`` are set when known; ``arch_guesses`` holds a guessed architecture's ranking;
    ``weights_from`` the checkpoint key path when not the top level; ``warnings`` what to tell.
    """

    model: nn.Module
    name: str
    source: str
    kind: str
    categories: list[str] | None = None
    transforms: Callable[..., Any] | None = None
    input_size: tuple[int, int] | None = None
    warnings: list[str] = field(default_factory=list)
    input_shape: tuple[int, ...] | None = None
    arch_guesses: tuple[ArchGuess, ...] = ()
    task: str | None = None
    tokenizer: Any | None = None
    processor: Any | None = None
    weights_from: str = ""
