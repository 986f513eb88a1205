"""Exact channel effects in batches: one forward pass of the repeated input measures up to
``batch`` channels, sample ``i``'s set to the baseline. For one sample the modules before the
first edit run once and broadcast; if that fails, later batches repeat the whole input."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from actviz.analysis.effects.effect_results import Baseline
from actviz.core.capture import model_device
from actviz.core.edit_kinds import EditHooks, channel_dim
from actviz.core.guards import ModelState
from actviz.core.input_copies import call_arguments, forward_takes_list, one_list_argument
from actviz.core.records import CaptureCancelled
from actviz.core.structures import first_tensor, iter_tensors, map_tensors, replace_first
from actviz.core.targets import resolve_target

log = logging.getLogger(__name__)


class TargetReader:
    """The target of each sample of a batched output, with the clean run's choices kept: an int
    or default target is linear in the output once chosen; a callable is called per sample."""

    def __init__(self, clean: Any, target: Any) -> None:
        self.target, self.clean = target, clean
        self.callable = callable(target) and not isinstance(target, (int, torch.Tensor))
        self.weights: list[torch.Tensor | None] = []
        if not self.callable:
            # Under a caller's inference_mode the weights are read outside it, as under no_grad.
            with torch.inference_mode(False), torch.enable_grad():
                made = [
                    t.detach().clone().requires_grad_(True) if t.is_floating_point() else t.detach()
                    for t in iter_tensors(clean)
                ]
                it = iter(made)
                rebuilt = map_tensors(clean, lambda _t: next(it))
                value = resolve_target(rebuilt, target).value
                wanted = [t for t in made if t.requires_grad]
                grads = iter(torch.autograd.grad(value, wanted, allow_unused=True))
            for t in made:
                g = next(grads) if t.requires_grad else None
                self.weights.append(None if g is None else g.detach().to(torch.float64))

    def clean_value(self, captured: float) -> float:
        """The target of the clean output, read as :meth:`values` reads each sample; a callable
        target gets ``captured``, its value on the model's own output object."""
        return float(captured) if self.callable else float(self.values(self.clean, 1)[0])

    def values(self, output: Any, b: int) -> list[float]:
        """The target of each of the ``b`` samples stacked along dimension 0 of ``output``."""
        if self.callable:
            if b == 1:
                return [float(_scalar(self.target(output)))]
            return [float(_scalar(self.target(_rows(output, i, b)))) for i in range(b)]
        leaves = list(iter_tensors(output))
        if len(leaves) != len(self.weights):
            raise ValueError(
                f"the model output changed structure ({len(leaves)} tensors, the clean run had "
                f"{len(self.weights)}): exact effects need an output of fixed shape (a "
                "detector's detections are not); pass a callable target"
            )
        total = torch.zeros(b, dtype=torch.float64)
        for t, w in zip(leaves, self.weights, strict=True):
            if w is None:
                continue
            want = (b * w.shape[0], *w.shape[1:]) if w.ndim else ()
            if tuple(t.shape) != want or (w.ndim == 0 and b != 1):
                raise ValueError(
                    f"a batch of {b} gave an output of shape {tuple(t.shape)}, the clean run "
                    f"{tuple(w.shape)}: exact effects need the batch in dimension 0 of the "
                    "output (pass batch=1 otherwise)"
                )
            part = t.detach().to(torch.float64).reshape(b, *w.shape) * w.to(t.device)
            total += part.reshape(b, -1).sum(dim=1).cpu()
        return [float(v) for v in total]


def _scalar(value: Any) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise ValueError("a callable target must return a tensor with one element")
    return value.detach().reshape(())


def _rows(obj: Any, i: int, b: int) -> Any:
    """Sample ``i``'s rows of every tensor in ``obj`` (containers' types kept)."""

    def rows(t: torch.Tensor) -> torch.Tensor:
        n = t.shape[0] // b if t.ndim else 0
        if t.ndim == 0 or t.shape[0] != n * b:
            raise ValueError(
                f"an output tensor of shape {tuple(t.shape)} does not hold a batch of {b} in "
                "dimension 0 (pass batch=1)"
            )
        return t[i * n : (i + 1) * n]

    return map_tensors(obj, rows)


def repeat_inputs(inputs: Any, b: int, model: nn.Module) -> tuple[tuple, dict]:
    """``inputs`` repeated ``b`` times along dimension 0, always as new tensors (a model that
    writes into its input never reaches the caller's); a list argument stays a list."""
    device = model_device(model)

    def rep(t: torch.Tensor) -> torch.Tensor:
        t = t.detach()
        if device is not None and t.device != device:
            t = t.to(device)
        return t.clone() if t.ndim == 0 else t.repeat(b, *([1] * (t.ndim - 1)))

    if isinstance(inputs, list) and one_list_argument(inputs, model):
        images = [v.detach().to(device or v.device) for v in inputs]
        return ([v.clone() for _ in range(b) for v in images],), {}
    return map_tensors(call_arguments(inputs, model), rep)


def one_sample(inputs: Any, model: nn.Module | None = None) -> bool:
    """Whether every input tensor holds one sample (dimension 0 of size 1): then a batch
    can share the modules before its first edit (see the module docstring). A list is one
    argument of images for ``model`` (any list, without a model)."""
    if isinstance(inputs, list) and (model is None or forward_takes_list(model)):
        return False
    tensors = list(iter_tensors(inputs))
    return bool(tensors) and all(t.ndim >= 1 and t.shape[0] == 1 for t in tensors)


class _SampleEdit:
    """The forward hook of one layer: sample ``i`` of the batch gets its channel replaced."""

    def __init__(self, layer: str, baseline: Baseline) -> None:
        self.layer, self.baseline = layer, baseline
        self.rows: list[tuple[int, int]] = []
        self.b, self.calls, self.expand = 1, 0, False
        self.masks: dict[tuple, torch.Tensor] = {}

    def arm(self, rows: list[tuple[int, int]], b: int, expand: bool) -> None:
        self.rows, self.b, self.calls, self.expand = rows, b, 0, expand
        self.masks.clear()

    def _mask(self, t: torch.Tensor, dim: int) -> torch.Tensor:
        key = (tuple(t.shape), dim, t.device)
        if (mask := self.masks.get(key)) is None:
            b = self.b
            n, size = t.shape[0] // b, t.shape[dim]
            flat = torch.zeros(b, n, size, dtype=torch.bool)
            for i, c in self.rows:
                if c >= size:
                    raise ValueError(
                        f"channel {c} of layer {self.layer!r} is out of range: its output "
                        f"{tuple(t.shape[1:])} per sample has {size} channels along dim {dim}"
                    )
                flat[i, :, c] = True
            shape = [1] * t.ndim
            shape[0], shape[dim] = b * n, size
            mask = self.masks[key] = flat.reshape(shape).to(t.device)
        return mask

    def hook(self, module: nn.Module, args: tuple, output: Any) -> Any:
        call = self.calls
        self.calls += 1
        t = first_tensor(output)
        if t is None or t.ndim < 2:
            got = None if t is None else tuple(t.shape)
            raise ValueError(f"layer {self.layer!r}: output {got} has no channel dimension")
        if self.expand and t.shape[0] == 1 and self.b > 1:
            # The first edited module of a shared-prefix batch: the one sample becomes b.
            t = t.repeat(self.b, *([1] * (t.ndim - 1)))
        if t.shape[0] % self.b:
            raise ValueError(
                f"layer {self.layer!r}: its output {tuple(t.shape)} does not hold the batch of "
                f"{self.b} repeated samples in dimension 0 (pass batch=1)"
            )
        dim = channel_dim(module, t)
        base = self.baseline.batched(self.layer, call, t, dim, self.b)
        return replace_first(output, torch.where(self._mask(t, dim), base, t))


def run_exact(
    model: nn.Module,
    inputs: Any,
    jobs: Sequence[tuple[str, int]],
    baseline: Baseline,
    reader: TargetReader,
    batch: int,
    edits: Mapping[str, tuple] | None,
    progress: Callable[[int, int], None] | None,
    should_stop: Callable[[], bool] | None,
) -> tuple[list[float], int, float]:
    """The target with each ``(layer, channel)`` of ``jobs`` set to the baseline, ``batch`` per
    pass (``edits``: the clean run's). Returns ``(values, forwards, seconds)``."""
    modules = dict(model.named_modules())
    hooks = {layer: _SampleEdit(layer, baseline) for layer, _ in jobs}
    state = ModelState(model, out_of_place=False, modules=list(modules.values()))
    start = time.perf_counter()

    def run(chunk: Sequence[tuple[str, int]], expand: bool) -> list[float]:
        b = len(chunk)
        rows: dict[str, list[tuple[int, int]]] = {}
        for i, (layer, channel) in enumerate(chunk):
            rows.setdefault(layer, []).append((i, channel))
        handles: list[Any] = []
        try:
            if edits:
                # Fresh per pass: an edit's call counter starts at 0 for each forward.
                handles.extend(EditHooks(modules, edits).register())
            for layer, layer_rows in rows.items():
                hooks[layer].arm(layer_rows, b, expand)
                handles.append(modules[layer].register_forward_hook(hooks[layer].hook))
            args, kwargs = repeat_inputs(inputs, 1 if expand else b, model)
            with torch.no_grad():
                output = model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        return reader.values(output, b)

    try:
        state.apply(train=False)
        share = one_sample(inputs, model)
        values, forwards = run_batches(jobs, batch, run, share, progress, should_stop, "exact")
    finally:
        state.restore()
        baseline.release()
    return values, forwards, time.perf_counter() - start


def run_batches(
    jobs: Sequence[Any],
    batch: int,
    run: Callable[[list[Any], bool], list[float]],
    share: bool,
    progress: Callable[[int, int], None] | None,
    should_stop: Callable[[], bool] | None,
    what: str,
) -> tuple[list[float], int]:
    """``run(chunk, expand)`` over ``jobs``, ``batch`` at a time; ``expand`` is tried while
    ``share`` holds, and after a failure the whole input is repeated."""
    values: list[float] = []
    forwards = 0
    batch = max(1, int(batch))
    for lo in range(0, len(jobs), batch):
        if should_stop is not None and should_stop():
            raise CaptureCancelled(f"{what} effects cancelled")
        chunk = list(jobs[lo : lo + batch])
        expand = share and len(chunk) > 1
        try:
            got = run(chunk, expand)
        except Exception as exc:  # noqa: BLE001 - retried below without the shared prefix
            if not expand:
                raise
            log.debug("shared prefix failed (%s); repeating the whole input", exc)
            share = False
            forwards += 1
            got = run(chunk, False)
        values.extend(got)
        forwards += 1
        if progress is not None:
            progress(len(values), len(jobs))
    return values, forwards
