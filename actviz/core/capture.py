"""Exact activations and gradients from any ``nn.Module``, leaving the model as it was found.

How it stays exact (each point is a trap other tools fall into):

* Values are snapshotted (cloned) when the hook fires, so a later ``ReLU(inplace=True)`` or
  ``out += identity`` cannot change them. A module input that is the very tensor (same object,
  same version counter) another hooked module produced reuses that snapshot instead of a copy.
* Gradients come from tensor hooks registered in the forward hooks plus one
  ``torch.autograd.grad`` call. Tensor hooks registered before an in-place modification receive
  the gradient of the value *before* it, which is what the record holds. Nothing is accumulated
  into ``.grad`` and ``register_full_backward_hook`` (which breaks on in-place ops, pytorch#61519)
  and the deprecated ``register_backward_hook`` (wrong grad_input) are never used.
* Each hooked module receives its tensor inputs through a fresh autograd node (a free view, or a
  clone for modules that modify their input in place), so ``grad_inputs`` is the gradient that
  flows through that module only, like ``register_full_backward_hook``'s grad_input.
* Every hook handle is removed in ``finally``; ``training`` flags and buffers are restored, so
  the model's ``state_dict()`` and hook dictionaries are untouched even when forward raises.
"""

from __future__ import annotations

import difflib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from actviz.core.structures import first_tensor, iter_tensors, map_tensors

log = logging.getLogger(__name__)

__all__ = [
    "Capture",
    "CaptureCancelled",
    "CaptureTooLarge",
    "LayerRecord",
    "capture",
    "leaf_names",
    "resolve_layers",
]

# Modules found (at run time) to modify their input in place although they have no
# ``inplace=True`` attribute; they get a cloned input next time. Weak, so models can be freed.
_DISCOVERED_INPLACE: weakref.WeakSet[nn.Module] = weakref.WeakSet()
# Modules whose recorded tensors were written to later in the forward (by an in-place ReLU,
# ``out += identity``...). Their values are copied when the hook fires; every other record
# keeps a reference, checked against the tensor's version counter after the forward pass.
_NEEDS_COPY: weakref.WeakSet[nn.Module] = weakref.WeakSet()
_MAX_ATTEMPTS = 3


class CaptureCancelled(RuntimeError):
    """Raised when ``should_stop()`` returned True during a capture."""


class CaptureTooLarge(RuntimeError):
    """Raised when the recorded tensors would exceed ``max_bytes``."""


@dataclass
class LayerRecord:
    """One call of one hooked module.

    All tensors are detached CPU tensors holding the values at the moment the module ran.

    Attributes
    ----------
    name
        Qualified name from ``named_modules()`` ("" is the model itself).
    call_index
        0 for the module's first call in the forward pass, 1 for the second, ...
    module_type
        Class name, e.g. ``"Conv2d"``.
    inputs
        Positional inputs (tensors; plain scalars kept; other objects become None).
    output
        The module's output: a tensor, or a tuple/list/dict mirrored with tensors snapshotted.
    grad_output
        d target / d output, same structure as ``output``; None without gradients.
    grad_inputs
        d target / d each positional input, through this module only; None entries where no
        gradient exists (non-float inputs, inputs that do not require grad).
    """

    name: str
    call_index: int
    module_type: str
    inputs: tuple = ()
    output: Any = None
    grad_output: Any = None
    grad_inputs: tuple | None = None

    @property
    def tensor(self) -> torch.Tensor | None:
        """The first tensor of :attr:`output` (what views display)."""
        return first_tensor(self.output)

    @property
    def grad(self) -> torch.Tensor | None:
        """The first tensor of :attr:`grad_output`."""
        return first_tensor(self.grad_output)

    def __repr__(self) -> str:
        t = self.tensor
        shape = tuple(t.shape) if t is not None else None
        return (
            f"LayerRecord({self.name!r}, call={self.call_index}, type={self.module_type}, "
            f"output={shape}, grad={'yes' if self.grad is not None else 'no'})"
        )


@dataclass
class Capture:
    """The result of :func:`capture`: per-layer records plus the model-level results."""

    names: list[str]
    records: dict[str, list[LayerRecord]]
    output: Any
    input_grads: Any
    target_value: float | None
    target_index: int | None
    target_description: str
    warnings: list[str]
    inputs: Any
    nbytes: int
    elapsed_s: float
    gradients: bool = True
    mode: str = "eval"
    extra: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> LayerRecord:
        try:
            return self.records[name][0]
        except KeyError:
            raise KeyError(f"layer {name!r} was not captured (captured: {self.names})") from None

    def __contains__(self, name: object) -> bool:
        return name in self.records

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def calls(self, name: str) -> list[LayerRecord]:
        """Every call of layer ``name`` in execution order (one record per call)."""
        if name not in self.records:
            raise KeyError(f"layer {name!r} was not captured (captured: {self.names})")
        return list(self.records[name])

    def all_records(self) -> list[LayerRecord]:
        """Every record of every layer, layers in execution order."""
        return [rec for name in self.names for rec in self.records[name]]


# --------------------------------------------------------------------------- layer names


def leaf_names(model: nn.Module) -> list[str]:
    """Qualified names of the modules without children (the root if it has none)."""
    return [name for name, mod in model.named_modules() if next(mod.children(), None) is None]


def resolve_layers(model: nn.Module, layers: Sequence[str] | str | None) -> list[str]:
    """Check ``layers`` against ``model.named_modules()``.

    Parameters
    ----------
    model
        The model.
    layers
        Qualified names; None means every leaf module.

    Returns
    -------
    list of str
        The names, deduplicated, in the order given.

    Raises
    ------
    ValueError
        For an unknown name, naming it and suggesting close matches.
    """
    if layers is None:
        return leaf_names(model)
    if isinstance(layers, str):
        layers = [layers]
    known = dict(model.named_modules())
    out: list[str] = []
    for name in layers:
        if name not in known:
            close = difflib.get_close_matches(name, [n for n in known if n], n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"unknown layer {name!r}{hint} (names come from model.named_modules(); "
                f"{type(model).__name__} has {len(known)} modules)"
            )
        if name not in out:
            out.append(name)
    return out


# --------------------------------------------------------------------------- inputs


@dataclass
class _Inputs:
    args: tuple
    kwargs: dict
    leaves: list[torch.Tensor]  # leaves whose gradient is the saliency, in structure order
    copies: Any  # the inputs as given (our own copies), same structure


def _prepare_inputs(inputs: Any, gradients: bool, device: torch.device | None) -> _Inputs:
    leaves: list[torch.Tensor] = []

    def convert(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if device is not None and t.device != device:
            t = t.to(device)
        # Our own copy: the caller's tensor is never modified nor given requires_grad.
        copy = t.detach().clone()
        if gradients and copy.is_floating_point():
            leaf = copy.requires_grad_(True)
            leaves.append(leaf)
            # The model gets a non-leaf clone so in-place ops on its input stay legal.
            return leaf.clone(), leaf
        leaves.append(None)  # type: ignore[arg-type]
        return copy.clone(), copy

    if isinstance(inputs, torch.Tensor):
        arg, copy = convert(inputs)
        return _Inputs((arg,), {}, leaves, copy.detach())
    if isinstance(inputs, (list, tuple)):
        pairs = [convert(t) if isinstance(t, torch.Tensor) else (t, t) for t in inputs]
        copies = tuple(c.detach() if isinstance(c, torch.Tensor) else c for _, c in pairs)
        return _Inputs(tuple(a for a, _ in pairs), {}, leaves, copies)
    if isinstance(inputs, Mapping):
        kw: dict[str, Any] = {}
        copies_d: dict[str, Any] = {}
        for key, value in inputs.items():
            if isinstance(value, torch.Tensor):
                kw[key], c = convert(value)
                copies_d[key] = c.detach()
            else:
                kw[key] = copies_d[key] = value
        return _Inputs((), kw, leaves, copies_d)
    raise TypeError(
        f"inputs must be a tensor, a tuple/list of tensors or a dict, not {type(inputs).__name__}"
    )


def _align_grads(copies: Any, grads: list[torch.Tensor | None]) -> Any:
    """Put the leaf gradients back into the structure the caller gave."""
    it = iter(grads)
    if isinstance(copies, torch.Tensor):
        return next(it)
    if isinstance(copies, tuple):
        return tuple(next(it) if isinstance(c, torch.Tensor) else None for c in copies)
    return {k: (next(it) if isinstance(v, torch.Tensor) else None) for k, v in copies.items()}


# --------------------------------------------------------------------------- target


def _resolve_target(output: Any, target: Any) -> tuple[torch.Tensor, int | None, str]:
    """Turn ``target`` into a scalar tensor to differentiate, its class index and a description."""
    if callable(target) and not isinstance(target, (int, torch.Tensor)):
        value = target(output)
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise ValueError(
                "a callable target must return a tensor with one element, got "
                f"{type(value).__name__}{tuple(value.shape) if isinstance(value, torch.Tensor) else ''}"
            )
        name = getattr(target, "__name__", type(target).__name__)
        return value.reshape(()), None, f"custom target {name}(output)"
    out = first_tensor(output)
    if out is None:
        raise ValueError(
            "the model output holds no tensor, so there is nothing to take gradients of"
        )
    if not out.is_floating_point() and not out.is_complex():
        raise ValueError(f"the model output has dtype {out.dtype}; gradients need a float output")
    if target is None:
        if out.numel() == 1:
            return out.reshape(()), None, "the model's single output value"
        if out.dim() == 2:
            top = out.detach().argmax(dim=1)
            value = out.gather(1, top[:, None]).sum()
            rows = out.shape[0]
            desc = f"top-1 logit (class {int(top[0])})"
            if rows > 1:
                desc = f"top-1 logit of each of {rows} rows, summed (row 0: class {int(top[0])})"
            return value, int(top[0]), desc
        return out.sum(), None, f"sum of all {out.numel()} output elements"
    if isinstance(target, bool) or not isinstance(target, int):
        raise TypeError(f"target must be None, an int or a callable, not {type(target).__name__}")
    k = int(target)
    if out.dim() == 0:
        raise ValueError(f"target class {k} given, but the model output is a scalar")
    n_classes = out.shape[0] if out.dim() == 1 else out.shape[1]
    if not -n_classes <= k < n_classes:
        raise ValueError(f"target class {k} is out of range: the output has {n_classes} classes")
    k = k % n_classes
    value = out[k] if out.dim() == 1 else out[:, k].sum()
    return value.reshape(()), k, f"class {k}"


# --------------------------------------------------------------------------- model state


class _ModelState:
    """Training flags and buffers, saved before a capture and put back after it."""

    def __init__(self, model: nn.Module):
        self.flags = [(m, m.training) for m in model.modules()]
        # Always copied back: kernels such as batch_norm update running statistics without
        # bumping the version counter, so "unchanged version" proves nothing.
        self.buffers: list[tuple[nn.Module, str, torch.Tensor, torch.Tensor]] = []
        with torch.no_grad():
            for mod in model.modules():
                for name, buf in mod._buffers.items():
                    if buf is not None and not buf.is_inference():
                        self.buffers.append((mod, name, buf, buf.detach().clone()))

    def restore(self) -> None:
        for mod, flag in self.flags:
            mod.training = flag
        with torch.no_grad():
            for mod, name, buf, saved in self.buffers:
                if mod._buffers.get(name) is not buf:
                    mod._buffers[name] = buf  # the forward reassigned it
                buf.copy_(saved)


# --------------------------------------------------------------------------- recorder


class _Retry(Exception):
    """Internal: a module modified its input in place; run again with cloned inputs for it."""


@dataclass
class _Frame:
    index: int
    inputs: tuple
    taps: list[tuple[torch.Tensor, int, bool, list] | None]  # (tap, version, is_view, holder)
    grad_slots: list[torch.Tensor | None]


def _simple(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, float, bool, str)) else None


class _Recorder:
    def __init__(
        self,
        names: dict[nn.Module, str],
        gradients: bool,
        keep_inputs: bool,
        max_bytes: int | None,
        should_stop: Callable[[], bool] | None,
    ):
        self.names = names
        self.gradients = gradients
        self.keep_inputs = keep_inputs
        self.max_bytes = max_bytes
        self.should_stop = should_stop
        self.records: dict[str, list[LayerRecord]] = {}
        self.order: list[str] = []
        self.nbytes = 0
        self._snaps: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}
        self._stacks: dict[int, list[_Frame]] = {}
        # (record, per-output grad slots, per-input grad slots)
        self.pending: list[tuple[LayerRecord, list, list | None]] = []
        # Tensors whose gradient autograd.grad is asked for, so every hooked node runs.
        self.grad_requests: list[tuple[torch.Tensor, int]] = []
        self.retry_needed = False
        self.copy_all = False
        self.verify: list[tuple[torch.Tensor, int, nn.Module]] = []
        self.thread = threading.get_ident()

    # -- values
    def snapshot(self, t: torch.Tensor, owner: nn.Module) -> torch.Tensor:
        """The value of ``t`` now, shared with any earlier snapshot of the same tensor version.

        A copy only where needed: for modules known to see their tensors changed later, and
        for views into a larger storage (a reference would pin all of it). Otherwise a
        reference, verified after the forward pass (see :meth:`stale_owners`).
        """
        entry = self._snaps.get(id(t))
        version = t._version
        if entry is not None and entry[0]() is t and entry[1] == version:
            return entry[2]
        nbytes = t.numel() * t.element_size()
        if (
            self.copy_all
            or owner in _NEEDS_COPY
            or t.untyped_storage().nbytes() > nbytes
            or t.requires_grad and t.is_leaf
        ):
            snap = t.detach().clone()
        else:
            snap = t.detach()  # shares the version counter, so a later write is detectable
            self.verify.append((snap, version, owner))
        self.nbytes += nbytes
        if self.max_bytes is not None and self.nbytes > self.max_bytes:
            raise CaptureTooLarge(
                f"the selected layers need more than {_fmt_bytes(self.max_bytes)} "
                f"(the memory budget); tick fewer layers or raise the budget"
            )
        self._snaps[id(t)] = (weakref.ref(t), version, snap)
        return snap

    def stale_owners(self) -> list[nn.Module]:
        """Modules whose referenced (uncopied) tensors were modified after being recorded."""
        return [owner for snap, version, owner in self.verify if snap._version != version]

    def register_input(self, arg: torch.Tensor, copy: torch.Tensor) -> None:
        self._snaps[id(arg)] = (weakref.ref(arg), arg._version, copy)

    def check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise CaptureCancelled("capture cancelled")

    # -- hooks
    def pre_hook(self, module: nn.Module, args: tuple) -> tuple | None:
        self.check_stop()
        name = self.names[module]
        stack = self._stacks.setdefault(id(module), [])
        index = len(self.records.get(name, ())) + len(stack)
        inputs: tuple = ()
        if self.keep_inputs:
            inputs = tuple(
                self.snapshot(a, module) if isinstance(a, torch.Tensor) else _simple(a)
                for a in args
            )
        taps: list = []
        new_args = None
        if self.gradients:
            clone_input = getattr(module, "inplace", False) is True or module in _DISCOVERED_INPLACE
            for i, a in enumerate(args):
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    # A fresh node per module input: its gradient is what flows through this
                    # module only. A view is free; in-place modules need a clone, because a hook
                    # on a view that is then modified in place never fires. The hook goes on
                    # before the module runs, so it sees the gradient of the value it received.
                    tap = a.clone() if clone_input else a.view_as(a)
                    holder: list = [None]
                    tap.register_hook(functools.partial(_store_grad, holder))
                    if new_args is None:
                        new_args = list(args)
                    new_args[i] = tap
                    taps.append((tap, tap._version, not clone_input, holder))
                else:
                    taps.append(None)
        stack.append(_Frame(index, inputs, taps, []))
        return tuple(new_args) if new_args is not None else None

    def forward_hook(self, module: nn.Module, args: tuple, output: Any) -> Any:
        name = self.names[module]
        frame = self._stacks[id(module)].pop()
        rec = LayerRecord(name, frame.index, type(module).__name__, frame.inputs)
        replaced = output
        if self.gradients:
            replaced = self._track_output(output)
            in_slots: list = []
            for tap_info in frame.taps:
                if tap_info is None:
                    in_slots.append(None)
                    continue
                tap, version, is_view, holder = tap_info
                if is_view and tap._version != version:
                    # The module wrote into its input view, so that view's hook is lost.
                    _DISCOVERED_INPLACE.add(module)
                    self.retry_needed = True
                in_slots.append(holder)
                self.grad_requests.append((tap, tap._version))
            out_slots: list = []
            for t in iter_tensors(replaced):
                holder = [None]
                if t.requires_grad:
                    t.register_hook(functools.partial(_store_grad, holder))
                    self.grad_requests.append((t, t._version))
                out_slots.append(holder)
            self.pending.append((rec, out_slots, in_slots))
        rec.output = map_tensors(replaced, lambda t: self.snapshot(t, module))
        if name not in self.records:
            self.records[name] = []
            self.order.append(name)
        self.records[name].append(rec)
        return replaced if replaced is not output else None

    def _track_output(self, output: Any) -> Any:
        """Make every float output differentiable and safe from in-place ops downstream."""

        def fix(t: torch.Tensor) -> torch.Tensor:
            if not t.is_floating_point():
                return t
            if not t.requires_grad:
                # Nothing upstream requires grad (integer inputs, frozen weights): start the
                # graph here so gradients still reach this and every later layer.
                return t.detach().requires_grad_(True).clone()
            if t._is_view():
                # A hook on a view that is later modified in place never fires: hand the
                # rest of the model a copy and keep the view for ourselves.
                return t.clone()
            return t

        if isinstance(output, torch.Tensor):
            return fix(output)
        changed = False

        def fix_tracked(t: torch.Tensor) -> torch.Tensor:
            nonlocal changed
            new = fix(t)
            changed |= new is not t
            return new

        rebuilt = _rebuild(output, fix_tracked)
        return rebuilt if changed else output


def _rebuild(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Like map_tensors but keeps every non-tensor leaf and the container types."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_rebuild(v, fn) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_rebuild(v, fn) for v in obj)
    if isinstance(obj, dict):
        try:
            return type(obj)((k, _rebuild(v, fn)) for k, v in obj.items())
        except TypeError:
            return {k: _rebuild(v, fn) for k, v in obj.items()}
    return obj


def _store_grad(holder: list, grad: torch.Tensor) -> None:
    # Keep the gradient object itself: holding a reference stops autograd from accumulating
    # into it in place, so it is not changed later.
    holder[0] = grad if holder[0] is None else holder[0] + grad


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# --------------------------------------------------------------------------- unregistered


class _Unregistered:
    """A temporary global hook that notices modules that run but are not in named_modules()."""

    def __init__(self, model: nn.Module, recorder: _Recorder):
        self.model = model
        self.recorder = recorder
        self.known = {id(m) for m in model.modules()}
        self.seen: dict[int, nn.Module] = {}
        self.handle = None

    def __enter__(self) -> _Unregistered:
        self.handle = nn.modules.module.register_module_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            self.handle.remove()

    def _hook(self, module: nn.Module, args: tuple) -> None:
        if threading.get_ident() != self.recorder.thread:
            return
        self.recorder.check_stop()
        if id(module) not in self.known and id(module) not in self.seen:
            self.seen[id(module)] = module

    def warnings(self) -> list[str]:
        out = []
        roots = [m for m in self.seen.values() if not _inside_any(m, self.seen.values())]
        for mod in roots:
            where = _find_holder(self.model, mod)
            out.append(
                f"{type(mod).__name__} ran during forward but is not registered in "
                f"named_modules(){where}, so it cannot be hooked or ticked; store it in "
                f"nn.ModuleList / nn.ModuleDict (or as an attribute) to see it"
            )
        return out


def _inside_any(mod: nn.Module, others: Any) -> bool:
    return any(o is not mod and any(c is mod for c in o.modules()) for o in others)


def _find_holder(model: nn.Module, target: nn.Module) -> str:
    for owner_name, owner in model.named_modules():
        for attr, value in vars(owner).items():
            if attr.startswith("_"):
                continue
            items: list[tuple[str, Any]] = []
            if isinstance(value, (list, tuple)):
                items = [(f"{attr}[{i}]", v) for i, v in enumerate(value)]
                kind = "a plain " + type(value).__name__
            elif isinstance(value, dict):
                items = [(f"{attr}[{k!r}]", v) for k, v in value.items()]
                kind = "a plain dict"
            for label, v in items:
                if v is target:
                    prefix = f"{owner_name}." if owner_name else f"{type(model).__name__}."
                    return f" (held in {prefix}{label}, {kind})"
    return ""


# --------------------------------------------------------------------------- capture


def capture(
    model: nn.Module,
    inputs: Any,
    layers: Sequence[str] | str | None = None,
    *,
    target: Any = None,
    gradients: bool = True,
    mode: str = "eval",
    keep_inputs: bool = True,
    max_bytes: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Capture:
    """Run ``model`` on ``inputs`` and record the chosen layers' values and gradients.

    Parameters
    ----------
    model
        Any ``nn.Module``. It is left exactly as found: no hooks, ``.grad``, ``training`` flags,
        ``requires_grad`` flags or buffers change, even when its forward raises.
    inputs
        A tensor, a tuple/list of tensors (positional arguments) or a dict (keyword arguments).
        The caller's tensors are never modified and never get ``requires_grad`` set.
    layers
        Qualified names from ``model.named_modules()``; None records every leaf module.
    target
        What the gradients are of. None: the single output value if there is one element; each
        row's top-1 logit, summed, for a 2-D ``(N, C)`` output; else the sum of all elements.
        An int ``k``: class ``k`` (``out[:, k].sum()``, or ``out[k]`` for a 1-D output). A callable
        ``f(output) -> scalar tensor`` for anything else. For tuple/dict/dataclass outputs the
        first tensor is used unless the callable picks another.
    gradients
        False runs forward only, under ``no_grad``; every gradient field is then None.
    mode
        ``"eval"`` (default: BatchNorm statistics and dropout untouched) or ``"train"``.
    keep_inputs
        Record each layer's inputs too (shared with the producing layer's output when possible).
    max_bytes
        Refuse (``CaptureTooLarge``) once the recorded tensors would exceed this many bytes.
    should_stop
        Polled before every module call; returning True raises ``CaptureCancelled``.

    Returns
    -------
    Capture
        Records per layer (``cap[name]``, ``cap.calls(name)``), the output, input gradients
        (the saliency), the target and any warnings.

    Raises
    ------
    ValueError
        Unknown layer names, a bad target, or an invalid ``mode``.
    CaptureCancelled, CaptureTooLarge
        See ``should_stop`` and ``max_bytes``. The model's own exceptions propagate unchanged.
    """
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', not {mode!r}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    warnings: list[str] = []
    if hasattr(model, "_orig_mod") and isinstance(model._orig_mod, nn.Module):
        # torch.compile traces submodules away, so their hooks would never fire.
        model = model._orig_mod
        warnings.append(
            "torch.compile'd model: actviz runs its original eager module (same weights) so "
            "that layer hooks fire"
        )
        if layers is not None:
            layers = [
                _strip(n, "_orig_mod.") for n in ([layers] if isinstance(layers, str) else layers)
            ]
    names = resolve_layers(model, layers)
    start = time.perf_counter()
    for attempt in range(_MAX_ATTEMPTS):
        try:
            # Inside a caller's inference_mode, tensors made here could not join autograd.
            with torch.inference_mode(False):
                return _capture_once(
                    model,
                    inputs,
                    names,
                    target,
                    gradients,
                    mode,
                    keep_inputs,
                    max_bytes,
                    should_stop,
                    warnings,
                    start,
                    copy_all=attempt == _MAX_ATTEMPTS - 1,
                )
        except _Retry:
            # A recorded tensor was written to after its hook (or a module wrote into its
            # input): the modules responsible are now known and get copies; run again.
            log.debug("capture attempt %d saw in-place writes; capturing again", attempt + 1)
    raise AssertionError("unreachable")  # pragma: no cover


def _strip(name: str, prefix: str) -> str:
    return name[len(prefix) :] if name.startswith(prefix) else name


def _model_device(model: nn.Module) -> torch.device | None:
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return None


def _capture_once(
    model: nn.Module,
    inputs: Any,
    names: list[str],
    target: Any,
    gradients: bool,
    mode: str,
    keep_inputs: bool,
    max_bytes: int | None,
    should_stop: Callable[[], bool] | None,
    warnings_in: list[str],
    start: float,
    copy_all: bool = False,
) -> Capture:
    warnings = list(warnings_in)
    modules = dict(model.named_modules())
    by_module = {modules[n]: n for n in names}
    recorder = _Recorder(by_module, gradients, keep_inputs, max_bytes, should_stop)
    recorder.copy_all = copy_all
    scripted = isinstance(model, torch.jit.ScriptModule)
    state = _ModelState(model)
    handles: list[Any] = []
    prepared = _prepare_inputs(inputs, gradients, _model_device(model))
    for arg, copy in zip(prepared.args, _flat_copies(prepared.copies), strict=False):
        if isinstance(arg, torch.Tensor) and isinstance(copy, torch.Tensor):
            recorder.register_input(arg, copy)
    try:
        model.train(mode == "train")
        if scripted:
            warnings.append(
                "TorchScript model: its layers run inside the compiled graph, so layer hooks "
                "cannot fire; only the model output and input gradients are available"
            )
        else:
            for module, _name in by_module.items():
                handles.append(module.register_forward_pre_hook(recorder.pre_hook))
                handles.append(module.register_forward_hook(recorder.forward_hook))
        unregistered = _Unregistered(model, recorder)
        with torch.inference_mode(False), torch.set_grad_enabled(gradients), unregistered:
            output = model(*prepared.args, **prepared.kwargs)
        stale = recorder.stale_owners()
        if stale or recorder.retry_needed:
            _NEEDS_COPY.update(stale)
            raise _Retry()
        # The hooks must not stay registered during backward or while results are built.
        for h in handles:
            h.remove()
        handles.clear()

        target_value: float | None = None
        target_index: int | None = None
        description = "no gradients requested"
        input_grads: Any = None
        if gradients:
            with torch.inference_mode(False), torch.enable_grad():
                scalar, target_index, description = _resolve_target(output, target)
                target_value = float(scalar.detach())
                input_grads = _backward(scalar, prepared, recorder, warnings)
        else:
            try:
                scalar, target_index, description = _resolve_target(output, target)
                target_value = float(scalar.detach())
            except (ValueError, TypeError, RuntimeError) as exc:
                description = f"no target ({exc})"
        warnings.extend(unregistered.warnings())
        for name in names:
            if name not in recorder.records and not scripted:
                warnings.append(
                    f"layer {name!r} never ran during this forward pass, so nothing was recorded"
                )
        out_cpu = map_tensors(output, lambda t: t.detach().cpu())
        on_cpu = _model_device(model) in (None, torch.device("cpu"))
        records = recorder.records if on_cpu else _to_cpu(recorder)
        for w in warnings:
            log.info("capture warning: %s", w)
        return Capture(
            names=list(recorder.order),
            records=records,
            output=out_cpu,
            input_grads=input_grads,
            target_value=target_value,
            target_index=target_index,
            target_description=description,
            warnings=warnings,
            inputs=map_tensors(prepared.copies, lambda t: t.detach().cpu()),
            nbytes=recorder.nbytes,
            elapsed_s=time.perf_counter() - start,
            gradients=gradients,
            mode=mode,
        )
    finally:
        for h in handles:
            h.remove()
        state.restore()


def _flat_copies(copies: Any) -> list:
    if isinstance(copies, torch.Tensor):
        return [copies]
    if isinstance(copies, tuple):
        return list(copies)
    return []


def _backward(
    scalar: torch.Tensor, prepared: _Inputs, recorder: _Recorder, warnings: list[str]
) -> Any:
    leaves = [leaf for leaf in prepared.leaves if leaf is not None]
    # Ask for the leaves and every hooked tensor still at its hooked version, so every hooked
    # node runs; tensors changed in place since are covered by their hooks (fired upstream).
    requested = list(leaves)
    seen = {id(t) for t in requested}
    for t, version in recorder.grad_requests:
        if id(t) not in seen and t._version == version and t.requires_grad:
            requested.append(t)
            seen.add(id(t))
    grads: Sequence[torch.Tensor | None] = [None] * len(requested)
    if not scalar.requires_grad:
        warnings.append(
            "the target does not depend on any input or recorded layer, so there are no gradients"
        )
    elif requested:
        grads = torch.autograd.grad(scalar, requested, allow_unused=True)
    leaf_grads = dict(zip((id(t) for t in leaves), grads[: len(leaves)], strict=True))
    for rec, out_slots, in_slots in recorder.pending:
        out_grads = iter([h[0] for h in out_slots])
        rec.grad_output = map_tensors(rec.output, lambda _t, g=out_grads: _detach(next(g)))
        rec.grad_inputs = tuple(None if h is None else _detach(h[0]) for h in (in_slots or []))
    ordered = [
        None if leaf is None else _detach(leaf_grads.get(id(leaf))) for leaf in prepared.leaves
    ]
    return _align_grads(prepared.copies, ordered)


def _detach(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach()


def _to_cpu(recorder: _Recorder) -> dict[str, list[LayerRecord]]:
    def cpu(x: Any) -> Any:
        return map_tensors(x, lambda t: t.cpu()) if x is not None else None

    for recs in recorder.records.values():
        for rec in recs:
            rec.inputs = tuple(cpu(a) if isinstance(a, torch.Tensor) else a for a in rec.inputs)
            rec.output = cpu(rec.output)
            rec.grad_output = cpu(rec.grad_output)
            if rec.grad_inputs is not None:
                rec.grad_inputs = tuple(cpu(g) for g in rec.grad_inputs)
    return recorder.records
