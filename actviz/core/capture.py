"""Exact activations and gradients from any ``nn.Module``, leaving the model as it was found.

Records are references checked against version counters after the forward (copies for modules
written to later); gradients come from tensor hooks and one ``autograd.grad`` (never
``register_full_backward_hook``, which breaks on in-place ops); every hook is removed and
flags and buffers restored in ``finally``."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from actviz.core import pool
from actviz.core.allocator import tune_if_asked
from actviz.core.edit_kinds import EditError, EditHooks, check_edits, enabled_edits, normalize_edits
from actviz.core.guards import ModelState, UnregisteredCheck, model_lock
from actviz.core.input_copies import PreparedInputs, prepare_inputs
from actviz.core.recorder import NEEDS_COPY, NEEDS_GRAD_HOOK, Recorder, Retry
from actviz.core.recorder import format_bytes as format_bytes
from actviz.core.records import INFERENCE_WEIGHTS_WARNING, Capture, LayerRecord
from actviz.core.records import CaptureCancelled as CaptureCancelled
from actviz.core.records import CaptureTooLarge as CaptureTooLarge
from actviz.core.structures import iter_tensors, map_leaves, map_tensors
from actviz.core.targets import resolve_target, target_numbers
from actviz.core.tree import _resolve, model_plan
from actviz.core.tree import leaf_names as leaf_names
from actviz.core.tree import resolve_layers as resolve_layers

log = logging.getLogger(__name__)
_MAX_ATTEMPTS = 3
#: Records go to the host in one transfer per device and dtype (:func:`to_host`); CUDA buffers
#: cross through a page-locked staging buffer of this size (bytes)...
STAGING_BYTES = 32 << 20
#: ... unless smaller than this: they go straight to pageable memory (staging would not pay).
DIRECT_BYTES = 1 << 20
#: A TorchScript model's warning, at capture and at opening (one sentence: shown once).
TORCHSCRIPT_WARNING = (
    "TorchScript model: its layers run inside the compiled graph, so layer hooks cannot fire; "
    "only the model output and input gradients are available"
)
_MISSING = object()
_NULL = contextlib.nullcontext()
_RECORD_PARTS = ("inputs", "output", "grad_output", "grad_inputs")


def capture(
    model: nn.Module,
    inputs: Any,
    layers: Sequence[str] | str | None = None,
    *,
    target: Any = None,
    gradients: bool = True,
    input_grads: bool = True,
    mode: str = "eval",
    keep_inputs: bool = True,
    max_bytes: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    keep_on_device: bool = False,
    edits: Any = None,
) -> Capture:
    """Run ``model`` on ``inputs`` and record the chosen layers' values and gradients.

    The model is left exactly as found (hooks, ``.grad``, flags, buffers), even when it raises.

    Parameters
    ----------
    inputs
        A tensor, a tuple/list (positional arguments) or a dict (keyword arguments), nesting
        lists, tuples and dicts at any depth; a list of tensors is one argument when the forward
        takes a list (:func:`actviz.core.input_copies.forward_takes_list`). Tensors are copied,
        never modified.
    layers
        Names from ``model.named_modules()``; None records every leaf module.
    target
        What the gradients are of (:func:`actviz.core.targets.resolve_target`): None for the
        output's default (top-1 logit, top detection, top segmentation class, or the sum), an
        int class or detection, or a callable ``f(output) -> scalar tensor``.
    gradients
        False runs forward only, under ``no_grad``.
    input_grads
        False: no gradient with respect to inputs (``cap.input_grads`` and ``grad_inputs`` None),
        so the backward stops at the earliest recorded output.
    mode
        ``"eval"`` (default) or ``"train"``.
    keep_inputs
        Record each layer's inputs too (shared with the producing layer's output when possible).
    max_bytes
        Raise ``CaptureTooLarge`` once the records would exceed this many bytes.
    should_stop
        Polled before every module call; True raises ``CaptureCancelled``.
    keep_on_device
        Leave the records on the model's device; ``cap.output`` and ``cap.input_grads`` are on
        the CPU either way.
    edits
        ``{layer: edit or [edits]}`` (:mod:`actviz.edits`) applied during the forward pass; the
        whole capture is the edited network's. ``cap.edits`` holds those applied.

    Raises
    ------
    ValueError
        Unknown layers, a bad target or ``mode``; ``EditError`` for an edit that cannot apply.
    CaptureCancelled, CaptureTooLarge
        See ``should_stop`` and ``max_bytes``. The model's own exceptions propagate unchanged."""
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', not {mode!r}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    notes: list[str] = []  # warnings found before the forward
    # torch.compile's wrapper holds the original as a child (TorchScript's mapping has no get).
    children = model._modules
    compiled = "_orig_mod" in children and isinstance(children["_orig_mod"], nn.Module)
    if compiled:
        # torch.compile traces submodules away, so their hooks would never fire.
        model = model._orig_mod
        notes.append(
            "torch.compile'd model: actviz runs its original eager module (same weights) so "
            "that layer hooks fire"
        )
        if layers is not None:
            given = [layers] if isinstance(layers, str) else layers
            layers = [n.removeprefix("_orig_mod.") for n in given]
    plan, module_list = model_plan(model)
    names = _resolve(plan.index, plan.leaf_names, layers, type(model).__name__)
    applied: dict = {}
    if edits is not None:
        applied = enabled_edits(normalize_edits(edits))
        if compiled:  # the compiled model's names, as for ``layers``
            applied = {n.removeprefix("_orig_mod."): e for n, e in applied.items()}
        if applied and isinstance(model, torch.jit.ScriptModule):
            raise EditError(
                "a TorchScript model runs its layers inside the compiled graph, where edits "
                "(layer hooks) cannot reach them"
            )
        if applied:
            check_edits(dict(zip(plan.names, module_list, strict=True)), applied)
    input_grads = gradients and input_grads

    def attempt(copy_all: bool) -> Capture:
        """One try at the capture; ``Retry`` when in-place writes call for copies."""
        warnings = list(notes)
        device = model_device(model, module_list)
        index = plan.index
        by_module = {module_list[index[n]]: n for n in names}
        recorder = Recorder(
            by_module, gradients, keep_inputs, max_bytes, should_stop, input_grads=input_grads
        )
        recorder.copy_all = copy_all
        # Forward-only: with gradients autograd keeps the activations alive anyway.
        recorder.pool = pooled = not gradients and bool(names) and pool.wanted(model)
        watch_faults = not gradients and not pooled and bool(names)
        scripted = isinstance(model, torch.jit.ScriptModule)
        # In-place modules run out of place from the first recorded one on.
        first = min((index[n] for n in names), default=len(module_list))
        state = ModelState(
            model, modules=module_list, inplace_from=first, inplace_positions=plan.inplace
        )
        handles: list[Any] = []
        editor: EditHooks | None = None
        prepared = prepare_inputs(inputs, model=model, gradients=input_grads, device=device)
        for given, kept in prepared.pairs:
            recorder.register_input(given, kept)
        try:
            state.apply(train=mode == "train")
            if scripted:
                warnings.append(TORCHSCRIPT_WARNING)
            else:
                if applied:
                    # Before the recorder's hooks: records hold the edited outputs.
                    editor = EditHooks(dict(zip(plan.names, module_list, strict=True)), applied)
                    handles.extend(editor.register())
                edited = editor.edited if editor is not None else {}
                hooks = nn.modules.module  # global hooks that see a module's output: no wrapping
                global_hooks = bool(
                    hooks._global_forward_hooks
                    or hooks._global_backward_hooks
                    or hooks._global_backward_pre_hooks
                )
                for module in by_module:
                    if not global_hooks and module not in edited and _wrappable(module):
                        handles.append(_ForwardWrapper(module, recorder))
                    else:
                        handles.append(module.register_forward_pre_hook(recorder.pre_hook))
                        handles.append(module.register_forward_hook(recorder.forward_hook))
            # A cancellable run keeps the global hook for its stop check between every module.
            unregistered = UnregisteredCheck(
                model,
                recorder.check_stop,
                module_list,
                watch=should_stop is not None,
                fingerprint=plan if plan.kept else None,
            )
            # capture() has left any inference mode already.
            faults = pool.minor_faults() if watch_faults else 0
            with torch.set_grad_enabled(gradients), unregistered:
                output = model(*prepared.args, **prepared.kwargs)
            if watch_faults:
                pool.observe(model, pool.minor_faults() - faults, recorder.nbytes, recorder.records)
            stale, unhooked = recorder.stale_owners(), recorder.unhooked_changed()
            if stale or unhooked or recorder.retry_needed:
                NEEDS_COPY.update(stale)
                NEEDS_GRAD_HOOK.update(unhooked)
                raise Retry()
            # The hooks must not stay registered during backward or while results are built.
            for h in handles:
                h.remove()
            handles.clear()

            target_value: float | None = None
            target_index: int | None = None
            description = "no gradients requested"
            saliency: Any = None
            if gradients:
                with torch.enable_grad():
                    resolved = resolve_target(output, target)
                    target_value = float(resolved.value.detach())
                    target_index, description = resolved.index, resolved.description
                    if resolved.warning:
                        warnings.append(resolved.warning)
                    saliency = _backward(resolved.value, prepared, recorder, warnings)
                if not input_grads:
                    saliency = None
            elif target is not None:  # a callable runs now, while the caller expects it to
                target_value, target_index, description = target_numbers(output, target)
            warnings.extend(unregistered.warnings())
            if editor is not None:
                warnings.extend(editor.warnings())
            for name in names:
                if name not in recorder.records and not scripted:
                    warnings.append(
                        f"layer {name!r} never ran during this forward pass, so nothing was recorded"
                    )
            out_cpu = map_tensors(output, _host)
            records = recorder.records
            if records and not keep_on_device and device is not None and device.type != "cpu":
                records = _to_cpu(recorder)
            for w in warnings:
                log.info("capture warning: %s", w)
            result = Capture(
                names=list(recorder.order),
                records=records,
                output=out_cpu,
                input_grads=saliency,
                target_value=target_value,
                target_index=target_index,
                target_description=description,
                warnings=warnings,
                inputs=map_tensors(prepared.copies, _host),
                nbytes=recorder.nbytes,
                elapsed_s=time.perf_counter() - start,
                gradients=gradients,
                mode=mode,
                edits=dict(applied) if applied else {},
            )
            if not gradients and target is None:
                # Without gradients the default target is resolved from the output on first read.
                result.defer_target(functools.partial(target_numbers, out_cpu))
            return result
        finally:
            for h in handles:
                h.remove()
            state.restore()
            pool.POOL.capture_done()

    tune_if_asked()  # the process-wide allocator change is opt-in (core/allocator.py)
    start = time.perf_counter()
    # Hooks are per-module state: two captures of one model at once would take each other's.
    with model_lock(model):
        attempt_no = 0
        while attempt_no < _MAX_ATTEMPTS:
            try:
                # Under a caller's inference_mode, tensors made here could not join autograd.
                with torch.inference_mode(False) if torch.is_inference_mode_enabled() else _NULL:
                    return attempt(attempt_no == _MAX_ATTEMPTS - 1)
            except Retry:
                # An in-place write after a hook: the modules responsible now get copies.
                log.debug("capture attempt %d saw in-place writes; capturing again", attempt_no + 1)
                attempt_no += 1
            except RuntimeError as exc:
                # Weights made in inference_mode never join autograd: forward only, and a warning.
                refused = "Inference tensors cannot be saved for backward" in str(exc)
                if not gradients or not refused:
                    raise
                gradients = input_grads = False
                notes.append(INFERENCE_WEIGHTS_WARNING)
    raise AssertionError("unreachable")  # pragma: no cover


def model_device(model: nn.Module, modules: list[nn.Module] | None = None) -> torch.device | None:
    """The device of the first parameter (else buffer) in ``modules`` (default: the model's);
    for a model placed by accelerate, its top hook's execution device."""
    if getattr(model, "hf_device_map", None):
        hook = getattr(model, "_hf_hook", None)
        if (where := getattr(hook, "execution_device", None)) is None:
            where = next(
                (d for d in model.hf_device_map.values() if d not in ("disk", "meta")), "cpu"
            )
        return torch.device(f"cuda:{where}" if isinstance(where, int) else where)
    modules = list(model.modules()) if modules is None else modules
    for attr in ("_parameters", "_buffers"):
        for mod in modules:
            for tensor in getattr(mod, attr).values():
                if tensor is not None:
                    return tensor.device
    return None


def _wrappable(module: nn.Module) -> bool:
    """Whether the recorder may wrap ``module.forward`` (the fast path) instead of two hooks."""
    d = module.__dict__  # dictionary lookups: cheaper than attribute lookups on a Module
    try:
        hooked = d["_forward_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"]
        compiled = d.get("_compiled_call_impl")
    except KeyError:  # hook dictionaries kept elsewhere than Module.__init__ puts them
        hooked = module._forward_hooks or module._backward_hooks or module._backward_pre_hooks
        compiled = getattr(module, "_compiled_call_impl", None)
    return not hooked and compiled is None


class _ForwardWrapper:
    """``module.forward`` replaced by a call through the recorder, removed like a hook handle."""

    __slots__ = ("module", "own")

    def __init__(self, module: nn.Module, recorder: Recorder) -> None:
        self.module = module
        self.own = module.__dict__.get("forward", _MISSING)
        # A partial of a bound method: no Python frame between PyTorch's call and the recorder.
        module.__dict__["forward"] = functools.partial(recorder.call, module, module.forward)

    def remove(self) -> None:
        if self.module is None:
            return
        if self.own is _MISSING:
            self.module.__dict__.pop("forward", None)
        else:
            self.module.__dict__["forward"] = self.own
        self.module = None


def _backward(
    scalar: torch.Tensor, prepared: PreparedInputs, recorder: Recorder, warnings: list[str]
) -> Any:
    leaves = [leaf for leaf in prepared.leaves if leaf is not None]
    # Ask for the leaves and every recorded tensor still at its recorded version, so every
    # hooked node runs; tensors changed in place since have hooks (Recorder.unhooked_changed).
    requested = list(leaves)
    where = {id(t): i for i, t in enumerate(requested)}
    fill: list[tuple[list, int | None]] = []  # (slot, index in requested) of unhooked tensors
    for t, version, holder, module in recorder.grad_requests:
        if t._version != version:
            continue
        index = where.get(id(t))
        if index is None and t.requires_grad:
            index = where[id(t)] = len(requested)
            requested.append(t)
        if module is not None:  # no hook: the slot gets autograd.grad's result
            fill.append((holder, index))
    grads: Sequence[torch.Tensor | None] = [None] * len(requested)
    if not scalar.requires_grad:
        warnings.append(
            "the target does not depend on any input or recorded layer, so there are no gradients"
        )
    elif requested:
        grads = torch.autograd.grad(scalar, requested, allow_unused=True)
    for holder, index in fill:
        holder[0] = None if index is None else grads[index]
    leaf_grads = dict(zip((id(t) for t in leaves), grads[: len(leaves)], strict=True))
    for rec, out_slots, in_slots in recorder.pending:
        if isinstance(rec.output, torch.Tensor):  # one slot
            rec.grad_output = _detach(out_slots[0][0])
        else:
            out_grads = iter([h[0] for h in out_slots])
            rec.grad_output = map_tensors(rec.output, lambda _t, g=out_grads: _detach(next(g)))
        if in_slots is not None:
            rec.grad_inputs = tuple([None if h is None else _detach(h[0]) for h in in_slots])
    # The input gradients, in the caller's structure (None for what is not a tensor).
    ordered = iter([None if x is None else _detach(leaf_grads.get(id(x))) for x in prepared.leaves])
    return map_leaves(prepared.copies, lambda x: next(ordered) if torch.is_tensor(x) else None)


def _host(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached, on the CPU; ``t`` itself when it already is (no op dispatched)."""
    return t if t.is_cpu and not t.requires_grad else t.detach().cpu()


def _detach(t: torch.Tensor | None) -> torch.Tensor | None:
    # Gradients without create_graph are already outside any graph: no new tensor object.
    return t.detach() if t is not None and t.requires_grad else t


def _to_cpu(recorder: Recorder) -> dict[str, list[LayerRecord]]:
    recs = [rec for recs in recorder.records.values() for rec in recs]
    host = to_host(
        t for rec in recs for part in _RECORD_PARTS for t in iter_tensors(getattr(rec, part))
    )
    for rec in recs if host else ():
        for part in _RECORD_PARTS:  # tuples stay tuples
            setattr(rec, part, map_tensors(getattr(rec, part), lambda t: host.get(id(t), t)))
    return recorder.records


def to_host(tensors: Iterable[torch.Tensor]) -> dict[int, torch.Tensor]:
    """``id(device tensor) -> contiguous CPU copy`` for the tensors not on the CPU."""
    groups: dict[tuple[torch.device, torch.dtype], dict[int, torch.Tensor]] = {}
    for t in tensors:
        if t.device.type != "cpu":
            groups.setdefault((t.device, t.dtype), {}).setdefault(id(t), t)
    out: dict[int, torch.Tensor] = {}
    for group in groups.values():
        items = list(group.items())
        if len(items) == 1:
            key, t = items[0]
            out[key] = t.detach().cpu()
            continue
        flat = torch.cat([t.detach().reshape(-1) for _, t in items])
        host = _copy_flat(flat)
        del flat  # the device buffer goes before the next group's is made
        for (key, t), piece in zip(items, host.split([t.numel() for _, t in items]), strict=True):
            out[key] = piece.view(t.shape)
    return out


def _copy_flat(flat: torch.Tensor) -> torch.Tensor:
    """A 1-D device tensor on the host, through a page-locked staging buffer from CUDA."""
    n = flat.numel()
    if flat.device.type != "cuda" or n * flat.element_size() <= DIRECT_BYTES:
        return flat.cpu()
    host = torch.empty(n, dtype=flat.dtype)
    chunk = max(1, STAGING_BYTES // flat.element_size())
    stage = torch.empty(min(chunk, n), dtype=flat.dtype, pin_memory=True)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        stage[:k].copy_(flat[start : start + k])  # synchronous: the chunk is on the host after
        host[start : start + k].copy_(stage[:k])
    return host
