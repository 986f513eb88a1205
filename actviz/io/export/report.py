"""An HTML report of a run: one self-contained file anyone can open, without actviz or the model
(the export's PNGs, inline CSS, no script; its Content-Security-Policy forbids requests)."""

from __future__ import annotations

import base64
import dataclasses
import io
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from actviz.core.records import Capture
from actviz.core.structures import describe
from actviz.io.export import report_page
from actviz.io.export.capture_export import ProgressFn, prepare_export
from actviz.io.export.report_page import Page, esc, png_bytes
from actviz.io.export.reproduce import RunSource, beside_script, reproduce_script
from actviz.io.export.typeset import attribution_images, layer_pictures, safe_name
from actviz.io.files import atomic_write, check_out_file

log = logging.getLogger(__name__)
#: The largest input tensors the report carries for reproduce.py (bytes, before base64).
CARRIED_INPUT_BYTES = 32 * 2**20

__all__ = ["ReportInfo", "png_bytes", "write_report", "write_result_report"]


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote: ``path``, its size ``nbytes``, and ``panels``, the
    ``(id, title)`` of every embedded picture in page order (``"features:<layer>"``, ...)."""

    path: Path
    nbytes: int
    panels: tuple[tuple[str, str], ...]


def write_report(
    cap: Capture,
    path: str | os.PathLike[str],
    *,
    model_name: str = "",
    model: Any = None,
    input_name: str = "",
    layers: Sequence[str] | None = None,
    source: RunSource | None = None,
    baseline: Capture | None = None,
    comparison: Any = None,
    comparison_label: str = "",
    scan_sheets: Mapping[str, Image.Image | np.ndarray | bytes] | None = None,
    figures: Sequence[tuple[str, Image.Image | np.ndarray | bytes]] = (),
    title: str = "",
    notes: Sequence[str] = (),
    progress: ProgressFn | None = None,
    **display: Any,
) -> ReportInfo:
    """Write one self-contained HTML report of ``cap`` to ``path`` (atomically).

    Parameters
    ----------
    model_name, input_name, layers, source
        As :func:`~actviz.io.export.capture_export.export_capture` takes them.
    model
        An ``nn.Module`` or ``LoadedModel`` for the summary and sequence views.
    baseline
        The unedited capture of the same input (before/after predictions).
    comparison, comparison_label
        A :class:`~actviz.core.compare.Comparison` with another run, and which runs.
    scan_sheets
        ``{layer: contact sheet}`` of a dataset scan.
    figures
        Further ``(title, picture)`` pairs (channel effects, visualisations).
    notes
        Lines shown under the title.
    progress
        Called as ``progress(done, total, what)``.
    display
        ``image``, ``categories``, ``cmap``, ``normalize``, ``gradcam_layer``, ``tokens``,
        ``tokenizer``, ``layout``, ``token_saliency``: as
        :func:`~actviz.io.export.capture_export.prepare_export` takes them.
    """
    out = Path(path)
    report = progress or (lambda _done, _total, _what: None)
    names = list(layers) if layers is not None else list(cap.names)
    module = getattr(model, "model", model)
    torch_module = module if isinstance(module, torch.nn.Module) else None
    # The input gradient, for saliency, re-taken when missing and reproducible.
    missing = cap.gradients and cap.input_grads is None and cap.inputs is not None
    if torch_module is not None and missing:
        from actviz.core.capture import capture
        from actviz.core.targets import fixed_default

        # A one-row classifier's class is an int target, chosen or auto; else the run's default.
        target = cap.target_index if fixed_default(cap.output) is not None else None
        try:
            again = capture(torch_module, cap.inputs, [], target=target, edits=cap.edits or None)
        except Exception:  # noqa: BLE001 - the report goes on without a saliency
            log.debug("no input gradient for the report's saliency", exc_info=True)
            again = cap  # no input gradient either
        if again.input_grads is not None and again.target_index == cap.target_index:
            cap = dataclasses.replace(cap, input_grads=again.input_grads)
    cap, prepared = prepare_export(cap, names, model=torch_module, **display)
    spec = prepared.spec
    cmap, normalize, image, categories = spec.colormap, spec.normalize, spec.image, spec.categories
    total = len(names) + 2
    page = Page()
    report_page.model_summary(page, cap, module, names, model_name)
    for line in notes:
        page.add(f'<p class="warn">{esc(line)}</p>')

    page.section("input", "Input")
    page.add(f"<p>{esc(input_name or '–')}</p>")
    if image is not None:
        page.figure(
            "input", image, f"the input as the model sees it ({image.shape[1]}×{image.shape[0]})"
        )
    page.add(f'<p class="muted">input shapes: {esc(describe(cap.inputs))}</p>')

    report_page.prediction_section(page, prepared, cap, baseline, categories)

    report(0, total, "saliency and Grad-CAM")
    pictures, attribution = attribution_images(cap, prepared, image, spec.gradcam_layer)
    if pictures or attribution.get("gradcam_error"):
        page.section("attribution", "Saliency and Grad-CAM")
        captions = {
            "saliency": attribution.get("saliency_of", "saliency |d target / d input|"),
            "gradcam": f"Grad-CAM at {attribution.get('gradcam_layer')}",
            "rollout": "attention rollout",
        }
        for key, (picture, _values) in pictures.items():
            page.figure(key, picture, captions[key])
        if attribution.get("gradcam_error"):
            page.add(f'<p class="warn">Grad-CAM: {esc(attribution["gradcam_error"])}</p>')

    page.section("layers", f"Layers ({len(names)})")
    page.add(
        '<p class="muted">Activations (each tile its own colour scale unless stated) and '
        "|d target / d output| per layer, as <code>actviz export</code> draws them.</p>"
        if names
        else report_page.no_layers_text(cap)
    )
    for i, name in enumerate(names):
        report(i + 1, total, name)
        rec = cap[name]
        layer = prepared.layers.get(name)
        anchor = report_page.anchor_id("layer", name)
        page.sub(anchor, name or "(model)")
        t = rec.tensor
        shape = report_page.shape_text(tuple(t.shape)) if t is not None else "no tensor output"
        meta = f"{rec.module_type} · {shape}"
        page.add(
            f'<details id="{esc(anchor)}" open><summary>{esc(name or "(model)")} '
            f'<span class="meta">{esc(meta)}</span></summary>'
        )
        for kind, what in (("features", "activations"), ("grad", "|gradient|")):
            for suffix, picture in layer_pictures(name, kind, layer, rec.grad, cmap, normalize):
                if not suffix.endswith("_1x"):
                    page.figure(
                        f"{kind}:{name}{suffix}", picture, f"{name or '(model)'} {what}{suffix}"
                    )
        if layer is None or (layer.view is None and rec.grad is None):
            page.add('<p class="muted">Nothing to draw for this output.</p>')
        page.add("</details>")

    report_page.sequence_views(page, prepared, names)
    report_page.stats_table(page, prepared, names, cap)
    if comparison is not None:
        report_page.comparison_section(page, comparison, comparison_label)
    if scan_sheets:
        page.section("scan", "Dataset scan: top-k images")
        for layer_name, sheet in scan_sheets.items():
            page.figure(f"scan:{layer_name}", sheet, f"{layer_name}: top images per channel")
    if figures:
        page.section("figures", "Further views")
        for i, (caption, picture) in enumerate(figures):
            page.figure(f"figure:{i}", picture, caption)

    page.section("edits", "Edits")
    if cap.edits:
        rows = [(esc(k), esc(e.describe())) for k, edits in cap.edits.items() for e in edits]
        page.add(report_page.html_table(("layer", "edit"), rows, left=2))
    else:
        page.add('<p class="muted">No edits: the model as it is.</p>')
    page.section("reproduce", "reproduce.py")
    page.add(
        "<p>The script <code>actviz export</code> writes beside its arrays; it rebuilds this run "
        "with actviz's public API.</p>"
    )
    # The script export writes beside its arrays, under the same file names.
    saved = {key: name for key, name, _obj in beside_script(cap, source)}
    files = {name: f"{safe_name(name)}.npz" for name in names}
    page.add(f"<pre>{esc(reproduce_script(cap, source, names, files=files, saved=saved))}</pre>")
    if source is None or source.input is None:  # no file to reopen: the input travels here
        buf = io.BytesIO()
        try:
            torch.save(cap.inputs, buf)
        except Exception:  # noqa: BLE001 - an input torch cannot save: said, not carried
            buf = None
        if buf is None:
            page.add('<p class="warn">The input cannot be saved for reproduce.py.</p>')
        elif buf.tell() > CARRIED_INPUT_BYTES:
            page.add(
                '<p class="muted">The input is too large to carry here '
                f"({buf.tell() / 2**20:.0f} MiB): <code>actviz export</code> writes "
                "<code>reproduce_inputs.pt</code> beside the script.</p>"
            )
        else:
            data = base64.b64encode(buf.getvalue()).decode("ascii")
            page.add(
                '<p>The script reads the input from <a download="reproduce_inputs.pt" '
                f'href="data:application/octet-stream;base64,{data}">reproduce_inputs.pt</a>: '
                "save it beside the script.</p>"
            )

    report(total - 1, total, "writing")
    title = title or f"actviz report: {model_name or 'model'}"
    heads = (input_name, prepared.target_text or cap.target_description, f"{len(names)} layers")
    text = page.html(title, " · ".join(x for x in heads if x))
    check_out_file(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    report(total, total, "done")
    return ReportInfo(out, out.stat().st_size, tuple(page.panels))


def write_result_report(result: Any, path: str | os.PathLike[str], **kwargs: Any) -> ReportInfo:
    """:func:`write_report` of a :class:`~actviz.display.prepared.RunResult` as the window shows it,
    ``kwargs`` adding or overriding its arguments; ``ValueError`` for a result without capture."""
    if result.capture is None:
        raise ValueError("this result holds no capture to report")
    spec = result.spec
    names = ("categories", "normalize", "gradcam_layer", "tokens", "tokenizer", "layout")
    args: dict[str, Any] = {k: getattr(spec, k) for k in names} | {"cmap": spec.colormap}
    args |= {k: getattr(result, k) for k in ("image", "baseline", "token_saliency")}
    args["layers"] = [n for n in (result.shown or spec.layers) if n in result.capture]
    return write_report(result.capture, path, **args | kwargs)
