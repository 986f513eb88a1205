"""What a run needs for sequence views (tokens, patch layout, attention, lens, the input embedding
for saliency), read on the GUI thread with the module walk cached per model.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from torch import nn

from actviz.display.attention import attention_modules
from actviz.display.attribution import input_embedding, token_input
from actviz.display.logit_lens import lens_layers
from actviz.display.token_maps import SequenceLayout, sequence_layout

__all__ = ["ModelSequences", "model_sequences", "sequence_request"]


@dataclass(frozen=True)
class ModelSequences:
    """What a model offers the sequence views."""

    layout: SequenceLayout | None
    attention: bool
    lens_blocks: tuple[str, ...]
    #: The module whose output is the token embeddings (:func:`input_embedding`), or None.
    embedding: str | None = None


_CACHE: weakref.WeakKeyDictionary[nn.Module, ModelSequences] = weakref.WeakKeyDictionary()


def model_sequences(model: nn.Module) -> ModelSequences:
    """:class:`ModelSequences` of ``model`` (computed once per model object)."""
    found = _CACHE.get(model)
    if found is None:
        lens = lens_layers(model)
        found = ModelSequences(
            layout=sequence_layout(model),
            attention=bool(attention_modules(model)),
            lens_blocks=lens.blocks if lens is not None else (),
            embedding=input_embedding(model),
        )
        _CACHE[model] = found
    return found


def sequence_request(session: Any, layers: list[str]) -> dict[str, Any]:
    """The run request's sequence-view fields: ``tokens``, ``layout``, ``tokenizer``, ``attention``
    and ``extra_layers`` (the lens's blocks and the input embedding for saliency).
    """
    model = session.model
    info = model_sequences(model)
    tokens = session.input.tokens if session.input is not None else None
    extra = [b for b in info.lens_blocks if b not in layers]
    value = session.input.value if session.input is not None else None
    if (
        info.embedding is not None
        and token_input(value)
        and info.embedding not in layers
        and info.embedding not in extra
    ):
        # Always, not only while a saliency view is on screen: one (N, T, D) record, and an
        # export or a later look at the Overview then finds the saliency in the same run.
        extra.insert(0, info.embedding)
    return dict(
        tokens=tokens,
        layout=info.layout,
        tokenizer=getattr(session.loaded_model, "tokenizer", None),
        attention=info.attention,
        extra_layers=extra,
    )
