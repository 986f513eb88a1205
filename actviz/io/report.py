"""An HTML report of a run: one self-contained file anyone can open, without actviz or the model.

The report holds the model summary, the input, the prediction (before and after edits), every
layer's activation and |gradient| panels with their colour bars, saliency and Grad-CAM, the
statistics table, a comparison with another run, scan top-k sheets, further figures (channel
effects, visualisations), the edit list and the ``reproduce.py`` text. Every picture is the one
``actviz export`` writes, made by the same functions (:func:`actviz.io.export.layer_page_images`,
:func:`actviz.io.export.attribution_images`), so its pixels are the export's and the window's.

The file needs nothing else: pictures are embedded PNGs (``data:`` URIs), the CSS is inline,
there is no script, and a Content-Security-Policy forbids any network request. Layers are
collapsible (``<details>``) and a table of contents links every section. No Qt here.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import logging
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from actviz.core.records import Capture
from actviz.display import colormaps
from actviz.io.export import attribution_images, layer_page_images, prepare_export, safe_name
from actviz.io.files import atomic_write, check_out_file
from actviz.io.reproduce import RunSource, reproduce_script

log = logging.getLogger(__name__)

__all__ = ["ReportInfo", "png_bytes", "write_report", "write_result_report"]

ProgressFn = Callable[[int, int, str], None]

_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1e1e1e;
  background: #f6f6f4; margin: 0; }
header { background: #20303c; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; } header p { margin: 4px 0 0; color: #cfd8de; }
.page { display: flex; align-items: flex-start; }
nav { position: sticky; top: 0; max-height: 100vh; overflow-y: auto; width: 230px;
  flex: none; padding: 12px 10px 12px 18px; box-sizing: border-box; font-size: 13px; }
nav ol { padding-left: 18px; margin: 4px 0; } nav a { color: #20557a; text-decoration: none; }
main { flex: 1; min-width: 0; max-width: 1280px; padding: 8px 24px 40px 12px; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 10px 16px;
  margin: 12px 0; }
h2 { font-size: 17px; margin: 4px 0 10px; }
details { border-top: 1px solid #eee; padding: 6px 0; }
summary { cursor: pointer; font-weight: 600; } summary .meta { font-weight: 400; color: #666; }
figure { margin: 8px 0; display: inline-block; vertical-align: top; max-width: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
figcaption { font-size: 12px; color: #666; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 3px 8px; text-align: right; }
th { background: #f0f0ee; position: sticky; top: 0; }
td.l, th.l { text-align: left; } tr.hit td { background: #fff4d6; }
.bar { display: inline-block; height: 10px; background: #4a7fb0; vertical-align: middle; }
pre { background: #f4f4f2; padding: 10px; overflow-x: auto; font-size: 12px; max-height: 420px; }
.warn { color: #9a3a12; } .muted { color: #777; }
@media (max-width: 900px) { .page { display: block; } nav { position: static; width: auto; } }
"""

#: Only embedded pictures and the inline style: a browser makes no request for this page.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote.

    Attributes
    ----------
    path
        The HTML file.
    nbytes
        Its size in bytes.
    panels
        ``(id, title)`` of every embedded picture, in page order (``"features:<layer>"``,
        ``"grad:<layer>"``, ``"saliency"``, ``"gradcam"``, ``"input"``, ...).
    """

    path: Path
    nbytes: int
    panels: tuple[tuple[str, str], ...]


def png_bytes(picture: Image.Image | np.ndarray) -> bytes:
    """A picture (PIL image or ``(H, W[, 3])`` uint8 array) as PNG bytes (lossless: the
    decoded pixels are the picture's)."""
    if isinstance(picture, np.ndarray):
        picture = Image.fromarray(np.ascontiguousarray(picture))
    buf = io.BytesIO()
    picture.save(buf, format="PNG")
    return buf.getvalue()


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _num(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    try:
        f = float(v)
    except (TypeError, ValueError):
        return _e(v)
    if not math.isfinite(f):
        return str(f)
    return f"{f:.4g}" if abs(f) < 1e5 else f"{f:.3e}"


class _Page:
    """The report's body as it is built: sections, the table of contents, the panels."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.toc: list[tuple[str, str, list[tuple[str, str]]]] = []
        self.panels: list[tuple[str, str]] = []

    def section(self, anchor: str, title: str) -> None:
        if self.toc:
            self.parts.append("</section>")
        self.toc.append((anchor, title, []))
        self.parts.append(f'<section id="{_e(anchor)}"><h2>{_e(title)}</h2>')

    def sub(self, anchor: str, title: str) -> None:
        self.toc[-1][2].append((anchor, title))

    def add(self, text: str) -> None:
        self.parts.append(text)

    def figure(self, panel: str, picture: Image.Image | np.ndarray | bytes, caption: str) -> None:
        data = picture if isinstance(picture, bytes) else png_bytes(picture)
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        self.panels.append((panel, caption))
        self.parts.append(
            f'<figure><img src="{uri}" alt="{_e(caption)}" data-panel="{_e(panel)}" '
            f"><figcaption>{_e(caption)}</figcaption></figure>"
        )

    def html(self, title: str, subtitle: str) -> str:
        toc = []
        for anchor, name, subs in self.toc:
            inner = ""
            if subs:
                inner = (
                    "<ol>"
                    + "".join(f'<li><a href="#{_e(a)}">{_e(n)}</a></li>' for a, n in subs)
                    + "</ol>"
                )
            toc.append(f'<li><a href="#{_e(anchor)}">{_e(name)}</a>{inner}</li>')
        body = "".join(self.parts) + ("</section>" if self.toc else "")
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>{_e(title)}</h1><p>{_e(subtitle)}</p></header>"
            f'<div class="page"><nav><strong>Contents</strong><ol>{"".join(toc)}</ol></nav>'
            f"<main>{body}</main></div></body></html>\n"
        )


def _table(
    head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1, hits: Sequence[bool] = ()
) -> str:
    """An HTML table; the first ``left`` columns left-aligned; cells are HTML already."""
    th = "".join(
        f'<th class="l">{h}</th>' if i < left else f"<th>{h}</th>" for i, h in enumerate(head)
    )
    body = []
    for r, row in enumerate(rows):
        cls = ' class="hit"' if r < len(hits) and hits[r] else ""
        tds = "".join(
            f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{tds}</tr>")
    thead = f"<thead><tr>{th}</tr></thead>" if any(head) else ""  # a key/value table has none
    return f"<table>{thead}<tbody>{''.join(body)}</tbody></table>"


def _anchor(kind: str, name: str) -> str:
    return f"{kind}-{safe_name(name)}"


def _shape(t: Any) -> str:
    return "×".join(str(s) for s in t) if t else "–"


def _model_summary(
    page: _Page, cap: Capture, model: Any, names: Sequence[str], model_name: str
) -> None:
    page.section("model", "Model")
    module = getattr(model, "model", model)  # a LoadedModel or the module
    rows = [
        ("name", _e(model_name or (type(module).__name__ if module is not None else "(unknown)")))
    ]
    if isinstance(module, torch.nn.Module):
        params = list(module.parameters())
        total = sum(p.numel() for p in params)
        trainable = sum(p.numel() for p in params if p.requires_grad)
        dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
        rows += [
            ("class", _e(type(module).__name__)),
            ("parameters", f"{total:,} ({trainable:,} trainable)"),
            ("modules", str(sum(1 for _ in module.named_modules()))),
            ("dtypes", _e(", ".join(dtypes) or "–")),
        ]
    rows += [
        ("captured layers", str(len(cap.names))),
        ("mode", _e(cap.mode)),
        ("capture time", f"{cap.elapsed_s * 1000:.1f} ms"),
    ]
    page.add(_table(("", ""), rows))
    shapes = []
    for name in names:
        rec = cap[name]
        t = rec.tensor
        shapes.append(
            (
                f'<a href="#{_e(_anchor("layer", name))}">{_e(name or "(model)")}</a>',
                _e(rec.module_type),
                _shape(tuple(t.shape)) if t is not None else "–",
                str(len(cap.calls(name))),
            )
        )
    if shapes:
        page.add(_table(("layer", "type", "output", "calls"), shapes, left=2))
    if cap.warnings:
        page.add("".join(f'<p class="warn">{_e(w)}</p>' for w in cap.warnings))


def _class_name(index: int | None, categories: Sequence[str] | None) -> str:
    """``"cat (2)"`` when ``categories`` names class ``index``, else ``"2"``."""
    if index is not None and categories and 0 <= index < len(categories):
        return f"{categories[index]} ({index})"
    return str(index)


def _predictions(
    page: _Page,
    prepared: Any,
    cap: Capture,
    baseline: Capture | None,
    categories: Sequence[str] | None,
) -> None:
    page.section("prediction", "Prediction")
    page.add(
        # The window's sentence: the class or token named ("top-1 logit (class 2): cat").
        f"<p>Target: {_e(prepared.target_text or cap.target_description or '–')}"
        + (f" (value {_num(cap.target_value)})" if cap.target_value is not None else "")
        + "</p>"
    )
    if baseline is not None:
        from actviz.display.difference import prediction_change

        change = prediction_change(
            cap.output, baseline.output, categories=categories, target=cap.target_index
        )
        if change.rows:
            page.add("<p>With the edits (after) and without them (before):</p>")
            rows = [
                (
                    _e(r.name),
                    str(r.index),
                    f"{r.p_b:.4f}",
                    f"{r.p_a:.4f}",
                    f"{r.dp:+.4f}",
                    f"{r.dlogit:+.4g}",
                )
                for r in change.rows
            ]
            hits = [r.index == cap.target_index for r in change.rows]
            page.add(
                _table(
                    ("class", "index", "p before", "p after", "Δp", "Δlogit"),
                    rows,
                    left=1,
                    hits=hits,
                )
            )
            if change.changed:
                before, after = (_class_name(i, categories) for i in (change.top_b, change.top_a))
                page.add(f'<p class="warn">The top class changed: {_e(before)} → {_e(after)}.</p>')
            return
        page.add(f'<p class="muted">{_e(change.message)}</p>')
    if prepared.predictions:
        rows = [
            (
                _e(label),
                str(i),
                f"{p:.4f}",
                f'<span class="bar" style="width:{max(1, int(p * 200))}px"></span>',
            )
            for i, label, p in prepared.predictions
        ]
        page.add(_table(("class", "index", "probability", ""), rows, left=1))
    else:
        page.add('<p class="muted">The output is not a classifier\'s: no class probabilities.</p>')


def _sequence_views(page: _Page, prepared: Any, names: Sequence[str]) -> None:
    """Token maps, attention maps and the logit lens: the pictures export writes (its own
    writer, into a temporary folder), and the lens table as text."""
    from actviz.io.token_export import write_sequence_views

    with tempfile.TemporaryDirectory(prefix="actviz-report-") as tmp:
        files, _summary = write_sequence_views(prepared, Path(tmp), names)
        pictures = [f for f in files if f.suffix == ".png"]
        lens = next((f for f in files if f.name == "logit_lens.json"), None)
        if not pictures and lens is None:
            return
        page.section("sequence", "Tokens and attention")
        for png in pictures:
            page.figure(f"sequence:{png.stem}", png.read_bytes(), png.stem.replace("_", " "))
        if lens is not None:
            page.add("<details><summary>Logit lens (logit_lens.json)</summary>")
            page.add(f"<pre>{_e(lens.read_text())}</pre></details>")


def _no_layers_text(cap: Capture) -> str:
    """Why a report shows no layer: the capture's own reason (TorchScript) when it has one."""
    why = f": {cap.warnings[0]}" if cap.warnings else " (none was ticked or given)"
    return f'<p class="muted">No layer was captured{_e(why)}.</p>'


def _stats_table(page: _Page, prepared: Any, names: Sequence[str], cap: Capture) -> None:
    page.section("statistics", "Statistics")
    if not names:
        page.add(_no_layers_text(cap))
        return
    rows = []
    for name in names:
        layer = prepared.layers.get(name)
        if layer is None:
            continue
        s = layer.stats
        rows.append(
            (
                f'<a href="#{_e(_anchor("layer", name))}">{_e(name or "(model)")}</a>',
                _e(layer.module_type),
                _shape(s.get("shape")),
                *(_num(s.get(k)) for k in ("mean", "std", "min", "max")),
                _num(s.get("zero_frac")),
                _num(s.get("nan", 0) + s.get("inf", 0) if "nan" in s else None),
                _num(s.get("grad_norm")),
            )
        )
    page.add(
        _table(
            ("layer", "type", "shape", "mean", "std", "min", "max", "zeros", "NaN/Inf", "|grad|"),
            rows,
            left=2,
        )
    )


def _comparison(page: _Page, comparison: Any, label: str) -> None:
    page.section("comparison", "Comparison")
    page.add(
        f"<p>{_e(label)} Relative L2 distance |a − b| / |b| per layer call "
        f"(tolerance {comparison.tol:g}); the first layer above it is highlighted.</p>"
    )
    diffs = list(comparison.layers) + ([comparison.output] if comparison.output is not None else [])
    finite = [d.rel_l2 for d in diffs if math.isfinite(d.rel_l2)]
    top = max(finite) if finite else 1.0
    first = comparison.first_divergence
    rows, hits = [], []
    for d in diffs:
        width = int(300 * d.rel_l2 / top) if top > 0 and math.isfinite(d.rel_l2) else 0
        name = d.name or "(model)"
        if d is comparison.output:
            name = "output"
        rows.append(
            (
                _e(name),
                str(d.call_index),
                _num(d.rel_l2),
                _num(d.cosine),
                _num(d.max_abs),
                f'<span class="bar" style="width:{max(width, 1)}px"></span>',
            )
        )
        hits.append(first is not None and d is first)
    page.add(
        _table(("layer", "call", "rel. L2", "cosine", "max |a−b|", ""), rows, left=1, hits=hits)
    )
    for name, call, why in comparison.skipped:
        page.add(f'<p class="muted">{_e(name)} (call {call}) not compared: {_e(why)}</p>')


def _reproduce_text(cap: Capture, source: RunSource | None, names: Sequence[str]) -> str:
    # The script export writes beside its arrays, under the same file names.
    saved: dict[str, str] = {}
    if source is None or source.input is None:
        saved["inputs"] = "reproduce_inputs.pt"
    if source is not None and source.state is not None:
        saved["weights"] = "reproduce_weights.pt"
    index = 0
    for items in cap.edits.values():
        for edit in items:
            if edit.kind == "patch":
                saved[f"patch{index}"] = f"reproduce_patch{index}.pt"
                index += 1
    files = {name: f"{safe_name(name)}.npz" for name in names}
    return reproduce_script(cap, source, names, files=files, saved=saved)


def write_report(
    cap: Capture,
    path: str | os.PathLike[str],
    *,
    image: np.ndarray | None = None,
    categories: Sequence[str] | None = None,
    model_name: str = "",
    model: Any = None,
    input_name: str = "",
    cmap: str = colormaps.DEFAULT_ACTIVATION_CMAP,
    normalize: str = "channel",
    gradcam_layer: str | None = None,
    layers: Sequence[str] | None = None,
    source: RunSource | None = None,
    baseline: Capture | None = None,
    comparison: Any = None,
    comparison_label: str = "",
    scan_sheets: Mapping[str, Image.Image | np.ndarray | bytes] | None = None,
    figures: Sequence[tuple[str, Image.Image | np.ndarray | bytes]] = (),
    tokens: Sequence[str] | None = None,
    tokenizer: Any = None,
    layout: Any = None,
    token_saliency: Any = None,
    title: str = "",
    notes: Sequence[str] = (),
    progress: ProgressFn | None = None,
) -> ReportInfo:
    """Write one self-contained HTML report of ``cap`` to ``path``.

    Parameters
    ----------
    cap
        The capture (its edits are listed; with ``baseline`` the prediction is shown before
        and after them).
    path
        The ``.html`` file (written atomically).
    image, categories, model_name, input_name, cmap, normalize, gradcam_layer, layers, source
        As :func:`actviz.io.export.export_capture` takes them: the same pictures result.
    model
        The model (an ``nn.Module`` or a ``LoadedModel``) for the summary (parameters,
        dtypes) and for sequence views; None: the summary comes from the capture.
    baseline
        The unedited capture of the same input (the window's before/after).
    comparison, comparison_label
        A :class:`actviz.core.compare.Comparison` of this run with another (its chart), and a
        sentence saying which runs.
    scan_sheets
        ``{layer: contact sheet}`` of a dataset scan's top-k images
        (:func:`actviz.data.sheet.contact_sheet`).
    figures
        Further ``(title, picture)`` pairs shown at the time: channel effects,
        visualisations.
    tokens, tokenizer, layout, token_saliency
        A text input's tokens, its tokenizer, a ViT's patch layout and a text input's saliency
        per token computed already (as export takes them).
    title
        The page title (default: "actviz report: <model>").
    notes
        Lines shown under the title (e.g. a session's warnings).
    progress
        Called as ``progress(done, total, what)``.

    Returns
    -------
    ReportInfo
        The file, its size and the panels embedded.
    """
    out = Path(path)
    names = list(layers) if layers is not None else list(cap.names)
    module = getattr(model, "model", model)
    if isinstance(module, torch.nn.Module):
        cap = _with_input_gradient(cap, module)
    cap, prepared = prepare_export(
        cap,
        names,
        image=image,
        categories=categories,
        cmap=cmap,
        normalize=normalize,
        gradcam_layer=gradcam_layer,
        tokens=tokens,
        model=module if isinstance(module, torch.nn.Module) else None,
        tokenizer=tokenizer,
        layout=layout,
        token_saliency=token_saliency,
    )
    total = len(names) + 2
    page = _Page()
    _model_summary(page, cap, module, names, model_name)
    for line in notes:
        page.add(f'<p class="warn">{_e(line)}</p>')

    page.section("input", "Input")
    page.add(f"<p>{_e(input_name or '–')}</p>")
    if image is not None:
        page.figure(
            "input", image, f"the input as the model sees it ({image.shape[1]}×{image.shape[0]})"
        )
    page.add(f'<p class="muted">input shapes: {_e(_input_shapes(cap.inputs))}</p>')

    _predictions(page, prepared, cap, baseline, categories)

    if progress is not None:
        progress(0, total, "saliency and Grad-CAM")
    pictures, attribution = attribution_images(cap, prepared, image, gradcam_layer)
    if pictures or attribution.get("gradcam_error"):
        page.section("attribution", "Saliency and Grad-CAM")
        for key, (picture, _values) in pictures.items():
            page.figure(
                key,
                picture,
                {
                    "saliency": attribution.get("saliency_of", "saliency |d target / d input|"),
                    "gradcam": f"Grad-CAM at {attribution.get('gradcam_layer')}",
                    "rollout": "attention rollout",
                }[key],
            )
        if attribution.get("gradcam_error"):
            page.add(f'<p class="warn">Grad-CAM: {_e(attribution["gradcam_error"])}</p>')

    page.section("layers", f"Layers ({len(names)})")
    page.add(
        '<p class="muted">Activations (each tile its own colour scale unless stated) and '
        "|d target / d output| per layer, as <code>actviz export</code> draws them.</p>"
        if names
        else _no_layers_text(cap)
    )
    for i, name in enumerate(names):
        if progress is not None:
            progress(i + 1, total, name)
        rec = cap[name]
        layer = prepared.layers.get(name)
        anchor = _anchor("layer", name)
        page.sub(anchor, name or "(model)")
        t = rec.tensor
        meta = (
            f"{rec.module_type} · {_shape(tuple(t.shape)) if t is not None else 'no tensor output'}"
        )
        page.add(
            f'<details id="{_e(anchor)}" open><summary>{_e(name or "(model)")} '
            f'<span class="meta">{_e(meta)}</span></summary>'
        )
        base = safe_name(name)
        if layer is not None and layer.view is not None:
            for suffix, picture in layer_page_images(
                base, "features", layer, cmap, normalize=normalize
            ):
                if not suffix.endswith("_1x"):
                    page.figure(
                        f"features:{name}{suffix}",
                        picture,
                        f"{name or '(model)'} activations{suffix}",
                    )
        if rec.grad is not None:
            grad = layer if layer is not None and layer.grad_view is not None else rec.grad
            for suffix, picture in layer_page_images(
                base,
                "grad",
                grad,
                cmap,
                title=f"|d target / d {name or 'output'}|",
                normalize=normalize,
            ):
                if not suffix.endswith("_1x"):
                    page.figure(
                        f"grad:{name}{suffix}", picture, f"{name or '(model)'} |gradient|{suffix}"
                    )
        if layer is None or (layer.view is None and rec.grad is None):
            page.add('<p class="muted">Nothing to draw for this output.</p>')
        page.add("</details>")

    _sequence_views(page, prepared, names)
    _stats_table(page, prepared, names, cap)
    if comparison is not None:
        _comparison(page, comparison, comparison_label)
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
        rows = [
            (_e(layer), _e(edit.describe())) for layer, items in cap.edits.items() for edit in items
        ]
        page.add(_table(("layer", "edit"), rows, left=2))
    else:
        page.add('<p class="muted">No edits: the model as it is.</p>')
    page.section("reproduce", "reproduce.py")
    page.add(
        "<p>The script <code>actviz export</code> writes beside its arrays; it rebuilds this run "
        "with actviz's public API.</p>"
    )
    page.add(f"<pre>{_e(_reproduce_text(cap, source, names))}</pre>")
    _reproduce_files(page, cap, source)

    if progress is not None:
        progress(total - 1, total, "writing")
    title = title or f"actviz report: {model_name or 'model'}"
    subtitle = " · ".join(
        x
        for x in (
            input_name,
            prepared.target_text or cap.target_description,
            f"{len(names)} layers",
        )
        if x
    )
    text = page.html(title, subtitle)
    check_out_file(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    if progress is not None:
        progress(total, total, "done")
    return ReportInfo(out, out.stat().st_size, tuple(page.panels))


#: The largest input tensors the report carries for reproduce.py (bytes, before base64).
CARRIED_INPUT_BYTES = 32 * 2**20


def _reproduce_files(page: _Page, cap: Capture, source: RunSource | None) -> None:
    """The files reproduce.py reads that only a report can carry: the input tensors, when
    the input has no file to reopen (the script read ``reproduce_inputs.pt``, which the
    report did not hold), as a link that saves them."""
    if source is not None and source.input is not None:
        return
    buf = io.BytesIO()
    try:
        torch.save(cap.inputs, buf)
    except Exception:  # noqa: BLE001 - an input torch cannot save: said, not carried
        page.add('<p class="warn">The input cannot be saved for reproduce.py.</p>')
        return
    data = buf.getvalue()
    if len(data) > CARRIED_INPUT_BYTES:
        page.add(
            '<p class="muted">The input is too large to carry here '
            f"({len(data) / 2**20:.0f} MiB): <code>actviz export</code> writes "
            "<code>reproduce_inputs.pt</code> beside the script.</p>"
        )
        return
    href = "data:application/octet-stream;base64," + base64.b64encode(data).decode("ascii")
    page.add(
        f'<p>The script reads the input from <a download="reproduce_inputs.pt" href="{href}">'
        "reproduce_inputs.pt</a>: save it beside the script.</p>"
    )


def _with_input_gradient(cap: Capture, model: torch.nn.Module) -> Capture:
    """``cap`` with its input gradient, for the saliency: a window's run skips it while no
    saliency is on screen (the Overview never shown), and the report then had none. Taken
    again with the run's target and edits; ``cap`` as it is when that cannot be had or
    would differ (another target resolved, a failure)."""
    from actviz.core.targets import fixed_default

    if cap.input_grads is not None or not cap.gradients or cap.inputs is None:
        return cap
    # A one-row classifier's class is an int target whether chosen or auto (held to the
    # unedited top-1); elsewhere the run's target is the default.
    target = cap.target_index if fixed_default(cap.output) is not None else None
    try:
        from actviz.core.capture import capture

        again = capture(model, cap.inputs, [], target=target, edits=cap.edits or None)
    except Exception:  # noqa: BLE001 - the report goes on without a saliency
        log.debug("no input gradient for the report's saliency", exc_info=True)
        return cap
    if again.input_grads is None or again.target_index != cap.target_index:
        return cap
    return dataclasses.replace(cap, input_grads=again.input_grads)


def write_result_report(result: Any, path: str | os.PathLike[str], **kwargs: Any) -> ReportInfo:
    """:func:`write_report` of a prepared run as the window shows it
    (:class:`actviz.display.prepared.RunResult`): its capture, input image, panels (layers),
    colour map, normalisation, Grad-CAM layer, class names and, for an edited run, the
    unedited one. ``kwargs`` adds or overrides :func:`write_report`'s arguments (``model``,
    ``model_name``, ``source``, ``comparison``, ``figures``, ...).

    Raises
    ------
    ValueError
        When the result holds no capture (it was freed).
    """
    if result.capture is None:
        raise ValueError("this result holds no capture to report")
    spec = result.spec
    args: dict[str, Any] = {
        "image": result.image,
        "categories": spec.categories,
        "cmap": spec.colormap,
        "normalize": spec.normalize,
        "gradcam_layer": spec.gradcam_layer,
        "layers": [n for n in (result.shown or spec.layers) if n in result.capture],
        "baseline": result.baseline,
        "tokens": spec.tokens,
        "tokenizer": spec.tokenizer,
        "layout": spec.layout,
        "token_saliency": result.token_saliency,
    }
    args.update(kwargs)
    return write_report(result.capture, path, **args)


def _input_shapes(obj: Any) -> str:
    if isinstance(obj, torch.Tensor):
        return f"{_shape(tuple(obj.shape))} {str(obj.dtype).replace('torch.', '')}"
    if isinstance(obj, dict):
        return ", ".join(f"{k}: {_input_shapes(v)}" for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return "(" + ", ".join(_input_shapes(v) for v in obj) + ")"
    return type(obj).__name__
