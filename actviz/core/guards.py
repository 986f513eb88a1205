"""What keeps a capture free of side effects: model state saved and restored, and a temporary
global hook that notices modules which run without being registered in ``named_modules()``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["ModelState", "UnregisteredModules"]


class ModelState:
    """Training flags, ``inplace`` flags and buffers, saved before a capture, put back after.

    While a capture runs, torch.nn's in-place modules (``ReLU(inplace=True)``, ``Dropout``...)
    run out of place: the values are identical, and the tensor they would have overwritten (the
    previous layer's output, which a record holds) stays intact without a copy. A module that
    writes into its input some other way is still caught by the version checks of the recorder.
    """

    def __init__(
        self,
        model: nn.Module,
        out_of_place: bool = True,
        modules: list[nn.Module] | None = None,
    ):
        # ``modules``: model.modules() when the caller has walked the model already.
        modules = list(model.modules()) if modules is None else modules
        self.flags = [(m, m.training) for m in modules]
        self.inplace = [m for m in modules if out_of_place and _torch_inplace(m)]
        # Always copied back: kernels such as batch_norm update running statistics without
        # bumping the version counter, so "unchanged version" proves nothing.
        self.buffers: list[tuple[nn.Module, str, torch.Tensor, torch.Tensor]] = []
        with torch.no_grad():
            for mod in modules:
                for name, buf in mod._buffers.items():
                    if buf is not None and not buf.is_inference():
                        self.buffers.append((mod, name, buf, buf.detach().clone()))

    def apply(self, train: bool) -> None:
        """Put the model in the capture's state: ``train`` mode, in-place modules out of place."""
        # Only the flags that differ: Module.__setattr__ is slow, and most models are already
        # in the wanted mode.
        for mod, flag in self.flags:
            if flag != train:
                mod.training = train
        for mod in self.inplace:
            mod.inplace = False

    def restore(self) -> None:
        for mod, flag in self.flags:
            if mod.training != flag:  # also undoes a forward that switched modes itself
                mod.training = flag
        for mod in self.inplace:
            mod.inplace = True
        with torch.no_grad():
            for mod, name, buf, saved in self.buffers:
                if mod._buffers.get(name) is not buf:
                    mod._buffers[name] = buf  # the forward reassigned it
                buf.copy_(saved)


def _torch_inplace(module: nn.Module) -> bool:
    # Only torch.nn's own modules: there ``inplace`` is known to mean exactly this.
    return getattr(module, "inplace", None) is True and type(module).__module__.startswith(
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
