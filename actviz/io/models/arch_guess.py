"""Guessing the architecture of a bare state_dict from its key names and tensor shapes, against
signatures (key -> shape) built on the ``meta`` device: torchvision's, and timm's shortlist, kept
between sessions in the user cache (:class:`SignatureStore`): some fifty are built per guess, the
same for every checkpoint while torch, torchvision and timm stay put."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from actviz.core.threads import report
from actviz.io.errors import WriteError
from actviz.io.files import atomic_write, user_cache_dir
from actviz.io.models import zoo
from actviz.io.models.checkpoints import best_prefix, drop_compile_prefix
from actviz.io.models.loaded_model import ArchGuess

log = logging.getLogger(__name__)
#: Zoos searched by default, in order of preference when two match equally well.
ZOOS = ("torchvision", "timm")
MIN_SCORE = 0.2  #: Guesses scoring below this are not worth showing.
#: A family is searched when this share of its key patterns (or the checkpoint's) matches.
FAMILY_OVERLAP = 0.5
#: At most this many timm architectures are compared.
TIMM_MAX_CANDIDATES = 300
#: The timm architectures a bare state_dict is compared with: the common families' popular
#: members and timm's tiny test models (any other opens with ``arch="timm:NAME"``).
TIMM_SHORTLIST = tuple(
    """
    test_vit test_vit2 test_convnext test_convnext2 test_efficientnet test_resnet resnet18
    resnet26 resnet34 resnet50 resnet101 resnet152 resnet50d resnext50_32x4d seresnet50
    wide_resnet50_2 efficientnet_b0 efficientnet_b1 efficientnet_b2 efficientnet_b3
    tf_efficientnet_b0 tf_efficientnetv2_s mobilenetv2_100 mobilenetv3_small_100
    mobilenetv3_large_100 mobilenetv4_conv_small convnext_atto convnext_femto convnext_pico
    convnext_nano convnext_tiny convnext_small convnext_base convnextv2_atto convnextv2_tiny
    vit_tiny_patch16_224 vit_small_patch16_224 vit_base_patch16_224 vit_large_patch16_224
    vit_base_patch32_224 vit_small_patch14_dinov2 vit_base_patch14_dinov2 deit_tiny_patch16_224
    deit_small_patch16_224 deit_base_patch16_224 swin_tiny_patch4_window7_224
    swin_small_patch4_window7_224 swin_base_patch4_window7_224 regnety_008 regnety_016
    regnety_032 densenet121 inception_v3 efficientvit_b0 levit_128s mixer_b16_224
    beit_base_patch16_224 eva02_tiny_patch14_224 caformer_s18 fastvit_t8 ghostnet_100
    edgenext_small mobilevit_s repvgg_a2 rexnet_100 dla34 cspdarknet53
    """.split()
)
#: Head-size adaptation is only tried for candidates at least this close.
_HEAD_MIN_SCORE = 0.5
# Scores: exact 1.0, exact once the head is resized _HEAD_FIT, unloadable below both.
_HEAD_FIT = 0.99
_NO_FIT = 0.98
# Name parts that give a model's size, not its structure (``large``, ``400mf``, ``b0`` -> ``b``).
_SIZE_WORDS = frozenset(
    {"t", "s", "m", "b", "l", "h", "small", "large", "tiny", "base", "huge", "mf", "gf"}
)
Shape = tuple[int, ...]


@dataclass(frozen=True)
class _Signature:
    shapes: Mapping[str, Shape]
    keys: frozenset[str]
    patterns: frozenset[str]


class _SkipInit(TorchFunctionMode):
    """Make random initialisers no-ops on this thread: only shapes are read."""

    # Every in-place initialiser of torch.nn.init (uniform_, kaiming_normal_, ...) and Tensor's.
    _skipped = frozenset(
        [f for n, f in vars(torch.nn.init).items() if n.endswith("_") and n[0] != "_"]
        + [getattr(torch.Tensor, n) for n in ("normal_", "uniform_", "zero_", "fill_", "erfinv_")]
    )

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if func in self._skipped:
            return args[0] if args else (kwargs or {}).get("tensor")
        return func(*args, **(kwargs or {}))


def _pattern(key: str) -> str:
    # Block indices vary with depth (layer1.0 ... layer1.2); the pattern keeps the structure.
    return ".".join("#" if part.isdigit() else part for part in key.split("."))


@functools.cache
def _signature(name: str, num_classes: int | None) -> _Signature | None:
    store, key = signature_store(), f"{name}|{num_classes}"
    if (clean := store.get(key)) is None:
        if (clean := _built_shapes(name, num_classes)) is None:
            return None
        store.put(key, clean)
    return _Signature(
        MappingProxyType(clean), frozenset(clean), frozenset(_pattern(k) for k in clean)
    )


def _built_shapes(name: str, num_classes: int | None) -> dict[str, Shape] | None:
    report(f"Guessing the architecture of the weights: trying {name}…")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation notes of builders (GoogLeNet, ...)
            try:
                with torch.device("meta"), _SkipInit():
                    model = zoo.construct(name, num_classes=num_classes)
            except (NotImplementedError, RuntimeError):
                # RegNet computes widths with tensors: real (uninitialised, cheap) memory.
                with _SkipInit():
                    model = zoo.construct(name, num_classes=num_classes)
            return _checkpoint_shapes(model.state_dict())
    except Exception as exc:  # noqa: BLE001 - any builder may fail; the others still count
        log.debug("no signature for %s (num_classes=%s): %s", name, num_classes, exc)
        return None


@functools.cache
def _torchvision_families() -> Mapping[str, tuple[str, ...]]:
    import torchvision.models as tvm

    names = [n for m in (tvm, tvm.segmentation, tvm.detection) for n in tvm.list_models(module=m)]
    families: dict[str, list[str]] = {}
    for name in names:
        try:
            module_name = tvm.get_model_builder(name).__module__
        except ValueError:
            continue
        # The name's stem, without sizes (resnet50 -> resnet, vgg16_bn -> vgg_bn), tells a
        # module's structures apart (VGG with/without BN, Swin v1/v2).
        parts = ("".join(c for c in part if not c.isdigit()) for part in name.split("_"))
        stem = "_".join(p for p in parts if p and p not in _SIZE_WORDS)
        families.setdefault(f"{module_name}:{stem}", []).append(name)
    return MappingProxyType({f: tuple(n) for f, n in families.items()})


@functools.cache
def _timm_families() -> Mapping[str, tuple[str, ...]]:
    try:
        import timm
    except ImportError:
        log.debug("timm is not installed: only torchvision architectures are guessed")
        return MappingProxyType({})
    families: dict[str, tuple[str, ...]] = {}
    try:
        for module in timm.list_modules():
            listed = set(timm.list_models(module=module))
            # In shortlist order: a family's first (smallest, cheapest) member stands for it.
            if names := tuple(zoo.TIMM_PREFIX + n for n in TIMM_SHORTLIST if n in listed):
                families[module] = names
    except Exception as exc:  # noqa: BLE001 - an incompatible timm must not break guessing
        log.debug("cannot list timm models: %s", exc)
    return MappingProxyType(families)


_FAMILIES = {"torchvision": _torchvision_families, "timm": _timm_families}
_LIMITS = {"timm": TIMM_MAX_CANDIDATES}


def _family_overlap(patterns: frozenset[str], family: tuple[str, ...]) -> float:
    # The first member that builds stands for the family (a builder may fail on meta).
    sig = next(
        (s for s in (_signature(n, None) for n in family[:3]) if s is not None and s.patterns), None
    )
    if sig is None or not patterns:
        return 0.0
    _, matches = best_prefix(patterns, sig.patterns)
    return matches / min(len(patterns), len(sig.patterns))


def _candidates(patterns: frozenset[str], zoo_name: str) -> list[str]:
    """Architectures of families whose key patterns overlap the checkpoint's, best first."""
    overlaps = [(_family_overlap(patterns, n), n) for n in _FAMILIES[zoo_name]().values()]
    ranked = sorted((o for o in overlaps if o[0] >= FAMILY_OVERLAP), key=lambda item: -item[0])
    return [name for _, names in ranked for name in names][: _LIMITS.get(zoo_name)]


def _checkpoint_shapes(state_dict: Mapping[str, Any]) -> dict[str, Shape]:
    """Key -> shape of every tensor of a state_dict (a built model's or a checkpoint's)."""
    cleaned, _ = drop_compile_prefix(state_dict)
    return {
        k: tuple(int(s) for s in v.shape)
        for k, v in cleaned.items()
        if isinstance(k, str) and getattr(v, "shape", None) is not None
    }


def _head_resize(inside: Mapping[str, Shape], sig: _Signature) -> tuple[int, int] | None:
    """``(checkpoint_classes, default_classes)`` when only the head's output count differs."""
    pairs = set()
    for key, shape in inside.items():
        ref = sig.shapes.get(key)
        if ref is None or ref == shape:
            continue
        if len(ref) != len(shape) or not ref or ref[1:] != shape[1:]:
            return None
        pairs.add((shape[0], ref[0]))
    # All differing tensors (classifier weight and bias, auxiliary heads) agree on one count.
    return pairs.pop() if len(pairs) == 1 else None


def _verb(count: int, plural: str) -> str:
    return plural if count != 1 else {"are": "is", "differ": "differs"}[plural]


def _score(
    name: str,
    zoo_name: str,
    ckpt: Mapping[str, Shape],
    sig: _Signature,
    prefix: str,
    head: tuple[int, int] | None,
) -> ArchGuess:
    inside = {k[len(prefix) :]: s for k, s in ckpt.items() if k.startswith(prefix)}
    common = [k for k in inside if k in sig.shapes]
    differ = [k for k in common if inside[k] != sig.shapes[k]]
    matched = len(common) - len(differ)
    missing, unexpected = len(sig.shapes) - len(common), len(ckpt) - len(common)
    union = len(ckpt) + len(sig.shapes) - len(common)
    # Jaccard over tensors; a key found with another shape earns half.
    similarity = (matched + 0.5 * len(differ)) / union if union else 0.0
    fits = matched == len(ckpt) == len(sig.shapes)
    head_note = f"head has {head[0]} classes instead of {head[1]}" if head else ""
    if fits:
        score = _HEAD_FIT if head else 1.0
        reason = f"{head_note}; all other tensors match" if head else f"all {matched} tensors match"
    else:
        score = _NO_FIT * similarity
        parts = [f"{matched} of {len(ckpt)} tensors match"]
        if differ:
            parts.append(
                f"{len(differ)} {_verb(len(differ), 'differ')} in shape (e.g. {differ[0]})"
            )
        if missing:
            parts.append(f"{missing} of the model's {_verb(missing, 'are')} missing")
        if unexpected:
            parts.append(f"{unexpected} {_verb(unexpected, 'are')} not in the model")
        reason = (f"{head_note}; " if head else "") + ", ".join(parts)
    return ArchGuess(
        name=name,
        score=round(score, 4),
        matched=matched,
        keys_matched=len(common),
        tensors=len(ckpt),
        expected=len(sig.shapes),
        prefix=prefix,
        num_classes=head[0] if head else None,
        reason=reason,
        zoo=zoo_name,
    )


def _compare(name: str, zoo_name: str, ckpt: Mapping[str, Shape]) -> ArchGuess | None:
    if (sig := _signature(name, None)) is None:
        return None
    prefix, _ = best_prefix(ckpt, sig.keys)
    guess = _score(name, zoo_name, ckpt, sig, prefix, None)
    if guess.fits or guess.score < _HEAD_MIN_SCORE * _NO_FIT:
        return guess
    inside = {k[len(prefix) :]: s for k, s in ckpt.items() if k.startswith(prefix)}
    head = _head_resize(inside, sig)
    resized = None if head is None else _signature(name, head[0])
    if resized is None:
        return guess
    adapted = _score(name, zoo_name, ckpt, resized, prefix, head)
    return adapted if adapted.matched > guess.matched else guess


def compare_architecture(state_dict: Mapping[str, Any], name: str) -> ArchGuess | None:
    """Score one named architecture against a state_dict; None when it cannot be built."""
    zoo_name = "timm" if name.startswith(zoo.TIMM_PREFIX) else "torchvision"
    guess = _compare(name, zoo_name, _checkpoint_shapes(state_dict))
    signature_store().save()
    return guess


def guess_architecture(
    state_dict: Mapping[str, Any], *, top: int = 5, zoos: Sequence[str] = ZOOS
) -> list[ArchGuess]:
    """The architectures scoring at least :data:`MIN_SCORE` for a state_dict (prefixes such as
    ``module.`` allowed), best first; a later one of ``zoos`` only when no earlier one fits."""
    if not (ckpt := _checkpoint_shapes(state_dict)):
        return []
    patterns = frozenset(_pattern(k) for k in ckpt)
    guesses: list[ArchGuess] = []
    for zoo_name in zoos:
        if zoo_name not in _FAMILIES:
            raise ValueError(f"unknown model zoo {zoo_name!r}; known: {', '.join(_FAMILIES)}")
        if any(g.fits for g in guesses):
            break  # An earlier zoo's fit wins over a later zoo's copies (each build costs seconds).
        for name in _candidates(patterns, zoo_name):
            if (guess := _compare(name, zoo_name, ckpt)) is not None and guess.score >= MIN_SCORE:
                guesses.append(guess)
    signature_store().save()  # what was built, for the next session
    order = {z: i for i, z in enumerate(zoos)}
    guesses.sort(key=lambda g: (-g.score, order[g.zoo], g.name))
    return _without_twins(guesses)[:top]


def _without_twins(guesses: list[ArchGuess]) -> list[ArchGuess]:
    """Drop a later zoo's copy of an architecture already listed."""
    kept: list[ArchGuess] = []
    seen: dict[frozenset, str] = {}
    for guess in guesses:
        sig = _signature(guess.name, guess.num_classes)
        key = frozenset(sig.shapes.items()) if sig is not None else None
        if key is None or seen.setdefault(key, guess.zoo) == guess.zoo:
            kept.append(guess)
    return kept


def confident_guess(guesses: Iterable[ArchGuess]) -> ArchGuess | None:
    """The guess to use without asking: the best, if it loads and none in its zoo ties."""
    ranked = list(guesses)
    if not ranked or not ranked[0].fits:
        return None
    best = ranked[0]
    tied = any(o.fits and o.score == best.score and o.zoo == best.zoo for o in ranked[1:])
    return None if tied else best


class SignatureStore:
    """Signatures (state_dict key -> shape) by name, read from ``path`` once and written back
    when grown; a file made with other ``versions`` is ignored (and replaced)."""

    def __init__(self, path: Path, versions: Mapping[str, str]) -> None:
        self.path, self.versions = path, dict(versions)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, list[int]]] | None = None
        self._grown = False

    def _loaded(self) -> dict[str, dict[str, list[int]]]:
        if self._entries is None:
            self._entries = {}
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if data["versions"] == self.versions:
                    self._entries = dict(data["signatures"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.debug("no stored signatures in %s: %s", self.path, exc)
        return self._entries

    def get(self, name: str) -> dict[str, Shape] | None:
        """The stored signature of ``name`` (None: not stored)."""
        with self._lock:
            found = self._loaded().get(name)
        return None if found is None else {k: tuple(v) for k, v in found.items()}

    def put(self, name: str, shapes: Mapping[str, Shape]) -> None:
        """Keep ``name``'s signature (written by the next :meth:`save`)."""
        with self._lock:
            self._loaded()[name] = {k: list(v) for k, v in shapes.items()}
            self._grown = True

    def save(self) -> None:
        """Write the signatures when some were added (failing only costs the next session)."""
        with self._lock:
            if not self._grown:
                return
            self._grown = False
            text = json.dumps({"versions": self.versions, "signatures": self._entries})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(self.path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except (OSError, WriteError) as exc:
            log.debug("could not keep the signatures in %s: %s", self.path, exc)


@functools.cache
def signature_store() -> SignatureStore:
    """The process's store, in the user cache, for the torch, torchvision and timm installed
    (their versions read without importing timm: 2 s)."""
    versions = {}
    for package in ("torch", "torchvision", "timm"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return SignatureStore(user_cache_dir() / "arch-signatures.json", versions)
