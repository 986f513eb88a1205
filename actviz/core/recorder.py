"""The hooks of a capture: value snapshots, gradient taps and their bookkeeping (why:
:mod:`actviz.core.capture`).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from actviz.core.pool import MIN_BYTES, POOL
from actviz.core.records import CaptureCancelled, CaptureTooLarge, LayerRecord
from actviz.core.structures import clone_keep_layout, iter_tensors, map_tensors

__all__ = [
    "DISCOVERED_INPLACE",
    "NEEDS_COPY",
    "NEEDS_GRAD_HOOK",
    "Recorder",
    "Retry",
    "format_bytes",
]

# Modules found (at run time) to modify their input in place although they have no
# ``inplace=True`` attribute; they get a cloned input next time. Weak, so models can be freed.
DISCOVERED_INPLACE: weakref.WeakSet[nn.Module] = weakref.WeakSet()
# Modules whose recorded tensors were written to later in the forward (by an in-place ReLU,
# ``out += identity``...). Their values are copied when the hook fires; every other record
# keeps a reference, checked against the tensor's version counter after the forward pass.
NEEDS_COPY: weakref.WeakSet[nn.Module] = weakref.WeakSet()
# Modules whose tensors (outputs or input views) changed in place after their call without
# being recorded values (NEEDS_COPY covers those): they get tensor hooks next time. Every other
# gradient is read from ``autograd.grad``'s results, which needs no hook.
NEEDS_GRAD_HOOK: weakref.WeakSet[nn.Module] = weakref.WeakSet()


class Retry(Exception):
    """Internal: a module modified its input in place; run again with cloned inputs for it."""


class _Frame(NamedTuple):
    index: int
    inputs: tuple
    # (tap, version, is_view, holder, hooked)
    taps: list[tuple[torch.Tensor, int, bool, list, bool] | None]


_NO_TAPS: list = []  # never appended to


class Recorder:
    def __init__(
        self,
        names: dict[nn.Module, str],
        gradients: bool,
        keep_inputs: bool,
        max_bytes: int | None,
        should_stop: Callable[[], bool] | None,
        *,
        input_grads: bool = True,
    ):
        self.names = names
        self.gradients = gradients
        # Without input gradients no module input is tapped: the backward pass then stops at
        # the earliest recorded output.
        self.input_grads = gradients and input_grads
        self.keep_inputs = keep_inputs
        self.max_bytes = max_bytes
        self.should_stop = should_stop
        self.records: dict[str, list[LayerRecord]] = {}
        self.order: list[str] = []
        self.calls = 0  # records made so far: the next record's ``seq``
        self.nbytes = 0
        self._snaps: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}
        self._stacks: dict[int, list[_Frame]] = {}
        # (record, per-output grad slots, per-input grad slots)
        self.pending: list[tuple[LayerRecord, list, list | None]] = []
        # Tensors whose gradient autograd.grad is asked for: (tensor, version when recorded,
        # the slot its gradient goes to, and the module when no hook fills that slot).
        self.grad_requests: list[tuple[torch.Tensor, int, list, nn.Module | None]] = []
        self.retry_needed = False
        self.copy_all = False
        # Large CPU records go into pooled memory where the capture sets this (core/pool.py).
        self.pool = False
        self.verify: list[tuple[torch.Tensor, int, nn.Module]] = []
        # Looked up once, iterating the (small) sets: ``module in WeakSet`` makes a weak
        # reference per test.
        self._copy_ids: set[int] = set()
        self._hook_ids: set[int] = set()
        self._inplace_ids: set[int] = set()
        if names:  # a capture of no layer has nothing to look up
            self._copy_ids = {id(m) for m in NEEDS_COPY if m in names}
            self._hook_ids = self._copy_ids | {id(m) for m in NEEDS_GRAD_HOOK if m in names}
            self._inplace_ids = {id(m) for m in DISCOVERED_INPLACE if m in names}
        self._started: dict[int, int] = {}  # calls begun per module: the next call's index
        # Per module: whether its tensor inputs are cloned (it writes into them).
        self._clones: dict[int, bool] = {}

    # -- values
    def snapshot(self, t: torch.Tensor, owner: nn.Module) -> torch.Tensor:
        """The value of ``t`` now, shared with earlier snapshots of the same tensor version: pooled
        memory for large CPU tensors with :attr:`pool`, a copy for modules known to write later and
        for views, else a reference checked after the forward (:meth:`stale_owners`).
        """
        entry = self._snaps.get(id(t))
        version = t._version
        if entry is not None and entry[0]() is t and entry[1] == version:
            return entry[2]
        nbytes = t.numel() * t.element_size()
        pooled = POOL.copy(t) if self.pool and nbytes >= MIN_BYTES else None
        if pooled is not None:
            # A large record in warm memory actviz keeps (core/pool.py); the forward's own
            # tensor is freed as in a bare pass.
            snap = pooled
        elif (
            self.copy_all
            or id(owner) in self._copy_ids
            # Only a view can pin a larger storage (asking every tensor for its storage makes
            # a Python object per record).
            or t._is_view()
            and t.untyped_storage().nbytes() > nbytes
            or t.requires_grad
            and t.is_leaf
        ):
            snap = t.detach().clone()
        else:
            snap = t.detach()  # shares the version counter, so a later write is detectable
            self.verify.append((snap, version, owner))
        self.nbytes += nbytes
        if self.max_bytes is not None and self.nbytes > self.max_bytes:
            raise CaptureTooLarge(
                f"the selected layers need more than {format_bytes(self.max_bytes)} "
                f"(the memory budget); tick fewer layers or raise the budget"
            )
        self._snaps[id(t)] = (weakref.ref(t), version, snap)
        return snap

    def stale_owners(self) -> list[nn.Module]:
        """Modules whose referenced (uncopied) tensors were modified after being recorded."""
        return [owner for snap, version, owner in self.verify if snap._version != version]

    def unhooked_changed(self) -> list[nn.Module]:
        """Modules with a tensor changed in place since its call and no hook to catch its
        gradient (``autograd.grad`` would give that of the changed value, or none)."""
        return [
            m for t, version, _h, m in self.grad_requests if m is not None and t._version != version
        ]

    def register_input(self, arg: torch.Tensor, copy: torch.Tensor) -> None:
        self._snaps[id(arg)] = (weakref.ref(arg), arg._version, copy)

    def check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise CaptureCancelled("capture cancelled")

    # -- hooks
    def call(self, module: nn.Module, forward: Callable, *args: Any, **kwargs: Any) -> Any:
        """``forward(*args, **kwargs)`` recorded: what :meth:`pre_hook` and :meth:`forward_hook`
        would do, with the call's state in this frame instead of a per-module stack.
        """
        index, inputs, taps, new_args = self._begin(module, args)
        output = forward(*(args if new_args is None else new_args), **kwargs)
        replaced = self._finish(module, index, inputs, taps, output)
        return output if replaced is None else replaced

    def pre_hook(self, module: nn.Module, args: tuple) -> tuple | None:
        index, inputs, taps, new_args = self._begin(module, args)
        stack = self._stacks.get(id(module))
        if stack is None:
            stack = self._stacks[id(module)] = []
        stack.append(_Frame(index, inputs, taps))
        return new_args

    def forward_hook(self, module: nn.Module, args: tuple, output: Any) -> Any:
        frame = self._stacks[id(module)].pop()
        return self._finish(module, frame.index, frame.inputs, frame.taps, output)

    def _begin(self, module: nn.Module, args: tuple) -> tuple[int, tuple, list, tuple | None]:
        """A call starts: its index, its inputs' snapshots, its taps and the args to use."""
        if self.should_stop is not None and self.should_stop():
            raise CaptureCancelled("capture cancelled")
        key = id(module)
        # Every call begun is either finished (a record) or under way: the count is the index
        # of this call.
        index = self._started.get(key, 0)
        self._started[key] = index + 1
        inputs: tuple = ()
        if self.keep_inputs:
            if len(args) == 1 and isinstance(args[0], torch.Tensor):
                inputs = (self.snapshot(args[0], module),)
            else:
                inputs = tuple(
                    self.snapshot(a, module)
                    if isinstance(a, torch.Tensor)
                    else map_tensors(a, lambda t: self.snapshot(t, module))
                    for a in args
                )
        if not self.input_grads:
            return index, inputs, _NO_TAPS, None
        taps: list = []
        new_args = None
        clone_input = self._clones.get(key)
        if clone_input is None:
            clone_input = self._clones[key] = _inplace(module) or key in self._inplace_ids
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                # A fresh node per module input: its gradient is what flows through this module
                # only. A view is free; in-place modules need a clone (a hook on a view modified
                # in place never fires), hooked before the module runs. ``a[...]`` is
                # ``aten::alias`` without ``torch.ops``' Python dispatch, every stride kept
                # (view_as resets size-1 dims', and convolutions pick another memory format).
                tap = clone_keep_layout(a) if clone_input else a[...]
                holder: list = [None]
                hooked = clone_input or self.copy_all or key in self._hook_ids
                if hooked:
                    # The module writes into this clone: only a hook placed now sees
                    # the gradient of the value it received.
                    tap.register_hook(functools.partial(_store_grad, holder))
                if new_args is None:
                    new_args = list(args)
                new_args[i] = tap
                taps.append((tap, tap._version, not clone_input, holder, hooked))
            else:
                taps.append(None)
        return index, inputs, taps, tuple(new_args) if new_args is not None else None

    def _finish(self, module: nn.Module, index: int, inputs: tuple, taps: list, output: Any) -> Any:
        """A call ends: its record. Returns the output to hand on where it was replaced."""
        name = self.names[module]
        rec = LayerRecord(name, index, type(module).__name__, inputs, None, None, None, self.calls)
        self.calls += 1
        replaced = output
        if self.gradients:
            replaced = self._track_output(output)
            in_slots: list | None = [] if self.input_grads else None
            for tap_info in taps:
                if tap_info is None:
                    in_slots.append(None)  # type: ignore[union-attr]
                    continue
                tap, version, is_view, holder, hooked = tap_info
                if is_view and tap._version != version:
                    # The module wrote into its input view, so that view's hook is lost.
                    DISCOVERED_INPLACE.add(module)
                    self.retry_needed = True
                in_slots.append(holder)  # type: ignore[union-attr]
                self.grad_requests.append((tap, tap._version, holder, None if hooked else module))
            out_slots: list = []
            hook = self.copy_all or id(module) in self._hook_ids
            outs = (replaced,) if isinstance(replaced, torch.Tensor) else iter_tensors(replaced)
            for t in outs:
                holder = [None]
                if t.requires_grad:
                    if hook:
                        t.register_hook(functools.partial(_store_grad, holder))
                    self.grad_requests.append((t, t._version, holder, None if hook else module))
                out_slots.append(holder)
            self.pending.append((rec, out_slots, in_slots))
        if isinstance(replaced, torch.Tensor):
            rec.output = self.snapshot(replaced, module)
        else:
            rec.output = map_tensors(replaced, lambda t: self.snapshot(t, module))
        calls = self.records.get(name)
        if calls is None:
            calls = self.records[name] = []
            self.order.append(name)
        calls.append(rec)
        return replaced if replaced is not output else None

    def _track_output(self, output: Any) -> Any:
        """Make every float output differentiable and safe from in-place ops downstream."""
        if isinstance(output, torch.Tensor):
            return _fix_output(output)
        changed = False

        def fix_tracked(t: torch.Tensor) -> torch.Tensor:
            nonlocal changed
            new = _fix_output(t)
            changed |= new is not t
            return new

        rebuilt = map_tensors(output, fix_tracked)
        return rebuilt if changed else output


def _inplace(module: nn.Module) -> bool:
    """Whether ``module.inplace`` is True (where it has such an attribute)."""
    # An instance attribute in nearly every module that has one: a plain dict lookup, not
    # Module.__getattr__'s slow miss (an exception) on every other module.
    value = module.__dict__.get("inplace", _NOT_SET)
    if value is _NOT_SET:
        value = getattr(type(module), "inplace", False)  # a class attribute
        if hasattr(value, "__get__"):  # a property or other descriptor: ask the instance
            value = getattr(module, "inplace", False)
    return value is True


_NOT_SET = object()


def _fix_output(t: torch.Tensor) -> torch.Tensor:
    if not t.is_floating_point():
        return t
    if not t.requires_grad:
        # Nothing upstream requires grad (integer inputs, frozen weights): start the graph
        # here so gradients still reach this and every later layer.
        return clone_keep_layout(t.detach().requires_grad_(True))
    if t._is_view():
        # A hook on a view that is later modified in place never fires: hand the rest of the
        # model a copy (same strides) and keep the view for ourselves.
        return clone_keep_layout(t)
    return t


def _store_grad(holder: list, grad: torch.Tensor) -> None:
    # Keep the gradient object itself: holding a reference stops autograd from accumulating
    # into it in place, so it is not changed later.
    holder[0] = grad if holder[0] is None else holder[0] + grad


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``: bytes for people (B, KiB, MiB, GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
