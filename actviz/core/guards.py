"""What keeps a capture free of side effects: model state saved and restored, and a temporary
global hook that notices modules which run without being registered in ``named_modules()``."""

from __future__ import annotations

import bisect
import contextlib
import logging
import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

log = logging.getLogger(__name__)
#: Buffer copies kept per model for its next capture up to this size; larger ones are made anew.
KEEP_COPIES_BYTES = 64 * 2**20
_data_ptr, _buffers_of = torch.Tensor.data_ptr, operator.attrgetter("_buffers")
_KEPT: weakref.WeakKeyDictionary[nn.Module, _SavedBuffers] = weakref.WeakKeyDictionary()
#: Per model (weakly): its modules and what :class:`UnregisteredCheck` last found.
_CHECKED: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[int, ...], tuple[str, ...]]] = (
    weakref.WeakKeyDictionary()
)
_MODEL_LOCKS: weakref.WeakKeyDictionary[nn.Module, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode for the duration; every module's training flag put back after."""
    flags = [(m, m.training) for m in model.modules()]
    try:
        model.eval()
        yield
    finally:
        for m, flag in flags:
            if m.training != flag:
                m.training = flag


@contextlib.contextmanager
def forward_hooks(modules: Iterable[nn.Module], hook: Callable[..., Any]) -> Iterator[None]:
    """``hook`` a forward hook of every module in ``modules`` for the duration."""
    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class ModelState:
    """Training flags, ``inplace`` flags and buffers, saved before a capture and put back after;
    ``out_of_place`` runs torch.nn's in-place modules from ``inplace_from`` on out of place."""

    def __init__(
        self,
        model: nn.Module,
        out_of_place: bool = True,
        modules: list[nn.Module] | None = None,
        inplace_from: int = 0,
        inplace_positions: list[int] | None = None,
    ):
        modules = list(model.modules()) if modules is None else modules
        self.model, self.modules = model, modules
        self.training = [m.training for m in modules]
        if not out_of_place:
            self.inplace: list[nn.Module] = []
        elif inplace_positions is None:
            self.inplace = [m for m in modules[inplace_from:] if _torch_inplace(m)]
        else:
            # Only modules in place at this moment are switched (and switched back).
            self.inplace = [
                modules[i]
                for i in inplace_positions[bisect.bisect_left(inplace_positions, inplace_from) :]
                if modules[i].__dict__.get("inplace") is True
            ]
        # (buffer mapping, name, tensor), always copied back: batch_norm bumps no version.
        self.buffers: list[tuple[Any, str, torch.Tensor]] = [
            (held, name, buf)
            for held in map(_buffers_of, modules)
            if held
            for name, buf in held.items()
            if buf is not None
        ]
        self.saved = _SavedBuffers.take(model, [entry[2] for entry in self.buffers])

    def apply(self, train: bool) -> None:
        """Put the model in the capture's state: ``train`` mode, in-place modules out of place."""
        # Most models are already in the wanted mode: then no train() call at all.
        if (not all(self.training)) if train else any(self.training):
            _set_mode(self.model, train)
        for mod in self.inplace:
            mod.__dict__["inplace"] = False  # a plain attribute (see _torch_inplace)

    def restore(self) -> None:
        """Put flags and buffers back as they were when this state was saved."""
        if [m.training for m in self.modules] != self.training:
            # Pre-order: a parent's train() switches its children, which are checked after it.
            for mod, flag in zip(self.modules, self.training, strict=True):
                if mod.training != flag:  # also undoes a forward that switched modes itself
                    _set_mode(mod, flag)
            for mod, flag in zip(self.modules, self.training, strict=True):
                if mod.training != flag:  # a module shared by two parents may have moved again
                    mod.training = flag
        for mod in self.inplace:
            mod.__dict__["inplace"] = True
        for buffers, name, buf in self.buffers:
            # ``in`` and ``[]``: TorchScript's buffer mapping has no ``get``.
            if name not in buffers or buffers[name] is not buf:
                buffers[name] = buf  # the forward reassigned it
        self.saved.put_back()


class _Group:
    """Contiguous buffers on one device, saved as one flat byte copy."""

    __slots__ = ("chunks", "members", "saved", "saved_bytes", "scratch", "views", "windows")

    def __init__(self, members: list[int], tensors: list[torch.Tensor]) -> None:
        self.members = members  # positions in the saved list of buffers
        # Flat byte views, made once: one concatenation per save instead of a copy per buffer.
        self.views = [tensors[i].detach().view(-1).view(torch.uint8) for i in members]
        self.windows: list[memoryview] | None = None
        self.saved_bytes = b""
        self.saved: torch.Tensor | None = None
        self.scratch: torch.Tensor | None = None
        self.chunks: list[torch.Tensor] = []
        if self.views[0].device.type == "cpu":
            self.windows = [memoryview(v.numpy()) for v in self.views]
        else:
            sizes = [v.numel() for v in self.views]
            self.saved = self.views[0].new_empty(sum(sizes))
            self.scratch = torch.empty_like(self.saved)
            self.chunks = list(self.saved.split(sizes))

    def save(self) -> None:
        if self.windows is not None:
            self.saved_bytes = b"".join(self.windows)
        else:
            with torch.no_grad():
                torch.cat(self.views, out=self.saved)

    def put_back(self) -> None:
        if self.windows is not None:
            if b"".join(self.windows) != self.saved_bytes:
                # (numpy: no autograd to keep out of the way)
                flat = np.frombuffer(self.saved_bytes, dtype=np.uint8)
                start = 0
                for window in self.windows:
                    end = start + window.nbytes
                    np.copyto(np.asarray(window), flat[start:end])
                    start = end
        else:
            with torch.no_grad():
                torch.cat(self.views, out=self.scratch)
                if not torch.equal(self.scratch, self.saved):
                    torch._foreach_copy_(self.views, self.chunks)

    def restore_into(self, tensors: list[torch.Tensor]) -> None:
        """Write the saved bytes into ``tensors`` (this group's buffers, whose memory moved)."""
        if self.windows is not None:
            flat = torch.frombuffer(bytearray(self.saved_bytes), dtype=torch.uint8)
            chunks = flat.split([w.nbytes for w in self.windows])
        else:
            chunks = self.chunks
        for i, chunk in zip(self.members, chunks, strict=True):
            t = tensors[i]
            saved = chunk.clone().view(t.dtype)  # (a copy starts aligned for any dtype)
            t.copy_(saved.view(t.shape) if t.numel() == saved.numel() else saved)


class _SavedBuffers:
    """A model's buffers, saved before a capture (one byte join if contiguous), put back after."""

    __slots__ = ("busy", "groups", "key", "loose", "ptrs", "tensors")

    def __init__(self, tensors: list[torch.Tensor]) -> None:
        self.key = tuple(map(id, tensors))
        tensors = [t for t in tensors if not t.is_inference()]
        self.tensors = tensors
        try:  # where each tensor's memory starts; None if one has no single address (sparse)
            self.ptrs: list[int] | None = [t.data_ptr() for t in tensors]
        except RuntimeError:
            self.ptrs = None
        grouped: dict[torch.device, list[int]] = {}
        loose: list[torch.Tensor] = []
        for i, t in enumerate(tensors):
            dense = t.layout is torch.strided and not t.is_quantized and t.is_contiguous()
            if self.ptrs is not None and dense and t.device.type != "meta":
                grouped.setdefault(t.device, []).append(i)
            else:
                loose.append(t)
        with torch.no_grad():
            self.groups = [_Group(members, tensors) for members in grouped.values()]
            self.loose = [(t, t.detach().clone()) for t in loose]
        self.busy = False

    @classmethod
    def take(cls, model: nn.Module, tensors: list[torch.Tensor]) -> _SavedBuffers:
        """The saved state of ``tensors`` (``model``'s buffers) now."""
        kept = None
        with contextlib.suppress(TypeError):  # not weakly referenceable
            kept = _KEPT.get(model)
        if (
            kept is None
            or kept.busy  # a capture of this model under way (another thread, a hook)
            or kept.key != tuple(map(id, tensors))
            or kept.ptrs is None
            # New memory has a new address; a shrink in place leaves the views a little wider.
            or list(map(_data_ptr, kept.tensors)) != kept.ptrs
        ):
            kept = cls(tensors)
            if 2 * sum(t.numel() * t.element_size() for t in tensors) <= KEEP_COPIES_BYTES:
                with contextlib.suppress(TypeError):  # not weakly referenceable
                    _KEPT[model] = kept
        kept.save()
        return kept

    def save(self) -> None:
        self.busy = True
        for group in self.groups:
            group.save()
        if self.loose:
            with torch.no_grad():
                for t, copy in self.loose:
                    copy.copy_(t)

    def put_back(self) -> None:
        """Write back every saved buffer whose value changed since :meth:`save`."""
        try:
            if self.ptrs is not None and list(map(_data_ptr, self.tensors)) == self.ptrs:
                for group in self.groups:
                    group.put_back()
            else:  # the forward gave a buffer new memory (``.data =``, ``set_``, resize)
                self.ptrs = None  # not reused
                with torch.no_grad():
                    for group in self.groups:
                        group.restore_into(self.tensors)
            if self.loose:
                with torch.no_grad():
                    for t, copy in self.loose:
                        t.copy_(copy)
        finally:
            self.busy = False


def _set_mode(module: nn.Module, train: bool) -> None:
    """``module.train(train)``: the model's own override runs; direct flags if it fails."""
    try:
        module.train(train)
    except Exception:  # an override with another signature: the flags at least are right
        log.debug("train(%s) failed on %s; setting flags directly", train, type(module).__name__)
        for mod in module.modules():
            mod.training = train


def _torch_inplace(module: nn.Module) -> bool:
    # Only torch.nn's own modules, where ``inplace`` means exactly this (read from __dict__).
    torch_nn = type(module).__module__.startswith("torch.nn.")
    return module.__dict__.get("inplace") is True and torch_nn


class UnregisteredCheck:
    """A temporary global hook that notices modules that run but are not in named_modules(),
    on a model's first capture only (the hook is slow) or when its modules change."""

    def __init__(
        self,
        model: nn.Module,
        check_stop: Callable[[], None],
        modules: list[nn.Module],
        watch: bool = False,
        fingerprint: object = None,
    ) -> None:
        # ``fingerprint`` stands for the module set (a kept ModelPlan); by default their ids.
        self.model, self.check_stop = model, check_stop
        self.fingerprint = tuple(map(id, modules)) if fingerprint is None else fingerprint
        cached = _CHECKED.get(model)
        self.watching = watch or cached is None or cached[0] != self.fingerprint
        self.cached: tuple[str, ...] = () if self.watching else cached[1]
        self.thread = threading.get_ident()
        self.known = {id(m) for m in modules} if self.watching else set()
        self.seen: dict[int, nn.Module] = {}
        self.handle = None

    def __enter__(self) -> UnregisteredCheck:
        if self.watching:
            self.handle = nn.modules.module.register_module_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            self.handle.remove()

    def _hook(self, module: nn.Module, args: tuple) -> None:
        # Global hooks see every thread's modules: only ours count.
        if threading.get_ident() != self.thread:
            return
        self.check_stop()
        if id(module) not in self.known and id(module) not in self.seen:
            self.seen[id(module)] = module

    def warnings(self) -> list[str]:
        """The warnings of this capture (or of the watched one it reuses)."""
        if not self.watching:
            return list(self.cached)
        seen = self.seen.values()
        inside = [m for o in seen for m in o.modules() if m is not o]  # nested in another seen
        roots = [m for m in seen if not any(m is i for i in inside)]
        found = tuple(
            f"{type(mod).__name__} ran during forward but is not registered in "
            f"named_modules(){_find_holder(self.model, mod)}, so it cannot be hooked or "
            "ticked; store it in nn.ModuleList / nn.ModuleDict (or as an attribute) to see it"
            for mod in roots
        )
        with contextlib.suppress(TypeError):  # not weakly referenceable: watch every time
            _CHECKED[self.model] = (self.fingerprint, found)
        return list(found)


def _find_holder(model: nn.Module, target: nn.Module) -> str:
    for owner_name, owner in model.named_modules():
        for attr, value in vars(owner).items():
            if attr.startswith("_") or not isinstance(value, (list, tuple, dict)):
                continue
            mapping = isinstance(value, dict)
            for key, v in value.items() if mapping else enumerate(value):
                if v is target:
                    label = f"{attr}[{key!r}]" if mapping else f"{attr}[{key}]"
                    kind = "dict" if mapping else type(value).__name__
                    prefix = f"{owner_name}." if owner_name else f"{type(model).__name__}."
                    return f" (held in {prefix}{label}, a plain {kind})"
    return ""


def model_lock(model: nn.Module) -> Any:
    """The lock one model's captures take in turn (re-entrant, for a capture inside a hook)."""
    try:
        with _LOCKS_GUARD:
            if (lock := _MODEL_LOCKS.get(model)) is None:
                lock = _MODEL_LOCKS[model] = threading.RLock()
            return lock
    except TypeError:  # not weak-referenceable: nothing shares it
        return contextlib.nullcontext()
