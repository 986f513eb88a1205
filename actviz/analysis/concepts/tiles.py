"""What the window shows of a dictionary for one input (no Qt): a panel's concept page
(:func:`concept_tiles`), a concept's map over the input, and its effect on the prediction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from actviz.analysis.concepts.dictionary import Concepts
from actviz.display.layer_views import LayerView
from actviz.display.mosaic import ChannelOrder, Mosaic, mosaic
from actviz.display.token_maps import TokenView, row_norms

#: What the page read-out calls the concepts' order.
ORDER_LABEL = "most active"


def concept_label(concept: int, names: Mapping[int, str] | None = None) -> str:
    """``concept 12`` or ``concept 12 "wheel"`` when the user named it."""
    name = (names or {}).get(int(concept), "")
    return f'concept {concept} "{name}"' if name else f"concept {concept}"


@dataclass(frozen=True, eq=False)
class ConceptTiles:
    """One layer's concepts for one input, as a panel shows them.

    ``view`` holds every concept's map; ``mosaic`` tiles the first ``page`` of ``order`` (firing
    concepts, most active first); ``peaks`` each concept's largest value; ``active`` how many fire.
    """

    layer: str
    view: LayerView
    mosaic: Mosaic
    order: tuple[int, ...]
    peaks: np.ndarray
    active: int


def _as_maps(maps: torch.Tensor) -> np.ndarray:
    a = maps.detach().to("cpu", torch.float32).numpy()
    if a.ndim == 1:  # an (N, C) layer: one value per concept
        return a.reshape(-1, 1, 1)
    if a.ndim == 2:  # tokens: one row
        return a.reshape(a.shape[0], 1, a.shape[1])
    return a.reshape(a.shape[0], a.shape[1], -1)


def concept_tiles(
    concepts: Concepts,
    capture: Any,
    layer: str,
    *,
    sample: int = 0,
    page: int = 64,
    normalize: str = "channel",
    first: int = 0,
    layout: Any = None,
) -> ConceptTiles:
    """The concept page of ``layer`` for ``sample`` of ``capture``: at most ``page`` tiles from
    position ``first`` of the order (clamped to it); a ViT's tokens under ``layout`` (a
    ``SequenceLayout``) as maps on its patch grid, as the layer's own are.

    ``ValueError`` when the layer was not captured or its width is not the dictionary's.
    """
    got, top = concepts.maps_and_peaks(capture, layer, index=sample)
    if layout is not None and got.ndim == 2 and got.shape[1] == layout.tokens:
        # The patches on their grid (the prefix tokens left out); peaks of what is shown.
        got = got[:, layout.prefix :].reshape(got.shape[0], *layout.grid)
        top = got.reshape(got.shape[0], -1).amax(1).clamp_min(0)
    maps = _as_maps(got)
    # The peaks come with the maps (a TopK dictionary's from its k values per position): no
    # second pass over every concept's map to order the tiles.
    peaks = top.detach().to("cpu", torch.float32).numpy() if maps.size else np.zeros(len(maps))
    peaks = np.where(np.isfinite(peaks), peaks, 0.0).astype(np.float32)
    firing = np.flatnonzero(peaks > 0)
    active = int(firing.size)
    if active:
        # Strongest first; equal peaks by number, so the order is stable across frames.
        ranked = firing[np.lexsort((firing, -peaks[firing]))]
    else:
        ranked = np.arange(min(maps.shape[0], max(1, page)))
    order = tuple(int(i) for i in ranked)
    shown = mosaic(
        maps,
        normalize=normalize,
        first_channel=first,
        max_channels=max(1, int(page)),
        order=ChannelOrder(order, ORDER_LABEL),
    )
    h, w = maps.shape[1:]
    # A text model's (concepts, T) maps: titled tokens x concepts, as the layer is.
    shape = (1, w, maps.shape[0]) if got.ndim == 2 else (1, *maps.shape)
    view = LayerView(
        "maps",
        maps,
        shape,
        f"{active} of {concepts.d_sae} concepts fire ({h}x{w} maps)",
    )
    return ConceptTiles(layer, view, shown, order, peaks, active)


def concept_picture(
    image: np.ndarray | None, concept_map: np.ndarray, *, size: int = 256
) -> np.ndarray:
    """``(H, W, 3)`` uint8: the concept's map (scaled to its peak) blended over the input picture as
    saliency is, or on a grey ``size``-pixel square without a picture.
    """
    from actviz.display.colormaps import overlay

    heat = np.asarray(concept_map, dtype=np.float32)
    heat = np.where(np.isfinite(heat), np.maximum(heat, 0.0), 0.0)
    if heat.ndim == 1:
        heat = heat[None]
    peak = float(heat.max()) if heat.size else 0.0
    heat01 = heat / peak if peak > 0 else heat
    if image is None or np.asarray(image).ndim != 3:
        picture = np.full((size, size, 3), 128, np.uint8)
    else:
        picture = np.ascontiguousarray(np.asarray(image)[..., :3]).astype(np.uint8)
    return overlay(picture, heat01, alpha=0.6)


@dataclass(frozen=True)
class ConceptEffect:
    """The ``target`` class's probability and logit without and with a concept edit, and the
    top class with it.
    """

    target: int
    p_before: float
    p_after: float
    logit_before: float
    logit_after: float
    top_after: int
    next_token: bool = False  #: A language model's: the next token's, at the last position.

    @property
    def dp(self) -> float:
        """The change of the target's probability (after - before)."""
        return self.p_after - self.p_before


def concept_effect(
    model: torch.nn.Module,
    inputs: Any,
    concepts: Concepts,
    layer: str,
    concept: int,
    *,
    scale: float = 0.0,
    target: int | None = None,
    edits: Mapping[str, Any] | None = None,
) -> ConceptEffect | None:
    """What the prediction does when ``concept`` is removed (``scale=0``) from ``layer``.

    ``edits``: the edits the runs already apply (the effect is measured on top of them).
    None when the model's output is neither ``(N, classes)`` scores nor a language model's
    ``(N, T, V)`` logits (read at the last position, as the window's target is).
    """
    from actviz.core import edit_kinds as E
    from actviz.core.capture import capture
    from actviz.core.structures import first_tensor
    from actviz.core.targets import sequence_logits

    base_edits = {k: tuple(v) for k, v in (edits or {}).items()}
    with_concept = dict(base_edits)
    with_concept[layer] = (*base_edits.get(layer, ()), E.concept(concepts, [int(concept)], scale))
    outs = []
    for chosen in (base_edits, with_concept):
        cap = capture(model, inputs, [], gradients=False, input_grads=False, edits=chosen or None)
        seq = sequence_logits(cap.output)
        out = first_tensor(cap.output) if seq is None else seq[:, -1]
        if out is None or out.ndim != 2 or out.shape[1] < 2:
            return None
        outs.append(out[0].detach().to("cpu", torch.float64))
    before, after = outs
    t = int(before.argmax()) if target is None else int(target)
    if not 0 <= t < before.shape[0]:
        return None
    pb, pa = torch.softmax(before, 0), torch.softmax(after, 0)
    return ConceptEffect(
        t,
        float(pb[t]),
        float(pa[t]),
        float(before[t]),
        float(after[t]),
        int(after.argmax()),
        next_token=seq is not None,
    )


def concept_token_view(tiles: ConceptTiles, layer: TokenView) -> TokenView:
    """A text model's layer as its token panel shows a dictionary: ``layer``'s tokens x the
    concepts of ``tiles``' page (most active first), each cell a concept's value there."""
    columns = tuple(int(c) for c in tiles.mosaic.tile_channels)
    heat = np.ascontiguousarray(tiles.view.data[list(columns), 0, :].T, dtype=np.float32)
    return TokenView(
        tokens=layer.tokens,
        heat=heat,
        norms=row_norms(heat),
        grad_heat=None,
        grad_norms=None,
        shape=(layer.shape[0], layer.shape[1], int(tiles.peaks.shape[0])),
        sample=layer.sample,
        unit="concept",
        columns=columns,
    )


def where_it_fires(
    concept_map: np.ndarray, image: np.ndarray | None, tokens: Sequence[str] | None = None
) -> np.ndarray | str:
    """The Concept dock's view of a concept's map: over the input picture, or for a text model's
    layer (``tokens``) in words (:func:`token_firing`: there is no picture)."""
    if tokens is None:
        return concept_picture(image, concept_map)
    return token_firing(tokens, concept_map)


def token_firing(tokens: Sequence[str], values: np.ndarray, most: int = 8) -> str:
    """Where a concept fires in a text, in words: its strongest tokens with their values."""
    values = np.nan_to_num(np.asarray(values, dtype=np.float32).reshape(-1))
    firing = [int(i) for i in np.argsort(-values, kind="stable") if values[i] > 0]
    if not firing:
        return "It fires on no token of this input."
    shown = " · ".join(f"{tokens[i]!r} (token {i}) {values[i]:.3g}" for i in firing[:most])
    more = f" and {len(firing) - most} more" if len(firing) > most else ""
    return f"Fires on {len(firing)} of {len(values)} tokens: {shown}{more}."
