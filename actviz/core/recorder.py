"""A capture's hooks: value snapshots, gradient taps and their bookkeeping (why: its module)."""

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

# Modules found writing into their input without ``inplace=True``: cloned input next time.
DISCOVERED_INPLACE: weakref.WeakSet[nn.Module] = weakref.WeakSet()
# Modules whose records were written later in the forward (``out += identity``): copied next time.
NEEDS_COPY: weakref.WeakSet[nn.Module] = weakref.WeakSet()
# Modules whose unrecorded tensors changed in place after their call: tensor hooks next time.
NEEDS_GRAD_HOOK: weakref.WeakSet[nn.Module] = weakref.WeakSet()
_NO_TAPS: list = []  # never appended to
_NOT_SET = object()


class Retry(Exception):
    """Internal: a module modified its input in place; run again with cloned inputs for it."""


class _Frame(NamedTuple):
    index: int
    inputs: tuple
    # (tap, version, is_view, holder, hooked)
    taps: list[tuple[torch.Tensor, int, bool, list, bool] | None]


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
        self.names, self.gradients = names, gradients
        # Without input gradients no input is tapped: the backward stops at the earliest output.
        self.input_grads = gradients and input_grads
        self.keep_inputs, self.max_bytes, self.should_stop = keep_inputs, max_bytes, should_stop
        self.records: dict[str, list[LayerRecord]] = {}
        self.order: list[str] = []
        self.calls = 0  # records made so far: the next record's ``seq``
        self.nbytes = 0
        self._snaps: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}
        self._stacks: dict[int, list[_Frame]] = {}
        # (record, per-output grad slots, per-input grad slots)
        self.pending: list[tuple[LayerRecord, list, list | None]] = []
        # (tensor, version when recorded, gradient slot, module when no hook fills the slot)
        self.grad_requests: list[tuple[torch.Tensor, int, list, nn.Module | None]] = []
        self.retry_needed = self.copy_all = False
        self.pool = False  # Large CPU records go into pooled memory (core/pool.py).
        self.verify: list[tuple[torch.Tensor, int, nn.Module]] = []
        # Built once: ``module in WeakSet`` makes a weak reference per test.
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

    def snapshot(self, t: torch.Tensor, owner: nn.Module) -> torch.Tensor:
        """The value of ``t`` now, shared by snapshots of one version: pooled memory for large
        CPU tensors, a copy for views and modules known to write later, else a reference checked
        after the forward (:meth:`stale_owners`)."""
        entry = self._snaps.get(id(t))
        version = t._version
        if entry is not None and entry[0]() is t and entry[1] == version:
            return entry[2]
        nbytes = t.numel() * t.element_size()
        pooled = POOL.copy(t) if self.pool and nbytes >= MIN_BYTES else None
        if pooled is not None:
            # Warm memory actviz keeps; the forward's own tensor is freed as in a bare pass.
            snap = pooled
        elif (
            self.copy_all
            or id(owner) in self._copy_ids
            # Only a view can pin a larger storage (asking for it costs an object per record).
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
        """Modules with a tensor changed in place since its call and no hook for its gradient."""
        return [
            m for t, version, _h, m in self.grad_requests if m is not None and t._version != version
        ]

    def register_input(self, arg: torch.Tensor, copy: torch.Tensor) -> None:
        self._snaps[id(arg)] = (weakref.ref(arg), arg._version, copy)

    def check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise CaptureCancelled("capture cancelled")

    def call(self, module: nn.Module, forward: Callable, *args: Any, **kwargs: Any) -> Any:
        """``forward(*args, **kwargs)`` recorded as :meth:`pre_hook` and :meth:`forward_hook`
        would, the call's state in this frame instead of a per-module stack."""
        index, inputs, taps, new_args = self._begin(module, args)
        output = forward(*(args if new_args is None else new_args), **kwargs)
        replaced = self._finish(module, index, inputs, taps, output)
        return output if replaced is None else replaced

    def pre_hook(self, module: nn.Module, args: tuple) -> tuple | None:
        index, inputs, taps, new_args = self._begin(module, args)
        self._stacks.setdefault(id(module), []).append(_Frame(index, inputs, taps))
        return new_args

    def forward_hook(self, module: nn.Module, args: tuple, output: Any) -> Any:
        frame = self._stacks[id(module)].pop()
        return self._finish(module, frame.index, frame.inputs, frame.taps, output)

    def _begin(self, module: nn.Module, args: tuple) -> tuple[int, tuple, list, tuple | None]:
        """A call starts: its index, its inputs' snapshots, its taps and the args to use."""
        self.check_stop()
        key = id(module)
        # Calls begun are finished (records) or under way: the count is this call's index.
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
        if (clone_input := self._clones.get(key)) is None:
            clone_input = self._clones[key] = _inplace(module) or key in self._inplace_ids
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                # A fresh node per input carries this module's gradient only. In-place modules
                # need a clone (a hook on a view modified in place never fires). ``a[...]`` keeps
                # every stride (view_as resets size-1 dims', changing convolutions' format).
                tap = clone_keep_layout(a) if clone_input else a[...]
                holder: list = [None]
                hooked = clone_input or self.copy_all or key in self._hook_ids
                if hooked:
                    # The module writes into this clone: only a hook placed now sees its gradient.
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
        if (calls := self.records.get(name)) is None:
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
    # A dict lookup, not Module.__getattr__'s slow miss (an exception) on every other module.
    if (value := module.__dict__.get("inplace", _NOT_SET)) is _NOT_SET:
        value = getattr(type(module), "inplace", False)  # a class attribute
        if hasattr(value, "__get__"):  # a property or other descriptor: ask the instance
            value = getattr(module, "inplace", False)
    return value is True


def _fix_output(t: torch.Tensor) -> torch.Tensor:
    if not t.is_floating_point():
        return t
    if not t.requires_grad:
        # Nothing upstream requires grad (integer inputs, frozen weights): the graph starts here.
        return clone_keep_layout(t.detach().requires_grad_(True))
    if t._is_view():
        # A hook on a view later modified in place never fires: the model gets a copy.
        return clone_keep_layout(t)
    return t


def _store_grad(holder: list, grad: torch.Tensor) -> None:
    # Holding a reference stops autograd from accumulating into the gradient in place.
    holder[0] = grad if holder[0] is None else holder[0] + grad


def format_bytes(n: float | None) -> str:
    """``1536`` -> ``"1.5 KiB"``: bytes for people (B, KiB, MiB, GiB); ``"?"`` for an unknown size."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
