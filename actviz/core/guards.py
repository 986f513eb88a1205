"""What keeps a capture free of side effects: model state saved and restored, and a temporary
global hook that notices modules which run without being registered in ``named_modules()``."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["ModelState", "UnregisteredCheck", "UnregisteredModules"]

log = logging.getLogger(__name__)


class ModelState:
    """Training flags, ``inplace`` flags and buffers, saved before a capture, put back after.

    While a capture runs, torch.nn's in-place modules (``ReLU(inplace=True)``, ``Dropout``...)
    run out of place: the values are identical, and the tensor they would have overwritten (the
    previous layer's output, which a record holds) stays intact without a copy. Only those
    registered from ``inplace_from`` on (the first captured module) are switched: a module
    registered before every captured one hardly ever consumes a captured output, and running
    all of them out of place costs an allocation each (a few % of a one-layer capture). A
    module that writes into a held tensor anyway is caught by the recorder's version checks.

    Modes are switched with the model's own ``train()`` / ``eval()`` (a model may override
    them: timm's LeViT clears its attention-bias cache there) and put back the same way, module
    by module, so a model whose submodules were in mixed modes gets each flag back.
    TorchScript modules work the same way (their buffers live in an ``OrderedDictWrapper``).
    """

    def __init__(
        self,
        model: nn.Module,
        out_of_place: bool = True,
        modules: list[nn.Module] | None = None,
        inplace_from: int = 0,
    ):
        # ``modules``: model.modules() when the caller has walked the model already.
        modules = list(model.modules()) if modules is None else modules
        self.model = model
        self.flags = [(m, m.training) for m in modules]
        self.inplace = [m for m in modules[inplace_from:] if out_of_place and _torch_inplace(m)]
        # Always copied back: kernels such as batch_norm update running statistics without
        # bumping the version counter, so "unchanged version" proves nothing.
        self.buffers: list[tuple[nn.Module, str, torch.Tensor]] = []
        for mod in modules:
            if not mod._buffers:
                continue
            for name, buf in mod._buffers.items():
                if buf is not None and not buf.is_inference():
                    self.buffers.append((mod, name, buf))
        self.saved = _SavedBuffers.take(model, [buf for _mod, _name, buf in self.buffers])

    def apply(self, train: bool) -> None:
        """Put the model in the capture's state: ``train`` mode, in-place modules out of place."""
        # Most models are already in the wanted mode: then no train() call at all.
        if any(flag != train for _mod, flag in self.flags):
            _set_mode(self.model, train)
        for mod in self.inplace:
            mod.__dict__["inplace"] = False  # a plain attribute (see _torch_inplace)

    def restore(self) -> None:
        """Put flags and buffers back as they were when this state was saved."""
        # Pre-order: a parent's train() also switches its children, which are checked after it
        # (and switched back on their own where they differed from their parent).
        for mod, flag in self.flags:
            if mod.training != flag:  # also undoes a forward that switched modes itself
                _set_mode(mod, flag)
        for mod, flag in self.flags:  # a module shared by two parents may have moved again
            if mod.training != flag:
                mod.training = flag
        for mod in self.inplace:
            mod.__dict__["inplace"] = True
        for mod, name, buf in self.buffers:
            # ``in`` and ``[]``: TorchScript's buffer mapping has no ``get``.
            buffers = mod._buffers
            if name not in buffers or buffers[name] is not buf:
                buffers[name] = buf  # the forward reassigned it
        self.saved.put_back()


#: Buffer copies are kept per model for its next capture up to this size (most models hold a
#: few KiB of BatchNorm statistics); larger buffers are copied afresh each time.
KEEP_COPIES_BYTES = 64 * 2**20


class _SavedBuffers:
    """Copies of a model's buffers, taken before a capture and copied back after it.

    One ``torch._foreach_copy_`` each way: ResNet-18's 60 buffers cost ~10 us instead of
    ~400 us of separate clones and copies. The copies are kept (weakly, per model) and
    reused by its next capture while it holds the same buffer tensors with the same shapes
    and dtypes.
    """

    __slots__ = ("busy", "copies", "key", "tensors")

    def __init__(self, key: tuple[int, ...], tensors: list[torch.Tensor]) -> None:
        self.key = key
        self.tensors = tensors
        with torch.no_grad():
            self.copies = [t.detach().clone() for t in tensors]
        self.busy = True

    @classmethod
    def take(cls, model: nn.Module, tensors: list[torch.Tensor]) -> _SavedBuffers:
        key = tuple(map(id, tensors))
        try:
            kept = _KEPT.get(model)
        except TypeError:  # not weakly referenceable
            kept = None
        if kept is not None and not kept.busy and kept.key == key and _same_layout(kept, tensors):
            kept.tensors = tensors
            if tensors:  # foreach ops refuse an empty list
                with torch.no_grad():
                    torch._foreach_copy_(kept.copies, tensors)
            kept.busy = True
            return kept
        saved = cls(key, tensors)
        if sum(t.numel() * t.element_size() for t in tensors) <= KEEP_COPIES_BYTES:
            try:
                _KEPT[model] = saved
            except TypeError:
                pass
        return saved

    def put_back(self) -> None:
        try:
            if self.tensors:
                with torch.no_grad():
                    torch._foreach_copy_(self.tensors, self.copies)
        finally:
            self.busy = False


def _same_layout(kept: _SavedBuffers, tensors: list[torch.Tensor]) -> bool:
    # Same objects (the key) but possibly resized or given another dtype through ``.data``
    # (another device is fine: the copies go both ways).
    return all(
        c.dtype is t.dtype and c.shape == t.shape for c, t in zip(kept.copies, tensors, strict=True)
    )


_KEPT: weakref.WeakKeyDictionary[nn.Module, _SavedBuffers] = weakref.WeakKeyDictionary()


def _set_mode(module: nn.Module, train: bool) -> None:
    """``module.train(train)``: the model's own override runs; direct flags if it fails."""
    try:
        module.train(train)
    except Exception:  # an override with another signature: the flags at least are right
        log.debug("train(%s) failed on %s; setting flags directly", train, type(module).__name__)
        for mod in module.modules():
            mod.training = train


def _torch_inplace(module: nn.Module) -> bool:
    # Only torch.nn's own modules: there ``inplace`` is known to mean exactly this (a plain
    # attribute: reading __dict__ skips Module.__getattr__'s slow miss on every other module).
    return module.__dict__.get("inplace") is True and type(module).__module__.startswith(
        "torch.nn."
    )


class UnregisteredModules:
    """A temporary global hook that notices modules that run but are not in named_modules()."""

    def __init__(
        self,
        model: nn.Module,
        check_stop: Callable[[], None],
        modules: list[nn.Module] | None = None,
    ):
        self.model = model
        self.check_stop = check_stop
        self.thread = threading.get_ident()
        self.known = {id(m) for m in (model.modules() if modules is None else modules)}
        self.seen: dict[int, nn.Module] = {}
        self.handle = None

    def __enter__(self) -> UnregisteredModules:
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


#: Per model: the modules it had and what :class:`UnregisteredModules` found when it last
#: watched a forward. Weak, so models can be freed.
_CHECKED: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[int, ...], tuple[str, ...]]] = (
    weakref.WeakKeyDictionary()
)


class UnregisteredCheck:
    """:class:`UnregisteredModules` on a model's first capture only, the verdict reused after.

    A global module hook sends every module call through PyTorch's slow hook path: on
    ResNet-50 it alone cost ~5 % of a Grad-CAM capture. What it finds depends on how the model
    holds its modules, which does not change between captures, so the hook watches a model's
    first capture (and again whenever its set of modules changes, or when ``watch`` asks, e.g.
    a cancellable run that wants a stop check between modules); later captures report the same
    warnings without it. A forward that runs an unregistered module only for some inputs is
    reported when it first does so during a watched capture.
    """

    def __init__(
        self,
        model: nn.Module,
        check_stop: Callable[[], None],
        modules: list[nn.Module],
        watch: bool = False,
    ) -> None:
        self.model = model
        self.fingerprint = tuple(map(id, modules))
        cached = _CHECKED.get(model)
        self.watcher: UnregisteredModules | None = None
        self.cached: tuple[str, ...] = ()
        if watch or cached is None or cached[0] != self.fingerprint:
            self.watcher = UnregisteredModules(model, check_stop, modules)
        else:
            self.cached = cached[1]

    def __enter__(self) -> UnregisteredCheck:
        if self.watcher is not None:
            self.watcher.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.watcher is not None:
            self.watcher.__exit__(*exc)

    def warnings(self) -> list[str]:
        """The warnings of this capture (or of the watched one it reuses)."""
        if self.watcher is None:
            return list(self.cached)
        found = tuple(self.watcher.warnings())
        try:
            _CHECKED[self.model] = (self.fingerprint, found)
        except TypeError:  # a model that cannot be weakly referenced: watch every time
            pass
        return list(found)


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
