"""What an opened model is (:class:`LoadedModel`), and the messages shared by opening by name and
from files.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from actviz.io.models import timm_models, zoo
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


def from_built(built: Any, name: str, src: str, kind: str, **extra: Any) -> LoadedModel:
    """The LoadedModel of a zoo's build result (torchvision, timm, Hugging Face)."""
    return LoadedModel(
        built.model,
        name,
        src,
        kind,
        categories=built.categories,
        transforms=built.transforms,
        input_size=built.input_size,
        warnings=list(built.warnings),
        **extra,
    )


#: The forms a model or an architecture may be named in, for error messages.
ACCEPTED_FORMS = (
    "a torchvision name (resnet18), timm:NAME (timm:vit_tiny_patch16_224), a model folder "
    "saved with save_pretrained, file.py:ClassName or package.module:factory"
)


def unknown_name_message(name: str, what: str) -> str:
    """The one-line error for an unknown ``what`` (model or architecture), with close names."""
    lowered = name.lower()
    torchvision = zoo.torchvision_names()
    known = list(dict.fromkeys([*torchvision, *timm_models.timm_names()]))
    if what == "model":
        known.append("demo")
    close = difflib.get_close_matches(lowered, known, n=3, cutoff=0.6)
    # timm's names are typed with their prefix where torchvision has no model of that name.
    shown = [c if c in torchvision or c == "demo" else f"timm:{c}" for c in close]
    hint = f"; did you mean {', '.join(shown)}?" if shown else ""
    lead = (
        f"{name}: unknown model: not a file, 'demo', "
        if what == "model"
        else f"arch {name!r}: unknown architecture: give "
    )
    forms = ACCEPTED_FORMS
    if what == "model":
        forms = forms.replace(" or package.module:factory", ", package.module:factory")
        forms += " or a Hugging Face hub id already in the local cache (openai-community/gpt2)"
    return f"{lead}{forms}{hint}"


def ignore_arch(loaded: LoadedModel, arch: str | None) -> LoadedModel:
    if arch:
        loaded.warnings.append(f"arch={arch!r} ignored: {loaded.source} already defines the model")
    return loaded
