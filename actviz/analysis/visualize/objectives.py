"""Objectives: what the optimisation maximises, as a function of the layer's output (or the
logits) and the samples' keys: a channel, its centre neuron, the layer, a direction, a callable."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.analysis.visualize.visualization import OBJECTIVES, VisualizeError
from actviz.core.edit_kinds import channel_dim


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
        user = objective

        def custom(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            value = user(act)
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
        count, what = out.shape[-1], "classes"
    else:
        count, what = channels_first(out, module).shape[1], "channels"
    if bad := [k for k in keys if not 0 <= k < count]:
        where = f"layer {layer!r}" if module is not None else "the model's output"
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
