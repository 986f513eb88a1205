"""What :func:`~actviz.analysis.visualize.feature_vis.visualize` takes and returns: settings,
results, errors, the merging of pages computed chunk by chunk, and the objectives (what the
optimisation maximises of the layer's output or the logits, per sample key)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.core.edit_kinds import channel_dim
from actviz.data.atlas_map import frozen
from actviz.io.errors import ActvizError

#: Objectives by name: a channel's mean, its centre neuron, the layer's mean square (DeepDream).
OBJECTIVES = ("channel", "neuron", "layer")


class VisualizeError(ActvizError, ValueError):
    """The model, layer, channels or settings cannot be visualised (the message says why); an
    ``ActvizError`` so a window shows the message as it is, a ``ValueError`` for scripts."""


@dataclass(frozen=True)
class VisualizeSettings:
    """What shapes the images of :func:`visualize`; shared by scripts, the CLI, the window and
    the cache key.

    Attributes
    ----------
    objective
        ``"channel"`` (mean activation), ``"neuron"`` (centre position), ``"layer"`` (mean
        square, DeepDream), a direction ``(C,)`` or ``(K, C)`` dotted with each position's
        channel vector, or ``f(layer_output) -> (N,)``. Token layers have channels last.
    steps, lr
        Optimisation steps and Adam's learning rate.
    size
        Side (or ``(h, w)``) of the images; kept as ``(h, w)``.
    param, decorrelate
        ``"fourier"`` (1/f-scaled spectrum) or ``"pixel"``; decorrelated (ImageNet) colour.
    transforms
        ``"standard"`` (pad 12, jitter 8, scale 0.9-1.1, rotate +-10 deg, jitter 4) or ``"none"``.
    seed
        With the sample's key, each sample's seed: a channel gives the same image alone or batched.
    negative
        Minimise the objective instead (what the channel responds to least).
    mean, std, input_size
        The normalisation and the ``(H, W)`` fed; by default the opened model's (none for a
        bare module).
    redirect_relu
        Lucid's redirected ReLU gradient, so channels silent on the start image get a picture.

    Raises
    ------
    VisualizeError
        A value out of range."""

    objective: Any = "channel"
    steps: int = 256
    size: int | tuple[int, int] = 128
    param: str = "fourier"
    decorrelate: bool = True
    transforms: str = "standard"
    lr: float = 0.05
    seed: int = 0
    negative: bool = False
    mean: Sequence[float] | None = None
    std: Sequence[float] | None = None
    input_size: tuple[int, int] | None = None
    redirect_relu: bool = True

    def __post_init__(self) -> None:
        # Coerced (numpy ints, one side, lists): equal settings compare equal and key alike.
        size = self.size
        hw = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
        given = {"steps": int, "lr": float, "seed": int, "param": str, "transforms": str}
        given |= dict.fromkeys(("decorrelate", "negative", "redirect_relu"), bool)
        values: dict[str, Any] = {k: kind(getattr(self, k)) for k, kind in given.items()}
        values["size"] = tuple(int(v) for v in hw)
        for k in ("mean", "std", "input_size"):
            value, kind = getattr(self, k), int if k == "input_size" else float
            values[k] = None if value is None else tuple(kind(v) for v in value)
        for k, value in values.items():
            object.__setattr__(self, k, value)
        if self.steps < 1:
            raise VisualizeError(f"steps must be at least 1, not {self.steps}")
        if len(self.size) != 2 or min(self.size) < 8:
            raise VisualizeError(f"size must be at least 8 pixels, not {size}")
        if not self.lr > 0:
            raise VisualizeError(f"lr must be positive, not {self.lr}")
        for k, (a, b) in (("transforms", ("standard", "none")), ("param", ("fourier", "pixel"))):
            if getattr(self, k) not in (a, b):
                raise VisualizeError(f"{k} must be {a!r} or {b!r}, not {getattr(self, k)!r}")

    def record(self, objective: str | None, norm: Any = None) -> dict[str, Any]:
        """The settings as JSON-able :attr:`Visualization.settings` (and cache key), with the
        objective's name (None: not nameable) and the ``(mean, std)`` applied."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        mean, std = norm if norm else (None, None)
        out.update(objective=objective, mean=mean, std=std)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


@dataclass(frozen=True)
class Visualization:
    """The result of :func:`visualize`: one image per sample (a channel, usually).

    Attributes
    ----------
    layer
        The layer optimised ("" for a class logit of the model's output).
    channels
        The sample keys: channel (or ``target=`` class) indices, or ``0..K-1`` without channels.
    images
        ``(K, 3, H, W)`` float32 in [0, 1], read-only.
    objective
        ``(steps, K)`` float64: each image's objective at each step (transformed), read-only.
    activations
        ``(K,)`` float64: the objective of each final image fed as it is (no transforms).
    settings
        Everything that made the images (JSON-able: :meth:`VisualizeSettings.record`).
    elapsed_s
        Wall time of the call.
    from_cache
        Per sample, whether it was read from the cache rather than computed."""

    layer: str
    channels: tuple[int, ...]
    images: np.ndarray
    objective: np.ndarray
    activations: np.ndarray
    settings: Mapping[str, Any]
    elapsed_s: float = 0.0
    from_cache: tuple[bool, ...] = ()

    def image_uint8(self, k: int) -> np.ndarray:
        """Image ``k`` as ``(H, W, 3)`` uint8 RGB (for PNGs and widgets)."""
        rgb = np.clip(self.images[k].transpose(1, 2, 0), 0.0, 1.0)
        return np.ascontiguousarray(np.round(rgb * 255.0).astype(np.uint8))

    def index(self, channel: int) -> int:
        return self.channels.index(int(channel))

    def select(self, channels: Iterable[int]) -> Visualization:
        """The same visualisation with only ``channels`` (each in :attr:`channels`), in order."""
        rows = [self.index(c) for c in channels]
        if rows == list(range(len(self.channels))):
            return self
        return replace(
            self,
            channels=tuple(self.channels[r] for r in rows),
            images=frozen(self.images[rows]),
            objective=frozen(self.objective[:, rows]),
            activations=frozen(self.activations[rows]),
            from_cache=tuple(self.from_cache[r] for r in rows) if self.from_cache else (),
        )


def merge_visualizations(parts: Sequence[Visualization]) -> Visualization:
    """One :class:`Visualization` of parts of the same layer and settings, in order (a page
    computed in chunks); ``VisualizeError`` for none, a mismatch or a channel given twice."""
    if not parts:
        raise VisualizeError("nothing to merge")
    first = parts[0]
    for part in parts[1:]:
        if part.layer != first.layer or dict(part.settings) != dict(first.settings):
            raise VisualizeError("visualisations of another layer or other settings")
    if len(parts) == 1:
        return first
    channels = tuple(c for part in parts for c in part.channels)
    if len(set(channels)) != len(channels):
        raise VisualizeError("a channel is in two of the visualisations")
    return replace(
        first,
        channels=channels,
        images=frozen(np.concatenate([p.images for p in parts])),
        objective=frozen(np.concatenate([p.objective for p in parts], axis=1)),
        activations=frozen(np.concatenate([p.activations for p in parts])),
        elapsed_s=sum(p.elapsed_s for p in parts),
        from_cache=tuple(f for p in parts for f in p.from_cache),
    )


@dataclass(frozen=True)
class Objective:
    """``fn(output, keys) -> (N,)`` values to maximise; ``name`` for settings (None: a callable)."""

    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    name: str | None
    has_channels: bool


def channels_first(act: torch.Tensor, module: nn.Module | None) -> torch.Tensor:
    """``act`` with its channel dimension at 1 (token layers keep channels last)."""
    if act.dim() < 2:
        raise VisualizeError(f"the layer's output has shape {tuple(act.shape)}: no channels")
    dim = channel_dim(module, act.dim())
    return act if dim == 1 else act.movedim(dim, 1)


def make_objective(
    objective: Any, target: Any, module: nn.Module | None, negative: bool
) -> Objective:
    sign, prefix = (-1.0, "-") if negative else (1.0, "")
    if target is not None:

        def logit(out: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            if out.dim() != 2:
                raise VisualizeError(
                    f"target= needs (N, classes) logits; the model returned {tuple(out.shape)}"
                )
            return sign * out.gather(1, keys[:, None])[:, 0]

        return Objective(logit, prefix + "logit", True)
    if isinstance(objective, (torch.Tensor, np.ndarray)):
        vec = torch.as_tensor(np.asarray(objective, dtype=np.float32))
        if vec.dim() not in (1, 2):
            raise VisualizeError(f"a direction is (C,) or (K, C), not {tuple(vec.shape)}")

        def direction(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            a = channels_first(act, module)
            v = vec.to(device=a.device, dtype=a.dtype)
            if v.shape[-1] != a.shape[1]:
                raise VisualizeError(
                    f"the direction has {v.shape[-1]} values; the layer has {a.shape[1]} channels"
                )
            if v.dim() == 2:
                # One direction per sample: the keys are its rows.
                if int(keys.max()) >= v.shape[0] or int(keys.min()) < 0:
                    raise VisualizeError(
                        f"{v.shape[0]} directions given; the channels name their rows "
                        f"(0..{v.shape[0] - 1})"
                    )
                v = v[keys]
            else:
                v = v[None].expand(a.shape[0], -1)
            a = a.reshape(a.shape[0], a.shape[1], -1)
            return sign * (a * v[:, :, None]).sum(1).mean(1)

        data = vec.contiguous().numpy().tobytes() + str(tuple(vec.shape)).encode()
        digest = hashlib.sha1(data).hexdigest()[:16]
        return Objective(direction, f"{prefix}direction:{digest}", False)
    if callable(objective) and not isinstance(objective, str):

        def custom(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            value = objective(act)
            if not isinstance(value, torch.Tensor) or (
                value.numel() != 1 and tuple(value.shape) != (act.shape[0],)
            ):
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value)
                raise VisualizeError(
                    f"an objective callable returns one value per image ({act.shape[0]},) or a "
                    f"scalar, not {shape}"
                )
            return sign * value.reshape(-1).expand(act.shape[0])

        return Objective(custom, None, False)

    def channel(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        a = channels_first(act, module)
        a = a.reshape(a.shape[0], a.shape[1], -1)
        return a.gather(1, keys[:, None, None].expand(-1, 1, a.shape[2])).mean((1, 2))

    def neuron(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        a = channels_first(act, module)
        centre = tuple(n // 2 for n in a.shape[2:])
        return a[(slice(None), slice(None), *centre)].gather(1, keys[:, None])[:, 0]

    def layer(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return act.pow(2).reshape(act.shape[0], -1).mean(1)

    named = {"channel": channel, "neuron": neuron, "layer": layer}
    if isinstance(objective, str) and objective in named:
        fn = named[objective]
        return Objective(lambda a, k: sign * fn(a, k), prefix + objective, objective != "layer")
    raise VisualizeError(
        f"objective must be one of {', '.join(map(repr, OBJECTIVES))}, a direction tensor or a "
        f"callable of the layer output, not {objective!r}"
    )


def check_keys(
    out: torch.Tensor, keys: list[int], obj: Objective, module: nn.Module | None, layer: str
) -> None:
    if not obj.has_channels:
        return
    if module is None:
        count, what, where = out.shape[-1], "classes", "the model's output"
    else:
        count, what, where = channels_first(out, module).shape[1], "channels", f"layer {layer!r}"
    if bad := [k for k in keys if not 0 <= k < count]:
        # Every key named (as ranges, so 0-200 stays short) and the range there is.
        asked = "is" if len(bad) == 1 else f"{len(bad)} asked for are"
        raise VisualizeError(
            f"{where} has {count} {what} (0-{count - 1}); {asked} out of range: {key_ranges(sorted(bad))}"
        )


def key_ranges(keys: Sequence[int]) -> str:
    """``[64, 65, 66, 70]`` -> ``"64-66,70"`` (the CLI's ``--channels`` form), in the order given."""
    runs: list[list[int]] = []
    for k in keys:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)
