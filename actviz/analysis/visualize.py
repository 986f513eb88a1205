"""Feature visualisation: the image a channel wants to see, by activation maximisation.

``actviz.visualize(model, "layer3", range(8))`` optimises one image per channel so that the
channel's mean activation is as high as it can make it, the way Olah et al. describe it
("Feature Visualization", Distill 2017): a Fourier parameterisation with 1/f scaling,
decorrelated colour and robustness transforms (pad, jitter, random scale, random rotation),
fed through the model's own normalisation. See :mod:`actviz.analysis.visualize_image` for the
image side. Where a channel is silent on the starting grey image, Lucid's redirected ReLU
gradient gets the picture started (:class:`_RedirectedReLU`); Lucent has none and leaves such
channels grey.

Where the speed comes from (against Lucent's ``render_vis`` with the same settings):

* the forward stops at the layer: a hook takes the activation and raises, so later layers
  never run (unless the objective is a class logit);
* the model's parameters are switched to ``requires_grad=False`` for the run, so the backward
  pass computes the image's gradient only (no weight gradients, none of their buffers);
* hooks on the layer (and the ``nn.ReLU`` modules), not on every module;
* the transforms of all samples are one affine resampling per step, drawn up front;
* several channels run as one batch (one image per channel), each from its own seed, so a
  channel's picture does not depend on which others share its batch.

The model is left exactly as found (training flags, buffers, ``requires_grad``, ``.grad``,
hooks), after success, cancel and error alike (:class:`~actviz.core.guards.ModelState`).
Nothing here imports Qt; a window calls :func:`visualize` from a worker thread with
``progress`` and ``should_stop``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.analysis.visualize_image import ImageParam, RobustTransforms, sample_seed
from actviz.core.capture import resolve_layers
from actviz.core.edit_kinds import channel_dim
from actviz.core.guards import ModelState
from actviz.core.records import INFERENCE_WEIGHTS_WARNING, CaptureCancelled
from actviz.core.structures import first_tensor
from actviz.io.errors import ActvizError

__all__ = [
    "OBJECTIVES",
    "Visualization",
    "VisualizeError",
    "layer_channels",
    "merge_visualizations",
    "visualize",
    "visualize_settings",
]

#: Objectives by name: a channel's mean activation, its centre neuron, the layer's mean square
#: (DeepDream). A class logit is ``target=``, a direction a tensor, anything else a callable.
OBJECTIVES = ("channel", "neuron", "layer")


class VisualizeError(ActvizError, ValueError):
    """The model, layer, channels or settings cannot be visualised (the message says why).

    An :class:`~actviz.io.errors.ActvizError`, so a window shows the message as it is (not
    prefixed with the class name), and a ``ValueError`` for scripts."""


@dataclass(frozen=True)
class Visualization:
    """The result of :func:`visualize`: one image per sample (a channel, usually).

    Attributes
    ----------
    layer
        The layer optimised ("" for a class logit of the model's output).
    channels
        The sample keys: channel indices (class indices for ``target=``), or ``0..K-1`` for
        objectives without channels.
    images
        ``(K, 3, H, W)`` float32 in [0, 1], read-only.
    objective
        ``(steps, K)`` float64: each image's objective at each step (on the transformed image
        that step fed the model), read-only.
    activations
        ``(K,)`` float64: the objective of each final image fed as it is (no transforms).
    settings
        Everything that made the images (JSON-able): objective, steps, size, param,
        decorrelate, transforms, lr, seed, normalisation, input size...
    elapsed_s
        Wall time of the call.
    from_cache
        Per sample, whether it was read from the cache rather than computed.
    """

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
        """The position of ``channel`` in :attr:`channels`."""
        return self.channels.index(int(channel))

    def select(self, channels: Iterable[int]) -> Visualization:
        """The same visualisation with only ``channels``, in that order (each must be in
        :attr:`channels`)."""
        rows = [self.index(c) for c in channels]
        if rows == list(range(len(self.channels))):
            return self
        return Visualization(
            layer=self.layer,
            channels=tuple(self.channels[r] for r in rows),
            images=_frozen(self.images[rows]),
            objective=_frozen(self.objective[:, rows]),
            activations=_frozen(self.activations[rows]),
            settings=self.settings,
            elapsed_s=self.elapsed_s,
            from_cache=tuple(self.from_cache[r] for r in rows) if self.from_cache else (),
        )


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


class _Reached(Exception):
    """Raised from the layer's hook once its output is taken: the rest of the forward is
    not needed."""


# --------------------------------------------------------------------------------------------
# What the model expects
# --------------------------------------------------------------------------------------------


def _unwrap(model: Any) -> tuple[nn.Module, Any]:
    """``(module, loaded)`` from an ``nn.Module`` or a :class:`~actviz.io.models.LoadedModel`."""
    if isinstance(model, nn.Module):
        return model, None
    inner = getattr(model, "model", None)
    if isinstance(inner, nn.Module):
        return inner, model
    raise VisualizeError(
        f"expected a torch.nn.Module or an opened model, not {type(model).__name__}"
    )


def _normalisation(
    loaded: Any, mean: Sequence[float] | None, std: Sequence[float] | None
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The mean/std the model's preprocessing applies, as the input pipeline reads it
    (:func:`actviz.io.input_files.open_input` undoes the same attributes for overlays)."""
    if mean is not None or std is not None:
        if mean is None or std is None:
            raise VisualizeError("give both mean= and std= (or neither)")
        return tuple(float(v) for v in mean), tuple(float(v) for v in std)
    transforms = getattr(loaded, "transforms", None) if loaded is not None else None
    m, s = getattr(transforms, "mean", None), getattr(transforms, "std", None)
    if m is not None and s is not None and len(m) == 3 and len(s) == 3:
        return tuple(float(v) for v in m), tuple(float(v) for v in s)
    return None  # the window feeds such a model [0, 1] images as they are; so do we


def _fixed_size(model: nn.Module, loaded: Any) -> tuple[int, int] | None:
    """The input size a model is known to need: the opened model's, a timm patch embedding's,
    timm's config, a Hugging Face config's ``image_size``."""
    size = getattr(loaded, "input_size", None) if loaded is not None else None
    if size is None:
        size = getattr(getattr(model, "patch_embed", None), "img_size", None)
    if isinstance(size, Sequence) and len(size) == 2:
        return (int(size[0]), int(size[1]))
    cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None)
    if isinstance(cfg, Mapping) and isinstance(cfg.get("input_size"), Sequence):
        shape = cfg["input_size"]
        if len(shape) == 3:
            return (int(shape[1]), int(shape[2]))
    image_size = getattr(getattr(model, "config", None), "image_size", None)
    if isinstance(image_size, int):
        return (image_size, image_size)
    if isinstance(image_size, Sequence) and len(image_size) == 2:
        return (int(image_size[0]), int(image_size[1]))
    return None


def _check_image_model(model: nn.Module, loaded: Any) -> tuple[torch.device, torch.dtype]:
    """Refuse what cannot take an RGB float image; the device and dtype to feed it."""
    from actviz.io.input_files import expected_input

    if loaded is not None and getattr(loaded, "tokenizer", None) is not None:
        if getattr(loaded, "processor", None) is None:
            raise VisualizeError(
                f"{loaded.name} reads text (it has a tokenizer and no image processor); "
                "feature visualisation optimises an input image"
            )
    exp = expected_input(model)
    if exp.channels is None:
        # No convolution to read the input from, and an embedding table: token ids go in
        # (a text model shown without its tokenizer). Its forward would fail on any image,
        # and the probe's "pass input_size" hint would send the user after the wrong fix.
        for name, module in model.named_modules():
            if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
                raise VisualizeError(
                    f"the model's {name or '(model)'} ({type(module).__name__}) reads token "
                    "ids, not images; feature visualisation optimises an input image, so it "
                    "needs a model that takes (N, 3, H, W) images"
                )
    if exp.spatial_dims is not None and exp.spatial_dims != 2:
        raise VisualizeError(
            f"the model's {exp.layer} takes {exp.spatial_dims}-D signals, not images; "
            "feature visualisation optimises a 2-D RGB image"
        )
    if exp.channels is not None and exp.channels != 3:
        raise VisualizeError(
            f"the model's {exp.layer} takes {exp.channels} input channels; feature "
            "visualisation optimises a 3-channel RGB image"
        )
    if not exp.dtype.is_floating_point:
        raise VisualizeError(f"the model's parameters are {exp.dtype}; an image input is float")
    if any(p.is_inference() for p in model.parameters()):
        raise VisualizeError(INFERENCE_WEIGHTS_WARNING.replace("no gradients", "no pictures"))
    return exp.device, exp.dtype


# --------------------------------------------------------------------------------------------
# Objectives
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Objective:
    """``fn(output, keys) -> (N,)`` values to maximise; ``name`` for settings and the cache
    (None: not cacheable, a callable)."""

    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    name: str | None
    has_channels: bool
    needs_output: bool  # a class logit: the whole forward runs


def _channels_first(act: torch.Tensor, module: nn.Module | None) -> torch.Tensor:
    """``act`` with its channel dimension at 1 (token layers keep channels last)."""
    if act.dim() < 2:
        raise VisualizeError(f"the layer's output has shape {tuple(act.shape)}: no channels")
    dim = channel_dim(module, act.dim())
    return act if dim == 1 else act.movedim(dim, 1)


def _make_objective(
    objective: Any, target: Any, module: nn.Module | None, negative: bool
) -> _Objective:
    sign = -1.0 if negative else 1.0

    def per_sample(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape[0], -1).mean(1)

    if target is not None:

        def logit(out: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            if out.dim() != 2:
                raise VisualizeError(
                    f"target= needs (N, classes) logits; the model returned {tuple(out.shape)}"
                )
            return sign * out.gather(1, keys[:, None])[:, 0]

        return _Objective(logit, "-logit" if negative else "logit", True, True)
    if isinstance(objective, (torch.Tensor, np.ndarray)):
        vec = torch.as_tensor(np.asarray(objective, dtype=np.float32))
        if vec.dim() not in (1, 2):
            raise VisualizeError(f"a direction is (C,) or (K, C), not {tuple(vec.shape)}")
        digest = _digest(vec)

        def direction(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            a = _channels_first(act, module)
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

        name = f"direction:{digest}"
        return _Objective(direction, ("-" if negative else "") + name, False, False)
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

        return _Objective(custom, None, False, False)
    if objective == "channel":

        def channel(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            a = _channels_first(act, module)
            a = a.reshape(a.shape[0], a.shape[1], -1)
            return sign * a.gather(1, keys[:, None, None].expand(-1, 1, a.shape[2])).mean((1, 2))

        return _Objective(channel, ("-" if negative else "") + "channel", True, False)
    if objective == "neuron":

        def neuron(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            a = _channels_first(act, module)
            centre = tuple(n // 2 for n in a.shape[2:])
            a = a[(slice(None), slice(None), *centre)]
            return sign * a.gather(1, keys[:, None])[:, 0]

        return _Objective(neuron, ("-" if negative else "") + "neuron", True, False)
    if objective == "layer":

        def layer(act: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            return sign * per_sample(act.pow(2))

        return _Objective(layer, ("-" if negative else "") + "layer", False, False)
    raise VisualizeError(
        f"objective must be one of {', '.join(map(repr, OBJECTIVES))}, a direction tensor or a "
        f"callable of the layer output, not {objective!r}"
    )


def _digest(t: torch.Tensor) -> str:
    import hashlib

    data = t.detach().cpu().contiguous().to(torch.float32).numpy().tobytes()
    return hashlib.sha1(data + str(tuple(t.shape)).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Running the model to the layer
# --------------------------------------------------------------------------------------------


class _RedirectedReLU(torch.autograd.Function):
    """ReLU whose gradient is not lost where units are off (Lucid's ``redirected_relu_grad``).

    Forward: ``max(x, 0)``, the value the module computed. Backward, per image: the plain ReLU
    gradient if any of it got through, else the gradient passed where it would turn off units
    on (Lucid's rule). Images in ``stuck`` (whose previous step's gradient was exactly zero)
    get the redirected gradient at every ReLU: a channel that answers only to the padding's
    edge (not part of the image) gives the image no gradient at all, although some of it gets
    through each ReLU, and would stay grey. Plain activation maximisation (Lucent's) stays
    stuck in both cases.
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


class _LayerRunner:
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


# --------------------------------------------------------------------------------------------
# The API
# --------------------------------------------------------------------------------------------


def visualize_settings(
    *,
    objective: Any = "channel",
    steps: int = 256,
    size: int | tuple[int, int] = 128,
    param: str = "fourier",
    decorrelate: bool = True,
    transforms: str = "standard",
    lr: float = 0.05,
    seed: int = 0,
    negative: bool = False,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    input_size: tuple[int, int] | None = None,
    redirect_relu: bool = True,
) -> dict[str, Any]:
    """The settings dict :attr:`Visualization.settings` holds for these arguments (before the
    model's normalisation and input size are filled in); checks their values.

    Raises
    ------
    VisualizeError
        A value out of range.
    """
    if int(steps) < 1:
        raise VisualizeError(f"steps must be at least 1, not {steps}")
    hw = (int(size), int(size)) if isinstance(size, (int, np.integer)) else tuple(map(int, size))
    if len(hw) != 2 or min(hw) < 8:
        raise VisualizeError(f"size must be at least 8 pixels, not {size}")
    if not float(lr) > 0:
        raise VisualizeError(f"lr must be positive, not {lr}")
    name = objective if isinstance(objective, str) else None
    return {
        "objective": name,
        "steps": int(steps),
        "size": list(hw),
        "param": str(param),
        "decorrelate": bool(decorrelate),
        "transforms": str(transforms),
        "lr": float(lr),
        "seed": int(seed),
        "negative": bool(negative),
        "mean": list(mean) if mean is not None else None,
        "std": list(std) if std is not None else None,
        "input_size": list(input_size) if input_size is not None else None,
        "redirect_relu": bool(redirect_relu),
    }


def visualize(
    model: Any,
    layer: str | None,
    channels: int | Iterable[int] | None = None,
    *,
    objective: Any = "channel",
    steps: int = 256,
    size: int | tuple[int, int] = 128,
    batch: int | None = None,
    param: str = "fourier",
    decorrelate: bool = True,
    transforms: str = "standard",
    lr: float = 0.05,
    seed: int = 0,
    target: int | Sequence[int] | None = None,
    negative: bool = False,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    input_size: tuple[int, int] | None = None,
    redirect_relu: bool = True,
    cache: bool = False,
    only_cached: bool = False,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Visualization:
    """Synthesise the image each channel of ``layer`` responds to most (activation maximisation).

    Parameters
    ----------
    model
        A ``torch.nn.Module`` taking ``(N, 3, H, W)`` float images, or an opened model
        (:func:`actviz.io.models.open_model`), whose preprocessing's mean/std and input size
        are then used.
    layer
        Qualified module name (``model.named_modules()``); None or "" with ``target=``.
    channels
        The channels to visualise, one image each (an int is one channel). For objectives
        without channels (``"layer"``, a callable, one direction) the values only key the
        samples' seeds: ``range(4)`` gives four pictures from four starts. None: ``[0]``.
        With ``target=`` they are replaced by the target classes.
    objective
        ``"channel"`` (the channel's mean activation), ``"neuron"`` (its centre position),
        ``"layer"`` (the layer's mean square, DeepDream), a direction tensor ``(C,)`` (dot
        product with the channel vector at every position, averaged) or ``(K, C)`` (one
        direction per channel key), or a callable ``f(layer_output) -> (N,)`` or scalar.
        Token layers ``(N, T, D)`` have their channels last.
    steps
        Optimisation steps.
    size
        Side (or ``(h, w)``) of the images.
    batch
        Images per forward pass; the channels run in chunks of this many. None: all at once.
    param
        ``"fourier"`` (1/f-scaled spectrum) or ``"pixel"``.
    decorrelate
        Decorrelated colour (ImageNet's colour covariance).
    transforms
        ``"standard"`` (pad 12, jitter 8, scale 0.9-1.1, rotation +-10 deg, jitter 4) or
        ``"none"``.
    lr
        Adam's learning rate.
    seed
        The run's seed; each sample's seed comes from it and the sample's key, so a channel
        gives the same image alone or batched, and the same seed gives the same image bit for
        bit (same device and thread count).
    target
        A class index (or several): maximise that logit of the model's output instead.
    negative
        Minimise the objective instead (what the channel responds to least).
    mean, std
        The normalisation to apply to the image; by default the opened model's preprocessing
        (none for a bare module, as the window feeds it).
    input_size
        ``(H, W)`` the model must be fed (vision transformers); by default the opened model's
        or its config's when the image with its padding does not run.
    redirect_relu
        Let the gradient through ``nn.ReLU`` modules where a whole image is off (Lucid's
        redirected ReLU gradient; the forward values are unchanged), so channels that are
        silent on the starting grey image still get a picture.
    cache
        Read and write results in the user's cache folder, keyed by the weights' content,
        layer, channel and settings (:mod:`actviz.analysis.visualize_cache`); only channels
        not found there are computed.
    only_cached
        With ``cache``: return at once with only the channels the cache holds (possibly
        none), computing nothing; a window shows those while it computes the rest.
    progress
        ``progress(done, total)`` after each step, on the calling thread.
    should_stop
        Polled before each step; True raises :class:`~actviz.core.records.CaptureCancelled`.

    Returns
    -------
    Visualization

    Raises
    ------
    VisualizeError
        Not an image model, an unknown layer, a channel out of range, a bad setting.
    CaptureCancelled
        ``should_stop()`` turned True.
    """
    t0 = time.perf_counter()
    net, loaded = _unwrap(model)
    settings = visualize_settings(
        objective=objective,
        steps=steps,
        size=size,
        param=param,
        decorrelate=decorrelate,
        transforms=transforms,
        lr=lr,
        seed=seed,
        negative=negative,
        mean=mean,
        std=std,
        input_size=input_size,
        redirect_relu=redirect_relu,
    )
    device, dtype = _check_image_model(net, loaded)
    if target is not None:
        if layer:
            raise VisualizeError("target= maximises a logit of the model's output: give layer=None")
        keys = [int(target)] if isinstance(target, (int, np.integer)) else [int(t) for t in target]
        layer = ""
        module = None
    else:
        if not layer:
            raise VisualizeError("give a layer to visualise (or target= for a class logit)")
        try:
            (layer,) = resolve_layers(net, [layer])
        except ValueError as exc:
            raise VisualizeError(str(exc)) from None
        module = dict(net.named_modules())[layer]
        if channels is None:
            keys = [0]
        elif isinstance(channels, (int, np.integer)):
            keys = [int(channels)]
        else:
            keys = [int(c) for c in channels]
    if not keys:
        raise VisualizeError("no channels to visualise")
    if len(set(keys)) != len(keys):
        raise VisualizeError("channels repeat; each channel gives one image")
    obj = _make_objective(objective, target, module, negative)
    settings["objective"] = obj.name
    if transforms not in ("standard", "none"):
        raise VisualizeError(f"transforms must be 'standard' or 'none', not {transforms!r}")
    if param not in ("fourier", "pixel"):
        raise VisualizeError(f"param must be 'fourier' or 'pixel', not {param!r}")
    norm = _normalisation(loaded, mean, std)
    settings["mean"], settings["std"] = (list(norm[0]), list(norm[1])) if norm else (None, None)
    # Objectives without channels (and one direction) repeat the same objective per key.
    if batch is not None and int(batch) < 1:
        raise VisualizeError(f"batch must be at least 1 image per pass, not {batch}")
    chunk = len(keys) if batch is None else int(batch)

    store = None
    found: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    if only_cached and not cache:
        raise VisualizeError("only_cached=True needs cache=True")
    if cache and obj.name is not None:
        from actviz.analysis.visualize_cache import VisualizationCache

        store = VisualizationCache.for_model(net, layer, settings)
        for k in keys:
            hit = store.get(k)
            if hit is not None:
                found[k] = hit
    todo = [k for k in keys if k not in found]
    if only_cached:
        keys, todo = [k for k in keys if k in found], []

    computed: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    if todo:
        # A caller inside inference_mode (a window worker may be) still gets gradients, and
        # every tensor made here is a normal one.
        with torch.inference_mode(False):
            computed, fed = _optimise(
                net,
                module,
                layer,
                todo,
                obj,
                settings,
                norm,
                _fixed_size(net, loaded),
                chunk,
                bool(settings["redirect_relu"]),
                device,
                dtype,
                progress,
                should_stop,
            )
        settings["input_size"] = list(fed) if fed is not None else None
        if store is not None:
            for k, value in computed.items():
                store.put(k, *value, input_size=fed)
    elif found:
        settings["input_size"] = store.input_size if store is not None else None
    rows = [found[k] if k in found else computed[k] for k in keys]
    hw = settings["size"]
    return Visualization(
        layer=layer,
        channels=tuple(keys),
        images=_frozen(
            np.stack([r[0] for r in rows]).astype(np.float32)
            if rows
            else np.zeros((0, 3, *hw), np.float32)
        ),
        objective=_frozen(
            np.stack([r[1] for r in rows], axis=1).astype(np.float64)
            if rows
            else np.zeros((settings["steps"], 0))
        ),
        activations=_frozen(np.array([r[2] for r in rows], dtype=np.float64)),
        settings=MappingProxyType(settings),
        elapsed_s=time.perf_counter() - t0,
        from_cache=tuple(k in found for k in keys),
    )


def merge_visualizations(parts: Sequence[Visualization]) -> Visualization:
    """One :class:`Visualization` of several of the same layer and settings (a page of
    channels computed chunk by chunk, some read from the cache), in the order given.

    Raises
    ------
    VisualizeError
        No parts, another layer or other settings, or a channel given twice.
    """
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
    return Visualization(
        layer=first.layer,
        channels=channels,
        images=_frozen(np.concatenate([p.images for p in parts])),
        objective=_frozen(np.concatenate([p.objective for p in parts], axis=1)),
        activations=_frozen(np.concatenate([p.activations for p in parts])),
        settings=first.settings,
        elapsed_s=sum(p.elapsed_s for p in parts),
        from_cache=tuple(f for p in parts for f in p.from_cache),
    )


def layer_channels(
    model: Any, layer: str, *, size: int = 128, input_size: tuple[int, int] | None = None
) -> int:
    """How many channels ``layer`` has (what :func:`visualize` can be asked for): one grey
    image fed to the layer, the forward stopped there, the model left as found.

    Raises
    ------
    VisualizeError
        As :func:`visualize` does for the model and layer.
    """
    net, loaded = _unwrap(model)
    device, dtype = _check_image_model(net, loaded)
    try:
        (layer,) = resolve_layers(net, [layer])
    except ValueError as exc:
        raise VisualizeError(str(exc)) from None
    module = dict(net.named_modules())[layer]
    settings = visualize_settings(size=size, input_size=input_size)
    state = ModelState(net, out_of_place=False)
    runner = _LayerRunner(net, module, layer, redirect=False)
    try:
        state.apply(train=False)
        hw = (settings["size"][0], settings["size"][1])
        _, out = _probe(
            runner, lambda x: x.to(dtype), hw, settings, _fixed_size(net, loaded), device
        )
    finally:
        runner.close()
        state.restore()
    return int(_channels_first(out, module).shape[1])


def _optimise(
    net: nn.Module,
    module: nn.Module | None,
    layer: str,
    keys: list[int],
    obj: _Objective,
    settings: dict[str, Any],
    norm: tuple[tuple[float, ...], tuple[float, ...]] | None,
    known_size: tuple[int, int] | None,
    chunk: int,
    redirect: bool,
    device: torch.device,
    dtype: torch.dtype,
    progress: Callable[[int, int], None] | None,
    should_stop: Callable[[], bool] | None,
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray, float]], tuple[int, int] | None]:
    """Run the optimisation of ``keys`` in chunks; per key ``(image, curve, activation)``."""
    steps = int(settings["steps"])
    hw = (int(settings["size"][0]), int(settings["size"][1]))
    seed = int(settings["seed"])
    if norm is not None:
        mean_t = torch.tensor(norm[0], device=device).view(1, 3, 1, 1)
        inv_std = 1.0 / torch.tensor(norm[1], device=device).view(1, 3, 1, 1)
    n_chunks = -(-len(keys) // chunk)
    total = steps * n_chunks
    done = 0

    def feed(x: torch.Tensor) -> torch.Tensor:
        if norm is not None:
            x = (x - mean_t) * inv_std
        return x.to(dtype)

    results: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    # In-place modules run out of place: a redirected ReLU reads its input, which an in-place
    # ReLU would have overwritten.
    state = ModelState(net, out_of_place=redirect)
    flags = [(p, p.requires_grad) for p in net.parameters()]
    runner: _LayerRunner | None = None
    try:
        state.apply(train=False)
        for p, _ in flags:
            p.requires_grad_(False)
        runner = _LayerRunner(net, module, layer, redirect)
        with torch.enable_grad():  # also when the caller is inside no_grad
            fed, out = _probe(runner, feed, hw, settings, known_size, device)
            _check_keys(out, keys, obj, module, layer)
            for start in range(0, len(keys), chunk):
                part = keys[start : start + chunk]
                seeds = [sample_seed(seed, k) for k in part]
                key_t = torch.tensor(part, device=device)
                image = ImageParam(seeds, hw, settings["param"], settings["decorrelate"], device)
                robust = RobustTransforms(
                    seeds, steps, hw, fed, settings["transforms"], device=device
                )
                optimizer = torch.optim.Adam([image.tensor], lr=float(settings["lr"]))
                runner.stuck = None
                left = torch.zeros(len(part), dtype=torch.int64, device=device)
                curve = torch.empty(steps, len(part), dtype=torch.float64, device=device)
                for i in range(steps):
                    if should_stop is not None and should_stop():
                        raise CaptureCancelled("feature visualisation cancelled")
                    optimizer.zero_grad(set_to_none=True)
                    values = obj.fn(runner(feed(robust(image.images(), i))), key_t)
                    (-values.sum()).backward()
                    if redirect:
                        runner.stuck, left = _stuck(image.tensor.grad, left)
                    optimizer.step()
                    curve[i] = values.detach()
                    done += 1
                    if progress is not None:
                        progress(done, total)
                with torch.no_grad():
                    final = image.images()
                    x = final
                    if fed is not None and tuple(fed) != hw:
                        x = torch.nn.functional.interpolate(
                            x, size=tuple(fed), mode="bilinear", align_corners=False
                        )
                    act = obj.fn(runner(feed(x)), key_t)
                images = final.detach().float().cpu().numpy()
                curves = curve.cpu().numpy()
                acts = act.double().cpu().numpy()
                for j, k in enumerate(part):
                    results[k] = (images[j], curves[:, j].copy(), float(acts[j]))
    finally:
        if runner is not None:
            runner.close()
        for p, flag in flags:
            if p.requires_grad != flag:
                p.requires_grad_(flag)
        state.restore()
    return results, fed


#: Steps an image takes the redirected gradient at every ReLU once its gradient was exactly
#: zero. Once per image: after them the plain gradient (and Adam's momentum) carries on.
#: On the demo's silent channels 4 started every one within ~15 steps; 16 (the span
#: torchbearer's port uses) took twice as long, and redirecting again whenever the gradient
#: was zero kept images from settling.
_REDIRECT_STEPS = 4


def _stuck(grad: torch.Tensor | None, left: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


def _probe(
    runner: _LayerRunner,
    feed: Callable[[torch.Tensor], torch.Tensor],
    hw: tuple[int, int],
    settings: dict[str, Any],
    known_size: tuple[int, int] | None,
    device: torch.device,
) -> tuple[tuple[int, int] | None, torch.Tensor]:
    """One grey image through the model, without gradients: the input size to use (None: the
    padded image, ``settings["input_size"]`` when given, else the known size when the padded
    image does not run) and what the objective would read."""
    pad = 12 if settings["transforms"] == "standard" else 0
    canvas = (hw[0] + 2 * pad, hw[1] + 2 * pad)
    asked = settings["input_size"]
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


def _check_keys(
    out: torch.Tensor, keys: list[int], obj: _Objective, module: nn.Module | None, layer: str
) -> None:
    if not obj.has_channels:
        return
    if module is None:
        count, what = out.shape[-1], "classes"
    else:
        count, what = _channels_first(out, module).shape[1], "channels"
    bad = [k for k in keys if not 0 <= k < count]
    if bad:
        where = f"layer {layer!r}" if module is not None else "the model's output"
        # Every key named (as ranges, so 0-200 stays short) and the range there is.
        asked = "is" if len(bad) == 1 else f"{len(bad)} asked for are"
        raise VisualizeError(
            f"{where} has {count} {what} (0-{count - 1}); {asked} out of range: {_ranges(bad)}"
        )


def _ranges(keys: Sequence[int]) -> str:
    """``[64, 65, 66, 70]`` -> ``"64-66,70"`` (the CLI's ``--channels`` form)."""
    runs: list[list[int]] = []
    for k in sorted(keys):
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)
