"""The logit lens of a decoder language model: each block's hidden state read out as tokens
through the model's own final norm and unembedding (found by structure: :func:`lens_layers`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.core.capture import model_device
from actviz.core.records import CaptureCancelled
from actviz.core.structures import first_tensor


@dataclass(frozen=True)
class LensLayers:
    """The modules the lens reads: blocks in order, the final norm (if any), the unembedding."""

    blocks: tuple[str, ...]
    norm: str | None
    unembed: str


def lens_layers(model: nn.Module) -> LensLayers | None:
    """The blocks (longest ``ModuleList``), final norm (the last ``*Norm*`` after them) and
    unembedding (``get_output_embeddings()``) of a decoder language model, or None."""
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    if not isinstance(head, nn.Module):
        return None
    if id(head) not in (names := {id(m): n for n, m in model.named_modules()}):
        return None
    lists = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        return None
    list_name, blocks = max(lists, key=lambda item: len(item[1]))
    block_names = tuple(f"{list_name}.{i}" if list_name else str(i) for i in range(len(blocks)))
    norm, after = None, False
    for name, module in model.named_modules():
        if name == list_name:
            after = True
            continue
        if after and not name.startswith(f"{list_name}.") and "Norm" in type(module).__name__:
            norm = name
    return LensLayers(block_names, norm, names[id(head)])


def token_texts(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Readable strings of token ``ids``, the one rule wherever a token is named by its text:
    each id decoded on its own (``" world"``), else the tokenizer's token string, else ``#id``."""
    out = []
    for i in ids:
        i = int(i)
        text = ""
        if tokenizer is not None:
            # A tokenizer's own failure must not break a view.
            with contextlib.suppress(Exception):
                text = tokenizer.decode([i], clean_up_tokenization_spaces=False)
            if not text or "\ufffd" in text:
                text = ""
                with contextlib.suppress(Exception):
                    text = str(tokenizer.convert_ids_to_tokens([i])[0] or "")
        out.append(text or f"#{i}")
    return out


@dataclass(frozen=True)
class LogitLens:
    """Top-``k`` tokens of every block at every position (arrays read-only): ``ids``, ``probs``
    and ``texts`` are ``(layers, T, k)``, most probable first."""

    layers: tuple[str, ...]
    ids: np.ndarray
    probs: np.ndarray
    texts: tuple[tuple[tuple[str, ...], ...], ...]
    tokens: tuple[str, ...] | None
    sample: int

    def __post_init__(self) -> None:
        self.ids.setflags(write=False)
        self.probs.setflags(write=False)

    @property
    def positions(self) -> int:
        return int(self.ids.shape[1])

    def rows(self, position: int = -1) -> list[tuple[str, list[tuple[int, str, float]]]]:
        """``(layer, [(id, text, probability), ...])`` per layer at ``position``."""
        p = position % self.positions
        ids, probs = self.ids[:, p].tolist(), self.probs[:, p].tolist()
        return [
            (layer, list(zip(ids[i], self.texts[i][p], probs[i], strict=True)))
            for i, layer in enumerate(self.layers)
        ]


def logit_lens(
    model: nn.Module,
    cap: Any,
    position: int | None = None,
    *,
    k: int = 5,
    sample: int = 0,
    tokenizer: Any = None,
    tokens: Sequence[str] | None = None,
    layers: LensLayers | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> LogitLens:
    """The logit-lens table of a capture that recorded the model's blocks (missing ones
    skipped); ``position`` keeps one position (negative from the end; None: all). Raises
    ``ValueError`` when the model is no decoder LM or the capture holds none of its blocks."""
    if (lens := layers or lens_layers(model)) is None:
        raise ValueError(f"{type(model).__name__} has no output embedding and blocks to read")
    modules = dict(model.named_modules())
    norm = modules[lens.norm] if lens.norm else nn.Identity()
    head = modules[lens.unembed]
    device = model_device(model) or torch.device("cpu")
    names, all_ids, all_probs = [], [], []
    with torch.no_grad():
        for name in lens.blocks:
            if should_stop is not None and should_stop():
                raise CaptureCancelled("cancelled while reading the logit lens")
            if name not in cap:
                continue
            if (hidden := first_tensor(cap[name].output)) is None or hidden.dim() != 3:
                continue
            h = hidden[min(sample, hidden.shape[0] - 1)].to(device)
            if position is not None:
                h = h[position : position + 1] if position != -1 else h[-1:]
            probs = torch.softmax(head(norm(h)).float(), dim=-1)
            top = torch.topk(probs, min(k, probs.shape[-1]), dim=-1)
            names.append(name)
            all_ids.append(top.indices.cpu().numpy())
            all_probs.append(top.values.cpu().numpy())
    if not names:
        raise ValueError("the capture holds none of the model's blocks (capture them first)")
    ids = np.stack(all_ids).astype(np.int64)
    texts = tuple(tuple(tuple(token_texts(tokenizer, row)) for row in layer) for layer in ids)
    probs = np.stack(all_probs).astype(np.float32)
    labels = tuple(tokens) if tokens is not None else None
    return LogitLens(tuple(names), ids, probs, texts, labels, sample)
