"""``reproduce.py``: a short script in every export that rebuilds the run with the public API
and saves the same ``.npz`` arrays. What a name cannot rebuild (source-less inputs, random
weights, a patch source) is saved beside it; an unimportable custom edit becomes one that raises."""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actviz.core.edit_kinds import Edit
from actviz.core.records import Capture, LayerRecord

SCRIPT_NAME = "reproduce.py"  #: The file name of the script in an export folder.
#: An edit's values besides its kind and channels (None: not set), as files record them.
EDIT_VALUES = ("factor", "min", "max", "call", "dim")
_EDITS_IMPORT = (
    "from actviz.edits import Edit, ablate, clamp, custom, keep, patch, scale  # noqa: F401"
)


@dataclass(frozen=True)
class RunSource:
    """How a run's model and input were opened, so the script can open them again: ``model`` and
    ``arch``/``weights``/``trust``/``device`` as :func:`open_model` took them (None: unknown);
    ``input`` and ``list_input`` as :func:`actviz.load_input` took them (None: tensors saved);
    ``target`` an int, str or None; ``state`` the weights to save when they cannot be reopened."""

    model: str | None = None
    arch: str | None = None
    weights: str | None = "DEFAULT"
    trust: bool = False
    device: str = "cpu"
    input: str | None = None
    list_input: bool | None = None
    target: Any = None
    state: Mapping[str, torch.Tensor] | None = field(default=None, repr=False, compare=False)


def edit_fields(edit: Edit) -> dict[str, Any]:
    """``edit`` as files record it: kind, channels (a list; None: all) and the values it sets."""
    channels = None if edit.channels is None else list(edit.channels)
    values = {n: getattr(edit, n) for n in EDIT_VALUES if getattr(edit, n) is not None}
    return {"kind": edit.kind, "channels": channels, **values}


def run_source(loaded: Any, input: str | None, **options: Any) -> RunSource:
    """The :class:`RunSource` of a model opened with :func:`actviz.io.models.loading.open_model`
    (``loaded``) and of ``input``; ``options`` its other fields (``arch``, ``weights``, ``trust``,
    ``device``, ``list_input``, ``target``). Its weights are kept when a new open would give other
    ones (random init: a torchvision name without weights, model code)."""
    random = loaded.kind == "code" or (
        loaded.kind == "torchvision" and "random init" in str(loaded.name)
    )
    return RunSource(
        # a module handed over in Python has no source to reopen
        model=None if loaded.kind == "module" else str(loaded.source),
        input=input,
        state=loaded.model.state_dict() if random else None,
        **options,
    )


def args_source(loaded: Any, args: Any, input: str | None, target: Any = None) -> RunSource:
    """:func:`run_source` with the ``actviz`` command's model options (``args``)."""
    weights = None if str(args.weights).lower() in ("none", "random") else args.weights
    options = {k: getattr(args, k) for k in ("arch", "trust", "device", "list_input")}
    return run_source(loaded, input, weights=weights, target=target, **options)


def absolute_source(text: str | None, *, paths: bool = True) -> str | None:
    """``text`` found from the working folder made absolute, so it opens from any folder: a
    ``mynet.py:MyNet`` reference's file and (``paths``) a file or folder; names as given."""
    from actviz.io.models.loading import parse_code_ref

    ref = None if text is None else parse_code_ref(text)
    head = text if ref is None and paths else ref.target if ref and ref.is_file else None
    if head is None or not Path(head).exists():
        return text
    return text.replace(head, str(Path(head).resolve()), 1)


def record_arrays(recs: Sequence[LayerRecord]) -> dict[str, np.ndarray]:
    """A layer's calls' arrays as its exported ``.npz`` holds them (copied into the script)."""
    arrays: dict[str, np.ndarray] = {}
    for rec in recs:
        prefix = "" if len(recs) == 1 else f"call{rec.call_index}_"
        if (t := rec.tensor) is not None:
            arrays[f"{prefix}output"] = (t.float() if t.is_floating_point() else t).numpy()
        if rec.grad is not None:
            arrays[f"{prefix}grad_output"] = rec.grad.float().numpy()
        for i, g in enumerate(rec.grad_inputs or ()):
            if g is not None:
                arrays[f"{prefix}grad_input{i}"] = g.float().numpy()
    return arrays


def _edit_code(edit: Edit, source_var: str | None, fn_var: str | None) -> str:
    opts = "" if edit.call is None else f", call={edit.call}"
    channels = None if edit.channels is None else list(edit.channels)
    if edit.dim is not None or not edit.enabled:
        fields = [f"{edit.kind!r}", f"channels={edit.channels!r}"]
        fields += [f"{n}={getattr(edit, n)!r}" for n in EDIT_VALUES if getattr(edit, n) is not None]
        if edit.kind == "patch":
            fields.append(f"source={source_var}")
        if edit.kind == "custom":
            fields.append(f"fn={fn_var}")
        return f"Edit({', '.join(fields)})"
    if edit.kind in ("ablate", "keep"):
        return f"{edit.kind}({channels!r}{opts})"
    if edit.kind == "scale":
        return f"scale({channels!r}, {edit.factor!r}{opts})"
    if edit.kind == "clamp":
        ch = "" if channels is None else f", channels={channels!r}"
        return f"clamp({edit.min!r}, {edit.max!r}{ch}{opts})"
    if edit.kind == "patch":
        ch = "" if channels is None else f", {channels!r}"
        return f"patch({source_var}{ch}{opts})"
    return f"custom({fn_var}{opts})"


def _importable(fn: Any) -> tuple[str, str] | None:
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or not name or "<" in name or "." in name:
        return None
    with contextlib.suppress(ImportError):
        if getattr(importlib.import_module(module), name, None) is fn:
            return module, name
    return None


def _open_lines(
    source: RunSource,
    saved: Mapping[str, str],
    notes: list[str],
    tag: str = "",
    same_model_as: str | None = None,
) -> list[str]:
    """Lines opening ``loaded{tag}``, ``model{tag}`` and input ``x{tag}``."""
    lines: list[str] = []
    model_var, loaded_var, x_var = f"model{tag}", f"loaded{tag}", f"x{tag}"
    if same_model_as is not None:
        lines.append(f"{loaded_var}, {model_var} = loaded{same_model_as}, model{same_model_as}")
    else:
        if source.model is None:
            notes.append(f"the source of {model_var} is unknown (a module made in Python)")
            lines.append(
                'raise SystemExit("reproduce.py: the model was not opened from a name or file; '
                'write how to open it below")'
            )
        lines += [
            f"{loaded_var} = open_model({absolute_source(source.model)!r}, "
            f"arch={absolute_source(source.arch)!r}, weights={source.weights!r}, "
            f"trust={source.trust!r}, device={source.device!r})",
            f"{model_var} = {loaded_var}.model",
        ]
    if same_model_as is None and f"weights{tag}" in saved:
        name = saved[f"weights{tag}"]
        notes.append(f"{model_var} had random weights: they are loaded from {name}")
        lines.append(f"{model_var}.load_state_dict(torch.load(HERE / {name!r}, weights_only=True))")
    if f"inputs{tag}" in saved:
        lines.append(f"{x_var} = torch.load(HERE / {saved[f'inputs{tag}']!r}, weights_only=True)")
    else:
        lines.append(
            f"{x_var} = actviz.load_input({absolute_source(source.input)!r}, "
            f"loaded_model={loaded_var}, as_list={source.list_input!r})"
        )
    return lines


def _script(
    head: list[str], notes: list[str], notes_title: str, body: list[str], *, edits: bool
) -> str:
    """A script's text: docstring (``head``, how to run it, ``notes``), imports, OUT, ``body``."""
    head = [*head[:2], "", "    python reproduce.py [OUT]", "", *head[2:]]
    if notes:
        head = [*head, "", notes_title] + [f"- {n}" for n in notes]
    imports = [
        *(["from __future__ import annotations", ""] if edits else ["import json"]),
        "import sys",
        "from pathlib import Path",
        "",
        *(["import numpy as np"] if edits else []),
        "import torch",
        "",
        "import actviz",
        *([_EDITS_IMPORT] if edits else []),
        "from actviz.io.models.loading import open_model",
        "",
        "HERE = Path(__file__).resolve().parent",
        'OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "reproduced"',
        "",
    ]
    return "\n".join([*head, '"""', "", *imports, *body]) + "\n"


def reproduce_script(
    cap: Capture,
    source: RunSource | None,
    layers: Sequence[str],
    *,
    files: Mapping[str, str],
    saved: Mapping[str, str] | None = None,
) -> str:
    """The text of ``reproduce.py`` for ``cap`` (its edits, gradients and mode rebuilt); ``files``
    is ``{layer: npz name}`` as exported; ``saved`` maps ``"inputs"``, ``"weights"``,
    ``"patch<i>"`` to what :func:`write_reproduce` saved beside the script."""
    source = source or RunSource()
    saved = dict(saved or {})
    notes: list[str] = []
    head = [
        '"""Rebuild the run exported in this folder with actviz\'s public API and save the same',
        "per-layer arrays (<layer>.npz) into OUT (default: ./reproduced beside this script).",
        f"Model: {source.model or '(unknown)'}   Input: {source.input or '(saved tensors)'}",
    ]
    lines = [*_open_lines(source, saved, notes), ""]
    edit_lines: list[str] = []
    fn_defs: list[str] = []
    patch_index = custom_index = 0
    for layer, items in cap.edits.items():
        codes = []
        for edit in items:
            source_var = fn_var = None
            if edit.kind == "patch":
                src = edit.source
                assert src is not None
                source_var = f"patch_source{patch_index}"
                key = f"patch{patch_index}"
                patch_index += 1
                if src.edits:
                    notes.append(f"{source_var} had edits of its own, not rebuilt here")
                lines += [
                    f"# {source_var}: the run {layer!r} is patched from, captured again from its "
                    "input with this model (a source from another checkpoint cannot be rebuilt)",
                    f"{source_var} = actviz.capture(model, torch.load(HERE / {saved[key]!r}, "
                    f"weights_only=True), {[layer]!r}, gradients=False, mode={src.mode!r})",
                ]
            if edit.kind == "custom":
                fn_var = f"custom_fn{custom_index}"
                custom_index += 1
                if (where := _importable(edit.fn)) is not None:
                    lines.append(f"from {where[0]} import {where[1]} as {fn_var}")
                else:
                    name = getattr(edit.fn, "__name__", type(edit.fn).__name__)
                    notes.append(f"the custom edit {name!r} on {layer!r} is Python code: define it")
                    fn_defs += [
                        "",
                        f"def {fn_var}(output):",
                        f"    # the custom edit {name!r} on {layer!r} was a callable defined in "
                        "Python: write it here",
                        f"    raise NotImplementedError({f'define the custom edit {name!r}'!r})",
                    ]
            codes.append(_edit_code(edit, source_var, fn_var))
        edit_lines.append(f"    {layer!r}: [{', '.join(codes)}],")
    lines += [*fn_defs, ""] if fn_defs else []
    lines += ["edits = {", *edit_lines, "}"]
    input_grads = not (cap.gradients and cap.input_grads is None)
    target = source.target
    if target is not None and not isinstance(target, (int, str)):
        notes.append("the target was a Python callable: the default target is used instead")
        target = None
    lines += [
        f"LAYERS = {list(layers)!r}",
        "cap = actviz.capture(",
        "    model,",
        "    x,",
        "    LAYERS,",
        f"    target={target!r},",
        f"    gradients={cap.gradients!r},",
        f"    input_grads={input_grads!r},",
        f"    mode={cap.mode!r},",
        "    edits=edits,",
        ")",
        "",
        "",
        *inspect.getsource(record_arrays).splitlines(),
        "",
        "",
        f"FILES = {dict(files)!r}",
        "OUT.mkdir(parents=True, exist_ok=True)",
        "for name in LAYERS:",
        "    if arrays := record_arrays(cap.calls(name)):",
        "        np.savez_compressed(OUT / FILES[name], **arrays)",
        'print(f"wrote {len(LAYERS)} layers\' arrays to {OUT}")',
    ]
    return _script(head, notes, "Not rebuilt exactly:", lines, edits=True)


def beside_script(cap: Capture, source: RunSource | None) -> list[tuple[str, str, Any]]:
    """``(key, file name, object)`` of what ``reproduce.py`` loads from beside it: inputs without
    a source, weights that cannot be reopened, the inputs of patch sources."""
    saved = []
    if source is None or source.input is None:
        saved.append(("inputs", "reproduce_inputs.pt", cap.inputs))
    if source is not None and source.state is not None:
        saved.append(("weights", "reproduce_weights.pt", dict(source.state)))
    patches = [e for items in cap.edits.values() for e in items if e.kind == "patch"]
    for index, edit in enumerate(patches):
        assert edit.source is not None
        saved.append((f"patch{index}", f"reproduce_patch{index}.pt", edit.source.inputs))
    return saved


def write_reproduce(
    out_dir: str | Path,
    cap: Capture,
    source: RunSource | None,
    layers: Sequence[str],
    files: Mapping[str, str],
) -> list[Path]:
    """Write ``reproduce.py`` (and what it loads) into ``out_dir``; returns the files."""
    out = Path(out_dir)
    saved = beside_script(cap, source)
    for _key, name, obj in saved:
        torch.save(obj, out / name)
    names = {key: name for key, name, _obj in saved}
    (out / SCRIPT_NAME).write_text(reproduce_script(cap, source, layers, files=files, saved=names))
    return [*(out / name for name in names.values()), out / SCRIPT_NAME]


def write_compare_reproduce(
    out_dir: str | Path,
    source_a: RunSource,
    source_b: RunSource,
    layers: Sequence[str] | None,
    tol: float,
) -> list[Path]:
    """Write the ``reproduce.py`` of a comparison (and the random weights it loads): both runs,
    then :func:`actviz.compare`, written as ``OUT/compare.json`` (``Comparison.to_dict()``)."""
    out = Path(out_dir)
    saved: dict[str, str] = {}
    for tag, source in (("_a", source_a), ("_b", source_b)):
        if source.state is not None and not (tag == "_b" and source.state is source_a.state):
            saved[f"weights{tag}"] = f"reproduce_weights{tag}.pt"
            torch.save(dict(source.state), out / saved[f"weights{tag}"])
    notes: list[str] = []
    same = source_b.model == source_a.model and source_b.state is source_a.state
    body = _open_lines(source_a, saved, notes, "_a")
    body += _open_lines(source_b, saved, notes, "_b", same_model_as="_a" if same else None)
    body += [
        "",
        f"LAYERS = {None if layers is None else list(layers)!r}",
        "cap_a = actviz.capture(model_a, x_a, LAYERS, gradients=False, keep_inputs=False)",
        "cap_b = actviz.capture(model_b, x_b, LAYERS, gradients=False, keep_inputs=False)",
        f"comparison = actviz.compare(cap_a, cap_b, tol={float(tol)!r})",
        "OUT.mkdir(parents=True, exist_ok=True)",
        '(OUT / "compare.json").write_text(json.dumps(comparison.to_dict(), indent=2))',
        "first = comparison.first_divergence",
        'print("first divergence:", None if first is None else first.name)',
    ]
    head = [
        '"""Rebuild the two runs compared in this folder with actviz\'s public API and write',
        "their comparison into OUT/compare.json (default: ./reproduced beside this script).",
        f"Run A: {source_a.model} on {source_a.input}",
        f"Run B: {source_b.model} on {source_b.input}",
    ]
    (out / SCRIPT_NAME).write_text(_script(head, notes, "Notes:", body, edits=False))
    return [*(out / name for name in saved.values()), out / SCRIPT_NAME]
