"""Targets: what a capture's gradients are of, and how users name them.

:func:`resolve_target` turns ``capture``'s ``target`` into the scalar to differentiate;
:func:`parse_target` turns typed text into that argument. One rule for API, CLI and window."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from actviz.core.structures import named_tensors

#: The first entry of the target selector: no explicit target, the output's default.
AUTO_TARGET_TEXT = "auto (top-1)"
_DETECTION_KEYS = ("boxes", "scores", "labels")
_CALLABLE_HINT = "pass a callable target that picks a scalar, target=lambda output: ..."


@dataclass(frozen=True)
class Target:
    """The scalar a capture differentiates (``value``), its class ``index`` when there is one, a
    one-line ``description``, and a ``warning`` when the default picked one of several tensors."""

    value: torch.Tensor
    index: int | None
    description: str
    warning: str | None = None


def detections(output: Any) -> list[Mapping[str, torch.Tensor]] | None:
    """The per-image detection dicts (``boxes``, ``scores``, ``labels``) of a detector's output."""
    if not isinstance(output, (list, tuple)) or not output:
        return None
    for item in output:
        if not isinstance(item, Mapping) or not all(
            isinstance(item.get(key), torch.Tensor) for key in _DETECTION_KEYS
        ):
            return None
    return list(output)


def resolve_target(output: Any, target: Any) -> Target:
    """Turn ``target`` into the scalar to differentiate; see :func:`actviz.core.capture.capture`.

    Defaults by output: top-1 logit, top detection score, top segmentation class over its pixels,
    a language model's next-token logit, else the sum. Raises ``ValueError`` (empty or non-float
    output, index out of range, callable not giving one element) or ``TypeError``."""
    if callable(target) and not isinstance(target, (int, torch.Tensor)):
        value = target(output)
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else ""
            raise ValueError(
                f"a callable target must return a tensor with one element, got "
                f"{type(value).__name__}{shape}"
            )
        name = getattr(target, "__name__", type(target).__name__)
        return Target(value.reshape(()), None, f"custom target {name}(output)")
    if target is not None and (isinstance(target, bool) or not isinstance(target, int)):
        raise TypeError(f"target must be None, an int or a callable, not {type(target).__name__}")
    if isinstance(output, torch.Tensor):
        # The usual case, without walking a structure (a capture's fixed cost).
        path, out, segmentation, logits = "output", output, False, None
        tensors: list = [(path, output)]
    else:
        path, out, tensors, segmentation, logits = _structured(output)
        if out is None:  # a detector's output
            return _detection_target(tensors, target)
    warning = None
    if len(tensors) > 1:
        shapes = ", ".join(f"{p} {tuple(t.shape)}" for p, t in tensors[:4])
        more = f" and {len(tensors) - 4} more" if len(tensors) > 4 else ""
        warning = (
            f"the output holds {len(tensors)} tensors ({shapes}{more}); the target uses {path} "
            f"{tuple(out.shape)} (pass a callable target to use another)"
        )
    if not out.is_floating_point() and not out.is_complex():
        raise ValueError(
            f"the model output {path} has dtype {out.dtype}; gradients need a float output"
        )
    if out.numel() == 0:
        raise ValueError(
            f"the model output {path} is empty (shape {tuple(out.shape)}), so it has no value to "
            f"take gradients of; {_CALLABLE_HINT}"
        )
    if segmentation:
        value, index, description = _segmentation_target(out, target)
    elif logits is not None and out.dim() == 3:
        name = type(output).__name__  # masked-LM and token tagging do not predict the next token
        next_token = "MaskedLM" not in name and "TokenClassifier" not in name
        value, index, description = _sequence_target(out, target, next_token)
    elif target is None:
        value, index, description = _default_target(out)
    elif out.dim() == 0:
        raise ValueError(f"target class {int(target)} given, but the model output is a scalar")
    else:
        index = _class_index(int(target), out.shape[0] if out.dim() == 1 else out.shape[1])
        value = out[index] if out.dim() == 1 else out[:, index].sum()
        description = f"class {index}"
    return Target(value if value.dim() == 0 else value.reshape(()), index, description, warning)


def _structured(output: Any) -> tuple[str, Any, list, bool, torch.Tensor | None]:
    """``(path, tensor, tensors, segmentation, logits)``: the default target's reading."""
    if (dets := detections(output)) is not None:
        return "", None, dets, False, None
    tensors: list = list(named_tensors(output))
    if not tensors:
        raise ValueError(
            "the model output holds no tensor, so there is nothing to take gradients of"
        )
    path, out = tensors[0]
    if segmentation := isinstance(output, Mapping) and _is_map(output.get("out")):
        path, out = "output['out']", output["out"]
    if (logits := _logits(output)) is not None:
        # Hugging Face outputs: attentions and hidden states beside the logits are extras.
        path, out, tensors = "output['logits']", logits, [("output['logits']", logits)]
    return path, out, tensors, segmentation, logits


def _logits(output: Any) -> torch.Tensor | None:
    """The ``logits`` of a Hugging Face ``ModelOutput`` (or any dict holding them), else None."""
    value = output.get("logits") if isinstance(output, Mapping) else None
    return value if isinstance(value, torch.Tensor) and value.dim() >= 2 else None


def sequence_logits(output: Any) -> torch.Tensor | None:
    """The ``(N, T, V)`` logits :func:`resolve_target` reads at the last position, else None."""
    if isinstance(output, Mapping) and _is_map(output.get("out")):
        return None  # a segmenter's map comes first in resolve_target
    logits = _logits(output)
    return None if logits is None or logits.dim() != 3 or not logits.is_floating_point() else logits


def token_phrase(index: int, text: str | None = None) -> str:
    """How a description names token ``index``: ``"token 284"`` or ``"token 284 ' world'"``."""
    return f"token {int(index)}" if text is None else f"token {int(index)} {text!r}"


def name_token(description: str, index: int, text: str) -> str:
    """``description`` with token ``index`` named by its ``text`` too (:func:`token_phrase`)."""
    pattern = re.escape(token_phrase(index)) + r"(?!\d)"
    return re.sub(pattern, lambda _m: token_phrase(index, text), description, count=1)


def _sequence_target(
    out: torch.Tensor, target: int | None, next_token: bool = True
) -> tuple[torch.Tensor, int, str]:
    """A token's logit at the last position of (N, T, V) logits; default: each row's top-1, summed."""
    last = out[:, -1, :]  # (N, V)
    vocab = last.shape[1]
    if target is None:
        top = last.detach().argmax(dim=1)
        value = last.gather(1, top[:, None]).sum()
        what = "next-token logit" if next_token else "top-1 logit"
        return value, int(top[0]), f"{what} at the last position ({token_phrase(int(top[0]))})"
    k = int(target)
    if not -vocab <= k < vocab:
        raise ValueError(f"target token {k} is out of range: the vocabulary has {vocab} tokens")
    k %= vocab
    return last[:, k].sum(), k, f"logit of {token_phrase(k)} at the last position"


def _is_map(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() == 4 and t.shape[1] > 1


def top1_target(output: Any) -> tuple[float, int, str] | None:
    """:func:`resolve_target`'s default for a one-row classifier output as ``(value, index,
    description)``, without a tensor (captures without gradients); else None."""
    if not isinstance(output, torch.Tensor) or not output.is_floating_point():
        return None
    if output.dim() != 2 or output.shape[0] != 1 or output.shape[1] < 2:
        return None
    try:  # via numpy (as ``torch.argmax``)
        row = output.numpy()[0]
    except (RuntimeError, TypeError):
        return None
    k = int(row.argmax())
    return float(row[k]), k, f"top-1 logit (class {k})"


def target_numbers(output: Any, target: Any = None) -> tuple[float | None, int | None, str]:
    """The target of a capture without gradients: ``(value, index, description)``, or
    ``(None, None, "no target (why)")`` where :func:`resolve_target` raises."""
    if target is None and (quick := top1_target(output)) is not None:
        return quick
    try:
        resolved = resolve_target(output, target)
    except (ValueError, TypeError, RuntimeError) as exc:
        return None, None, f"no target ({exc})"
    return float(resolved.value.detach()), resolved.index, resolved.description


def fixed_default(output: Any) -> int | None:
    """The int target picking what ``output``'s default picks (None: no int does), held as the
    window's auto target so edits that change the top-1 do not move it."""
    out = output
    if not isinstance(output, torch.Tensor):
        segmenter = isinstance(output, Mapping) and _is_map(output.get("out"))
        out = None if segmenter or detections(output) is not None else _logits(output)
        if out is None:
            return None
    if not out.is_floating_point() or out.shape[0:1] != (1,):
        return None
    if out.dim() == 2 and out.shape[1] > 1:
        return int(out.detach().argmax())
    if out.dim() == 3 and out.shape[2] > 1 and sequence_logits(output) is not None:
        return int(out.detach()[0, -1].argmax())
    return None


def auto_description(index: int, edited: bool) -> str:
    """The held auto target's description, ``top-1 logit[ before the edits] (class 4)``."""
    return f"top-1 logit{' before the edits' if edited else ''} (class {int(index)})"


def _default_target(out: torch.Tensor) -> tuple[torch.Tensor, int | None, str]:
    if out.numel() == 1:
        return out, None, "the model's single output value"
    if out.dim() == 2 and out.shape[0] == 1 and out.shape[1] > 0:
        # One row (the usual case) in two ops; the same value and gradient as the gather below.
        k = int(out.detach().argmax())
        return out[0, k], k, f"top-1 logit (class {k})"
    if out.dim() == 2 and out.shape[1] > 0:
        top = out.detach().argmax(dim=1)
        value = out.gather(1, top[:, None]).sum()  # one row returned above: several here
        desc = f"top-1 logit of each of {out.shape[0]} rows, summed (row 0: class {int(top[0])})"
        return value, int(top[0]), desc
    return out.sum(), None, f"sum of all {out.numel()} output elements"


def _class_index(k: int, n_classes: int) -> int:
    """Class ``k`` of ``n_classes`` (negative counts from the end); ``ValueError`` outside."""
    if not -n_classes <= k < n_classes:
        raise ValueError(f"target class {k} is out of range: the output has {n_classes} classes")
    return k % n_classes


def _segmentation_target(out: torch.Tensor, target: int | None) -> tuple[torch.Tensor, int, str]:
    """A class's logit summed over its predicted pixels (default: the most predicted class)."""
    n_classes = out.shape[1]
    predicted = out.detach().argmax(dim=1)  # (N, H, W)
    counts = torch.bincount(predicted.flatten(), minlength=n_classes)
    k = int(counts.argmax()) if target is None else _class_index(int(target), n_classes)
    pixels = int(counts[k])
    if pixels == 0:
        return out[:, k].sum(), k, f"class {k} logit summed over all pixels (none predicted {k})"
    value = torch.where(predicted == k, out[:, k], torch.zeros((), dtype=out.dtype)).sum()
    return value, k, f"class {k} logit summed over its {pixels} pixels"


def _detection_target(dets: list[Mapping[str, torch.Tensor]], target: int | None) -> Target:
    if target is not None:
        scores, labels = dets[0]["scores"], dets[0]["labels"]
        n = scores.shape[0] if scores.dim() else 0
        if n == 0 or not -n <= target < n:
            raise ValueError(
                f"target detection {target} is out of range: image 0 has {n} detection"
                f"{'' if n == 1 else 's'} (boxes {tuple(dets[0]['boxes'].shape)})"
                + (f"; {_CALLABLE_HINT}" if n == 0 else "")
            )
        j = target % n
        label = int(labels[j])
        where = " of image 0" if len(dets) > 1 else ""
        return Target(scores[j].reshape(()), label, f"score of detection {j}{where}: label {label}")
    tops = [
        (i, int(d["scores"].detach().argmax()))
        for i, d in enumerate(dets)
        if d["scores"].numel() > 0
    ]
    if not tops:
        shapes = ", ".join(f"boxes {tuple(d['boxes'].shape)}" for d in dets[:4])
        raise ValueError(
            f"the model detected nothing ({shapes} for {len(dets)} image"
            f"{'' if len(dets) == 1 else 's'}), so there is no detection score to take "
            f"gradients of; lower the detector's score threshold or {_CALLABLE_HINT}"
        )
    value = torch.stack([dets[i]["scores"][j] for i, j in tops]).sum()
    first_image, j = tops[0]
    label = int(dets[first_image]["labels"][j])
    desc = f"score of detection {j}: label {label}"
    if len(dets) > 1:
        desc = (
            f"top detection score of each of {len(tops)} images, summed (image {first_image}: "
            f"{desc})"
        )
    return Target(value.reshape(()), label, desc)


def check_target(target: Any, output: Any) -> None:
    """Refuse a target that no run could use, where it is set (the rule of :func:`resolve_target`).

    ``output`` is the last output, or the number of classes when none is known yet. Raises
    ``ValueError`` for an index out of range or ``TypeError`` for a refused type."""
    if target is None:
        return
    if output is None or isinstance(output, bool):
        raise TypeError("check_target needs the model's output or its number of classes")
    if isinstance(output, int):
        if output < 1:
            raise ValueError(f"the model has {output} classes, so no target class can be set")
        output = torch.zeros(1, output)
    with torch.no_grad():
        resolve_target(output, target)


def parse_target(
    text: str | None, categories: Sequence[str] | None = None, tokenizer: Any = None
) -> int | None:
    """Turn a typed target into ``capture``'s ``target`` (None = the output's default).

    Accepts ``""``/``"auto..."``, an integer, a :func:`target_choices` entry, ``"detection 3"``,
    a class name (exact, case-insensitive, then unique substring) or, with a ``tokenizer``, a
    token's text. Raises ``ValueError`` for unknown, ambiguous or unusable text."""
    text = (text or "").strip()
    if not text or text.lower().startswith("auto"):
        return None
    if match := re.match(r"^(-?\d+)\s*(?::.*)?$", text):
        return int(match.group(1))
    if match := re.match(r"^(?:score\s+of\s+)?detection\s+(\d+)\b", text, flags=re.IGNORECASE):
        return int(match.group(1))
    if not categories and tokenizer is not None:
        return _token_id(text, tokenizer)
    if not categories:
        raise ValueError(
            f"{text!r} is not a class index, and this model has no class names to search"
        )
    lowered, key = [c.lower() for c in categories], text.lower()
    if key in lowered:
        return lowered.index(key)
    hits = [i for i, c in enumerate(lowered) if key in c]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        close = difflib.get_close_matches(key, lowered, n=3, cutoff=0.6)
        hint = ", ".join(repr(categories[lowered.index(c)]) for c in close)
        raise ValueError(
            f"no class named {text!r} in this model's {len(categories)} categories"
            + (f"; did you mean {hint}?" if hint else "")
        )
    shown = ", ".join(f"{i}: {categories[i]}" for i in hits[:5])
    raise ValueError(f"{text!r} matches {len(hits)} classes ({shown}...); be more specific")


def _token_id(text: str, tokenizer: Any) -> int:
    """The id of the one token ``text`` names (a vocabulary entry or text of one token)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]  # quotes keep leading spaces, which byte-level vocabularies mark
    if text in (vocab := tokenizer.get_vocab()):
        return int(vocab[text])
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if len(ids) == 1:
        return int(ids[0])
    if not ids:
        raise ValueError(f"{text!r} makes no token with this model's tokenizer")
    pieces = ", ".join(repr(t) for t in tokenizer.convert_ids_to_tokens(ids)[:6])
    raise ValueError(
        f"{text!r} is {len(ids)} tokens ({pieces}), not one; a target is one token: give one "
        "of them, or its id"
    )


def target_choices(categories: Sequence[str] | None = None, output: Any = None) -> list[str]:
    """Entries of a target selector, :data:`AUTO_TARGET_TEXT` first; each parses back."""
    if (dets := detections(output)) is None:
        return [AUTO_TARGET_TEXT, *(f"{i}: {name}" for i, name in enumerate(categories or []))]
    scores = dets[0]["scores"].detach().flatten().tolist()
    labels = [int(v) for v in dets[0]["labels"].flatten().tolist()]
    entries = ["auto (top detection)"]
    for i, (score, label) in enumerate(zip(scores, labels, strict=False)):
        name = f" ({categories[label]})" if categories and 0 <= label < len(categories) else ""
        entries.append(f"score of detection {i}: label {label}{name}, {score:.3f}")
    return entries
