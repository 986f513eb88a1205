"""Private copies of a model, so a job on another thread (live lane, scan, synthesis, concept
job) has hooks of its own: without a running capture's hooks and wrappers or the window's
edits, sharing offloaded weight maps, stale once the original's weights change."""

from __future__ import annotations

import copy
import dataclasses
import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from actviz.core.guards import model_lock
from actviz.core.tree import model_plan

#: The largest model copied for a live lane (parameters and buffers, bytes).
MAX_COPY_BYTES = 512 * 2**20
_UNWRAPPED = object()  # stands in for a capture's forward wrapper while copying
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def weights_signature(model: nn.Module) -> tuple[tuple[int, int, int], ...]:
    """The identity, memory address and version counter of every parameter and buffer: what
    in-place writes, new tensors, ``param.data = ...`` and ``.to(device)`` change."""
    _, modules = model_plan(model)
    # One flat comprehension (no nested generator): asked on the GUI thread for live frames.
    groups = [g for m in modules for g in (m._parameters, m._buffers) if g]  # noqa: SLF001
    flat = [(id(t), t.data_ptr(), t._version) for g in groups for t in g.values() if t is not None]
    return tuple(flat)


def model_bytes(model: nn.Module) -> int:
    """Bytes of ``model``'s parameters and buffers (what a copy of it costs at most)."""
    total = 0
    for t in (*model.parameters(), *model.buffers()):
        try:
            total += t.numel() * t.element_size()
        except (RuntimeError, ValueError):  # a lazy module's parameter has no size yet
            continue
    return total


def copy_refusal(model: nn.Module, max_bytes: int = MAX_COPY_BYTES) -> str | None:
    """Why ``model`` gets no live-lane copy (None: it may): scripted, off the CPU or too large."""
    if isinstance(model, torch.jit.ScriptModule):
        return "a TorchScript model is not copied"
    if any(t.device.type != "cpu" for t in (*model.parameters(), *model.buffers())):
        return "the model is not on the CPU"
    total = model_bytes(model)
    return f"the model's weights take {total / 2**20:.0f} MiB" if total > max_bytes else None


def _is_transient(hook: Any) -> bool:
    """Whether ``hook`` belongs to an actviz capture running now (removed when it ends)."""
    owner = getattr(hook, "__self__", None)
    where = type(owner).__module__ if owner is not None else getattr(hook, "__module__", "")
    return str(where or "").startswith("actviz.")


def private_copy(model: nn.Module, *, to_eval: bool = False) -> nn.Module:
    """A deep copy of ``model`` for another thread (see the module docstring); raises what
    :func:`copy.deepcopy` raises. Waits for a running capture, which wraps ``forward``."""
    with model_lock(model):
        return _copy(model, to_eval)


def _copy(model: nn.Module, to_eval: bool) -> nn.Module:
    memo: dict[int, Any] = {}
    wrapped: list[tuple[nn.Module, Any]] = []  # modules whose forward a capture wraps now
    for module in model.modules():
        forward = module.__dict__.get("forward")
        if isinstance(forward, functools.partial) and _is_transient(forward.func):
            # ``partial(recorder.call, module, forward before)``: the copy gets the latter.
            memo[id(forward)] = _UNWRAPPED
            wrapped.append((module, forward.args[1]))
        for attr in _HOOK_DICTS:
            if isinstance(hooks := getattr(module, attr, None), dict):
                # Copying the dictionary would copy a running capture's recorder with it.
                kept = OrderedDict((k, h) for k, h in list(hooks.items()) if not _is_transient(h))
                memo[id(hooks)] = kept
        hf_hook = getattr(module, "_hf_hook", None)
        for hook in getattr(hf_hook, "hooks", (hf_hook,)):
            if (weights := getattr(hook, "weights_map", None)) is not None:  # shared: read-only
                memo[id(weights)] = weights
    twin = copy.deepcopy(model, memo)
    for module, before in wrapped:
        mine = memo[id(module)]
        if getattr(before, "__self__", None) is module and before.__func__ is type(module).forward:
            mine.__dict__.pop("forward", None)  # the class's own forward
        else:
            mine.__dict__["forward"] = copy.deepcopy(before, memo)
    if to_eval:
        twin.eval()
    return twin


def with_loading(twin: Any, original: Any, loaded: Any) -> Any:
    """``loaded`` with ``twin`` in place of ``original``; ``twin`` alone for another model's."""
    if loaded is not None and getattr(loaded, "model", None) is original:
        return dataclasses.replace(loaded, model=twin)
    return twin


@dataclass
class ModelCopy:
    """A copy ``twin`` of ``original``, made once by :meth:`build` (any thread) and used while
    :meth:`usable`; ``error`` and ``failure`` say why it could not be made."""

    original: nn.Module = field(repr=False)
    to_eval: bool = False
    twin: nn.Module | None = field(default=None, repr=False)
    error: BaseException | None = field(default=None, repr=False)
    failure: str = ""
    signature: tuple[tuple[int, int, int], ...] = field(default=(), repr=False)
    nbytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def build(self) -> None:
        """Copy the model (once); a failure is kept in :attr:`error`, never raised."""
        with self._lock:
            if self.twin is not None or self.error is not None:
                return
            try:
                signature = weights_signature(self.original)
                twin = private_copy(self.original, to_eval=self.to_eval)
            except Exception as exc:  # noqa: BLE001 - the caller says why, or runs without
                self.error, self.failure = exc, f"{type(exc).__name__}: {exc}"
                return
            self.signature, self.nbytes, self.twin = signature, model_bytes(twin), twin

    def usable(self) -> bool:
        """Whether the copy is built and the original still has the weights it was made from."""
        return self.twin is not None and weights_signature(self.original) == self.signature
