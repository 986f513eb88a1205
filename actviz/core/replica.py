"""A copy of a model for a second capture thread, and whether it still matches the original.

Hooks are per-module state, so two captures cannot run on one model at once. On a small model
two single-threaded captures side by side (one on the model, one on a copy) get through more
frames than one capture on two threads: a capture's small ops parallelise poorly, and a
thread taken off a core by other work (painting a frame) stalls only its own capture instead
of its partner's at every parallel region. Live mode plays sequences that way
(:mod:`actviz.ui.live.controller`).

The copy is made with :func:`copy.deepcopy` while no capture runs on the original (its hooks
would be copied with it), and is used only while the original's parameters and buffers are the
same tensors, in the same memory, at the same version (:func:`weights_signature`): an in-place
change of a weight, new memory under a parameter or a module swapped makes it stale.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field

import torch
from torch import nn

from actviz.core.plan import model_plan

#: The largest model copied (parameters and buffers, bytes): a copy doubles the weights held.
MAX_REPLICA_BYTES = 512 * 2**20

__all__ = ["MAX_REPLICA_BYTES", "ModelReplica", "replica_refusal", "weights_signature"]


def weights_signature(model: nn.Module) -> tuple[tuple[int, int, int], ...]:
    """The identity, memory address and version counter of every parameter and buffer,
    module by module.

    Any in-place write (an optimiser step, ``load_state_dict``, ``fill_``) bumps a tensor's
    version; assigning a new tensor or module changes the identities; ``param.data = ...``
    and ``model.to(device)`` keep both but move the memory. Training flags are left
    out: a capture sets them for its own run and puts them back. The modules come from the
    capture's kept plan (:func:`~actviz.core.plan.model_plan`): ``model.parameters()`` walks
    the tree with a generator per module, ~1 ms on ResNet-18, and live mode asks once a frame.
    """
    _, modules = model_plan(model)
    return tuple(
        (id(t), t.data_ptr(), t._version)  # noqa: SLF001 - the version counter
        for module in modules
        for group in (module._parameters, module._buffers)  # noqa: SLF001
        for t in group.values()
        if t is not None
    )


def replica_refusal(model: nn.Module, max_bytes: int = MAX_REPLICA_BYTES) -> str | None:
    """Why ``model`` gets no copy (None: it may): not on the CPU, too large, or scripted."""
    if isinstance(model, torch.jit.ScriptModule):
        return "a TorchScript model is not copied"
    total = 0
    for t in (*model.parameters(), *model.buffers()):
        if t.device.type != "cpu":
            return "the model is not on the CPU"
        total += t.numel() * t.element_size()
    if total > max_bytes:
        return f"the model's weights take {total / 2**20:.0f} MiB"
    return None


@dataclass
class ModelReplica:
    """A deep copy of ``original``, made once by :meth:`build` on the thread that owns the
    original (no capture running on it), then read by another thread.

    Attributes
    ----------
    original
        The model copied.
    twin
        The copy, once built (None before, or when copying failed).
    failure
        Why the copy could not be made ("" when it was, or was not tried yet).
    """

    original: nn.Module = field(repr=False)
    twin: nn.Module | None = field(default=None, repr=False)
    failure: str = ""
    signature: tuple[tuple[int, int, int], ...] = field(default=(), repr=False)
    nbytes: int = 0  # the copy's parameters and buffers (0 until built)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def build(self) -> None:
        """Copy the model (once); a failure is kept in :attr:`failure`, never raised."""
        with self._lock:
            if self.twin is not None or self.failure:
                return
            try:
                signature = weights_signature(self.original)
                twin = copy.deepcopy(self.original)
            except Exception as exc:  # noqa: BLE001 - an uncopyable model plays on one lane
                self.failure = f"{type(exc).__name__}: {exc}"
                return
            self.signature = signature
            self.nbytes = sum(
                t.numel() * t.element_size() for t in (*twin.parameters(), *twin.buffers())
            )
            self.twin = twin

    def usable(self) -> bool:
        """Whether the copy is built and the original still has the weights it was made from."""
        return self.twin is not None and weights_signature(self.original) == self.signature
