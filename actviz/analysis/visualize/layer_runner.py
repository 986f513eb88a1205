"""Running the model to the layer: the forward stopped at the layer by a hook, Lucid's redirected
ReLU gradient, and the probe that finds the input size the model runs on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from actviz.analysis.visualize.visualization import VisualizeError, VisualizeSettings
from actviz.core.structures import first_tensor


class _Reached(Exception):
    """Raised from the layer's hook once its output is taken: the rest of the forward is
    not needed."""


class _RedirectedReLU(torch.autograd.Function):
    """ReLU whose gradient is not lost where units are off (Lucid's ``redirected_relu_grad``).

    Forward: ``max(x, 0)``. Backward, per image: the plain gradient if any got through, else the
    gradient that would turn units on. Images in ``stuck`` (last step's gradient exactly zero, as
    for a channel that answers only to the padding's edge) get the redirected gradient at every
    ReLU, where plain activation maximisation would stay grey.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, stuck: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, stuck)
        return x.clamp_min(0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        x, stuck = ctx.saved_tensors
        off = x < 0
        plain = grad.masked_fill(off, 0)
        through = plain.reshape(plain.shape[0], -1).ne(0).any(1) & ~stuck
        if grad.device.type == "cpu" and bool(through.all()):
            # Every image got gradient through (nearly every step after the first few): the
            # plain gradient, without the redirected one's passes over the batch. (On a GPU
            # the check would wait for the device at every ReLU; the blend below does not.)
            return plain, None
        # Gradient descent on the loss moves x by -grad: grad > 0 would push an off unit lower.
        redirected = grad.masked_fill(off & (grad > 0), 0)
        return torch.where(through.view(-1, *([1] * (x.dim() - 1))), plain, redirected), None


class LayerRunner:
    """Feeds a batch and returns what the objective reads: the layer's output (the forward
    stopped there) or the model's logits."""

    def __init__(
        self, model: nn.Module, module: nn.Module | None, layer: str, redirect: bool
    ) -> None:
        self.model = model
        self.module = module
        self.layer = layer
        self.taken: torch.Tensor | None = None
        self.stuck: torch.Tensor | None = None  # (N,) bool, set per step
        self.handles: list[Any] = []
        if redirect:
            # Registered first, so a hooked ReLU layer hands its redirected output on.
            self.handles += [
                m.register_forward_hook(self._redirect)
                for m in model.modules()
                if isinstance(m, nn.ReLU)
            ]
        if module is not None:
            self.handles.append(module.register_forward_hook(self._hook))

    def _redirect(self, module: nn.Module, args: Any, output: Any) -> Any:
        x = args[0] if args else None
        if isinstance(x, torch.Tensor) and isinstance(output, torch.Tensor) and x.requires_grad:
            stuck = self.stuck
            if stuck is None or stuck.shape[0] != x.shape[0]:
                stuck = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
            return _RedirectedReLU.apply(x, stuck)
        return None

    def _hook(self, module: nn.Module, args: Any, output: Any) -> None:
        if self.taken is None:
            self.taken = first_tensor(output)
            raise _Reached

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.taken = None
        if self.module is None:
            out = self.model(x)
            logits = out.get("logits") if isinstance(out, Mapping) else None
            if logits is None:
                logits = getattr(out, "logits", None)
            t = logits if isinstance(logits, torch.Tensor) else first_tensor(out)
            if t is None:
                raise VisualizeError("the model's output holds no tensor")
            return t
        try:
            self.model(x)
        except _Reached:
            pass
        if self.taken is None:
            raise VisualizeError(f"layer {self.layer!r} did not run in the model's forward")
        if not self.taken.is_floating_point():
            raise VisualizeError(f"layer {self.layer!r} outputs {self.taken.dtype}, not floats")
        return self.taken

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


#: Steps an image takes the redirected gradient at every ReLU once its gradient was exactly
#: zero. Once per image: after them the plain gradient (and Adam's momentum) carries on
#: (more steps, or redirecting whenever the gradient is zero, keep images from settling).
_REDIRECT_STEPS = 4


def next_stuck(grad: torch.Tensor | None, left: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Which images take the redirected gradient next step, and the countdown (no host sync).

    ``left`` per image: 0 never redirected, ``n > 0`` steps of redirection left, -1 done.
    """
    if grad is None:
        return left > 0, left
    zero = grad.reshape(grad.shape[0], -1).ne(0).any(1).logical_not()
    counted = torch.where(left > 0, left - 1, left)
    counted = torch.where((left > 0) & (counted == 0), -1, counted)  # its steps are over
    counted = torch.where(zero & (left == 0), _REDIRECT_STEPS, counted)
    return counted > 0, counted


def probe_input(
    runner: LayerRunner,
    feed: Callable[[torch.Tensor], torch.Tensor],
    settings: VisualizeSettings,
    known_size: tuple[int, int] | None,
    device: torch.device,
) -> tuple[tuple[int, int] | None, torch.Tensor]:
    """One grey image through the model, without gradients: the input size to use (None: the
    padded image, ``settings.input_size`` when given, else the known size when the padded
    image does not run) and what the objective would read."""
    pad = 12 if settings.transforms == "standard" else 0
    canvas = (settings.size[0] + 2 * pad, settings.size[1] + 2 * pad)
    asked = settings.input_size
    tries: list[tuple[int, int] | None] = [tuple(asked)] if asked else [None]
    if not asked and known_size is not None and tuple(known_size) != canvas:
        tries.append(tuple(known_size))
    error: Exception | None = None
    for size in tries:
        shape = size if size is not None else canvas
        x = torch.full((1, 3, *shape), 0.5, device=device)
        try:
            with torch.no_grad():
                return size, runner(feed(x))
        except VisualizeError:
            raise
        except Exception as exc:  # the model's own complaint about the size, usually
            error = exc
    hint = "; pass input_size=(H, W)" if known_size is None and not asked else ""
    raise VisualizeError(
        f"the model did not run on a {tries[-1] or canvas} RGB image "
        f"({type(error).__name__}: {error}){hint}"
    ) from error
