"""What an opened model is, and how well a guessed architecture fits its weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn


@dataclass(frozen=True)
class ArchGuess:
    """How well one architecture (``name``, as ``open_model(arch=...)`` takes it) fits a
    state_dict: ``score`` 1.0 when every key and shape match, 0.99 when only the head's
    ``num_classes`` differs, at most 0.98 when the weights would not load; ``prefix`` the wrapper
    prefix removed; ``reason`` why, in a few words; ``zoo`` ``"torchvision"`` or ``"timm"``."""

    name: str
    score: float
    matched: int
    keys_matched: int
    tensors: int
    expected: int
    prefix: str
    num_classes: int | None
    reason: str
    zoo: str

    @property
    def fits(self) -> bool:
        """Whether the weights load into this architecture as they are (head resized)."""
        return self.matched == self.tensors == self.expected

    def describe(self) -> str:
        """One line for users: ``resnet18 (score 1.00: all 122 tensors match)``."""
        return f"{self.name} (score {self.score:.2f}: {self.reason})"


@dataclass
class LoadedModel:
    """A model ready to explore (eval mode, on its device), with what is known about feeding it:
    ``kind`` says where it came from (``"demo"``, ``"torchvision"``, ``"timm"``, ``"hf"``,
    ``"code"``, ``"state_dict"``, ...), ``task`` what it does (``"causal-lm"``, ``"classifier"``,
    ``"vision"``); ``categories``, ``transforms``, ``input_size``, ``input_shape``, ``tokenizer``
    and ``processor`` are set when known; ``arch_guesses`` holds a guessed architecture's ranking;
    ``weights_from`` the checkpoint key path when not the top level; ``warnings`` what to tell."""

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
